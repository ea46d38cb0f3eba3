package a2aproxy

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// traceContext is the W3C trace context of a call: the caller's trace id
// (or a new one), carried to the agent under a new span of the meter's.
type traceContext struct {
	traceID string // 32 hex
	spanID  string // the meter's own span, 16 hex
	flags   string
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// parseTraceparent reads a traceparent header ("00-<trace>-<span>-<flags>");
// an absent or malformed one starts a new trace. What it keeps is copied:
// the header Fiber hands over aliases a buffer the connection's next
// request overwrites, and a trace outlives its request (a stream settled
// after its buyer left, a cascade of cancels).
func parseTraceparent(h string) traceContext {
	parts := strings.Split(strings.TrimSpace(h), "-")
	if len(parts) == 4 && len(parts[0]) == 2 && parts[0] != "ff" && isHex(parts[1], 32) && isHex(parts[2], 16) && isHex(parts[3], 2) &&
		parts[1] != strings.Repeat("0", 32) {
		return traceContext{traceID: strings.Clone(parts[1]), spanID: randomHex(8), flags: strings.Clone(parts[3])}
	}
	return traceContext{traceID: randomHex(16), spanID: randomHex(8), flags: "01"}
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// child is the traceparent sent to the agent: the meter's span as parent.
func (t traceContext) child() string { return "00-" + t.traceID + "-" + t.spanID + "-" + t.flags }

// header is the traceparent returned to the buyer.
func (t traceContext) header() string { return t.child() }
