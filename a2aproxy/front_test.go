package a2aproxy_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestFrontRoutes: Front serves the meter's routes on fasthttp directly,
// matching them as Fiber's router does (case-insensitive, trailing
// slashes ignored), and hands every other request to the app behind it.
func TestFrontRoutes(t *testing.T) {
	agent := startCoreAgent(t, "1.0")
	_, m := startCore(t, agent)
	next := func(c *fasthttp.RequestCtx) { c.SetStatusCode(299); c.SetBodyString("next") }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: m.proxy.Front(next)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	base := "http://" + ln.Addr().String()
	call := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer amk_acme")
		req.Header.Set("A2A-Version", "1.0")
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for _, c := range []struct {
		method, path, body string
		status             int
		has                string
	}{
		{"POST", "/a2a/lst_core", send10, 200, `"id":"task-1"`},
		{"POST", "/a2a/lst_core/", send10, 200, `"id":"task-2"`},
		{"POST", "/A2A/lst_core", send10, 200, `"id":"task-3"`},
		{"GET", "/a2a/lst_core/.well-known/agent-card.json", "", 200, `"url":"http://meter.test/a2a/lst_core"`},
		{"GET", "/a2a/lst_core/.well-known/agent.json", "", 200, `"url":"http://meter.test/a2a/lst_core"`},
		{"GET", "/a2a/lst_nope/.well-known/agent-card.json", "", 404, `"code":"listing_unavailable"`},
		{"POST", "/a2a/lst_core/message:send", `{"message":{"messageId":"m-r","role":"ROLE_USER","parts":[{"text":"hi"}]}}`, 200, `{"task":{"id":"task-4"`},
		{"GET", "/a2a/lst_core/tasks/task-4", "", 200, `"id":"task-4"`},
		{"GET", "/healthz", "", 299, "next"},
		{"POST", "/a2a/", send10, 299, "next"},
		{"GET", "/a2a-callbacks/x", "", 299, "next"},
	} {
		status, body := call(c.method, c.path, c.body)
		if status != c.status || !strings.Contains(body, c.has) {
			t.Errorf("%s %s: %d %s\nwant %d with %s", c.method, c.path, status, body, c.status, c.has)
		}
	}
}
