package a2aproxy_test

import (
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
func BenchmarkChainSend(b *testing.B) { chainSend(b, "amk_acme") }

// BenchmarkChainSendBudgeted is BenchmarkChainSend with a key under a
// monthly budget: each call also reserves and settles (reserve.go).
func BenchmarkChainSendBudgeted(b *testing.B) { chainSend(b, "amk_budgeted") }

func chainSend(b *testing.B, key string) {
	agent := startCoreAgent(b, "1.0")
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
		req.Header.Set("A2A-Version", "1.0")
		req.Header.SetContentType("application/json")
		req.SetBodyString(fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"m-%d","role":"ROLE_USER","parts":[{"text":"hello there"}]}}}`, i))
		var c fasthttp.RequestCtx
		c.Init(&req, addr, nil)
		h(&c)
		if c.Response.StatusCode() != 200 {
			b.Fatalf("%d %s", c.Response.StatusCode(), c.Response.Body())
		}
	}
}
