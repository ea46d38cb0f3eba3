package a2aproxy

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"strings"
)

// traceContext is the W3C trace context of a call: the caller's trace id
// (or a new one), carried to the agent under a new span of the meter's.
type traceContext struct {
	traceID string // 32 hex
	spanID  string // the meter's own span, 16 hex
	flags   string
	// parent is the caller's span (the header's parent id), zero when the
	// trace did not come with one: a background call's span is its child
	// only when it is real (spans.go, traceBackground).
	parent [8]byte
}

// randomHex is n random bytes (at most 16) in hex: trace, span and claim
// ids. They need to be unique, not secret: the runtime's per-thread
// ChaCha8 generator (math/rand/v2) makes them without a system call, and
// the hex is built on the stack (one allocation: the string).
func randomHex(n int) string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	var h [32]byte
	hex.Encode(h[:2*n], b[:n])
	return string(h[:2*n])
}

// parseTraceparent reads a traceparent header by the W3C Trace Context
// rules, as the OpenTelemetry SDK's propagator reads it (traced.go uses
// that one when the meter traces): the usage row's trace id must not
// depend on whether tracing is on. Version ff is invalid; a version above
// 00 is read by its first four fields (what follows is a later version's);
// version 00 has exactly four, and no flag beyond sampled (01) and random
// (02, Trace Context Level 2, kept by the SDK too); every field is
// lower-case hex; an all-zero trace or parent span id is invalid. An
// absent or invalid header starts a new trace. Only the sampled and random
// flags are carried on. What it keeps is copied: the header Fiber hands
// over aliases a buffer the connection's next request overwrites, and a
// trace outlives its request (a stream settled after its buyer left, a
// cascade of cancels).
func parseTraceparent(h string) traceContext {
	if traceID, parent, flags, ok := readTraceparent(h); ok {
		tc := traceContext{traceID: strings.Clone(traceID), spanID: randomHex(8), flags: flags}
		for i := range tc.parent {
			tc.parent[i] = hexDigit(parent[2*i])<<4 | hexDigit(parent[2*i+1])
		}
		return tc
	}
	return traceContext{traceID: randomHex(16), spanID: randomHex(8), flags: "01"}
}

// readTraceparent is the trace id, the parent span id and the flags to
// carry on of a valid traceparent header.
func readTraceparent(h string) (traceID, parent, flags string, ok bool) {
	version, h, _ := strings.Cut(h, "-")
	traceID, h, _ = strings.Cut(h, "-")
	parent, h, _ = strings.Cut(h, "-")
	flags, _, more := strings.Cut(h, "-")
	if !isHex(version, 2) || version == "ff" || !isHex(traceID, 32) || !isHex(parent, 16) || !isHex(flags, 2) ||
		traceID == "00000000000000000000000000000000" || parent == "0000000000000000" {
		return "", "", "", false
	}
	if version == "00" && (more || flags[0] != '0' || flags[1] > '3') {
		return "", "", "", false
	}
	// The low two bits are the last hex digit's.
	return traceID, parent, sampledRandom[hexDigit(flags[1])&3], true
}

// sampledRandom are the flags carried on, by their two low bits.
var sampledRandom = [4]string{"00", "01", "02", "03"}

func hexDigit(c byte) byte {
	if c >= 'a' {
		return c - 'a' + 10
	}
	return c - '0'
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
