package a2aproxy_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket/a2aproxy"
)

// TestUsageTraceIDWithAndWithoutTracer: for every traceparent of the W3C
// cases, the usage row keeps the buyer's trace id with a tracer exactly
// when it does without one (and starts a new trace in both otherwise).
func TestUsageTraceIDWithAndWithoutTracer(t *testing.T) {
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	agent := startCoreAgent(t, "1.0")
	plain, pm := startCore(t, agent)
	traced, tm, _ := startTracedCore(t, agent, true)
	hs, kept := a2aproxy.TraceparentCases()
	for i, h := range hs {
		for _, c := range []struct {
			name string
			app  *fiber.App
			m    *coreMarket
		}{{"without a tracer", plain, pm}, {"with a tracer", traced, tm}} {
			before := len(c.m.usage())
			req := httptest.NewRequest("POST", "/a2a/lst_core", strings.NewReader(send10))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer amk_acme")
			req.Header.Set("A2A-Version", "1.0")
			if h != "" {
				req.Header.Set("traceparent", h)
			}
			res, err := c.app.Test(req, 10_000)
			if err != nil || res.StatusCode != 200 {
				t.Fatalf("%q %s: %v %v", h, c.name, res, err)
			}
			rows := c.m.usage()
			if len(rows) != before+1 {
				t.Fatalf("%q %s: %d usage rows, want one more than %d", h, c.name, len(rows), before)
			}
			got := rows[len(rows)-1].TraceID
			if (got == id) != kept[i] || len(got) != 32 || got == strings.Repeat("0", 32) {
				t.Errorf("%q %s: usage trace id %q, want the buyer's kept: %v", h, c.name, got, kept[i])
			}
		}
	}
}
