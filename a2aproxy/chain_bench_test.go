package a2aproxy_test

import (
	"bytes"
	"fmt"
	"net"
	"testing"

	"github.com/valyala/fasthttp"
)

// BenchmarkChainSend runs a 1.0 SendMessage through the meter's handler
// (Front, the chain, the forward to a loopback agent, the usage row into
// the fakes), with a fresh messageId each time, and reports what one call
// allocates: the call path's own cost, beside the agent's.
//
//	go test -run '^$' -bench ChainSend -benchmem ./a2aproxy/
func BenchmarkChainSend(b *testing.B) {
	for _, v := range []struct {
		name, agent, buyer, body string
	}{
		{"1.0", "1.0", "1.0", `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"m-%d","role":"ROLE_USER","parts":[{"text":"hello there"}]}}}`},
		{"0.3", "0.3", "", `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-%d","role":"user","parts":[{"kind":"text","text":"hello there"}]}}}`},
		// A 0.3 buyer of a 1.0 agent: the request and the answer translated.
		{"bridged", "1.0", "", `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-%d","role":"user","parts":[{"kind":"text","text":"hello there"}]}}}`},
	} {
		b.Run(v.name, func(b *testing.B) { chainSend(b, "amk_acme", v.agent, v.buyer, v.body) })
	}
}

// BenchmarkChainSendBudgeted is BenchmarkChainSend/1.0 with a key under a
// monthly budget: each call also reserves and settles (reserve.go).
func BenchmarkChainSendBudgeted(b *testing.B) {
	chainSend(b, "amk_budgeted", "1.0", "1.0", `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"m-%d","role":"ROLE_USER","parts":[{"text":"hello there"}]}}}`)
}

// BenchmarkChainSendRateLimited is BenchmarkChainSend/1.0 with a key
// under every rate limit, in the meter's memory (no Redis): each call takes
// from its buckets and its place in flight, and gives them back when it
// ends (ratelimit.go).
func BenchmarkChainSendRateLimited(b *testing.B) {
	chainSend(b, "amk_limited", "1.0", "1.0", `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"m-%d","role":"ROLE_USER","parts":[{"text":"hello there"}]}}}`)
}

// chainSend sends body (a format taking the call's number, for a fresh
// messageId) with key, in the buyer's version (none: no header), to an
// agent of version agent, through the meter's handler.
func chainSend(b *testing.B, key, agentVersion, buyer, body string) {
	agent := startCoreAgent(b, agentVersion)
	_, m := startCore(b, agent)
	h := m.proxy.Front(func(c *fasthttp.RequestCtx) { c.SetStatusCode(404) })
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	i := 0
	for b.Loop() {
		i++
		var req fasthttp.Request
		req.Header.SetMethod("POST")
		req.SetRequestURI("/a2a/lst_core")
		req.Header.Set("Authorization", "Bearer "+key)
		if buyer != "" {
			req.Header.Set("A2A-Version", buyer)
		}
		req.Header.SetContentType("application/json")
		req.SetBodyString(fmt.Sprintf(body, i))
		var c fasthttp.RequestCtx
		c.Init(&req, addr, nil)
		h(&c)
		if c.Response.StatusCode() != 200 || !bytes.Contains(c.Response.Body(), []byte(`"result"`)) {
			b.Fatalf("%d %s", c.Response.StatusCode(), c.Response.Body())
		}
	}
}
