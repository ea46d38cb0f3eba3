package a2aproxy

import (
	"strings"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// answerType is the Content-Type of an answer that is not an event
// stream, in either binding, result or error: application/a2a+json to a
// 1.0 client that sent its request as application/a2a+json or named it in
// Accept (1.0.1 prefers it, §11.1), application/json to every other
// client (what all of them decode, and what 0.3 requires). v is the
// caller's version, "" while it is not known; a client that sends
// application/a2a+json speaks 1.0, the only version that has it.
//
// JSON-RPC names application/json for 1.0 as well (§9.1), but a client
// that sends application/a2a+json there reads it: it gets what it sent.
func answerType(c exchange, v wire.Version) string {
	if v != wire.V03 && (isA2AJSON(c.Header("Content-Type")) || strings.Contains(c.Header("Accept"), wire.ContentTypeA2A)) {
		return wire.ContentTypeA2A
	}
	return "application/json"
}

// isA2AJSON reports whether a Content-Type is application/a2a+json,
// whatever its parameters and case.
func isA2AJSON(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), wire.ContentTypeA2A)
}
