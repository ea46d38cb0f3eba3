package httpfetch_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/agentcard"
	"github.com/agentmarket/agentmarket/listings/httpfetch"
)

// TestProbe: what each kind of answer to the health probe means, and the
// probe as the agent receives it.
func TestProbe(t *testing.T) {
	type seen struct{ method, path, a2aVersion, auth, body string }
	var got seen
	agent := func(h func(w http.ResponseWriter, r *http.Request)) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			got = seen{r.Method, r.URL.Path, r.Header.Get("A2A-Version"), r.Header.Get("X-Api-Key"), string(b)}
			h(w, r)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	rpcError := func(code int) func(w http.ResponseWriter, r *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": "x", "error": map[string]any{"code": code, "message": "no"}})
		}
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	slow := agent(func(w http.ResponseWriter, r *http.Request) { time.Sleep(time.Second) })
	auth := &listings.UpstreamAuth{Header: "X-Api-Key", Value: "sk-seller"}

	cases := []struct {
		name string
		in   agentcard.Interface
		want listings.ProbeResult
		seen *seen // what the agent received, when it matters
	}{
		{"1.0 JSON-RPC: TaskNotFound", agentcard.Interface{URL: agent(rpcError(-32001)), Binding: "JSONRPC", ProtocolVersion: "1.0"},
			listings.ProbeResult{Up: true},
			&seen{"POST", "/", "1.0", "sk-seller", `{"id":"agentmarket-health-probe","jsonrpc":"2.0","method":"GetTask","params":{"id":"agentmarket-health-probe"}}`}},
		{"0.3 JSON-RPC: method not found is an A2A answer too", agentcard.Interface{URL: agent(rpcError(-32601)) + "/rpc", Binding: "JSONRPC", ProtocolVersion: "0.3"},
			listings.ProbeResult{Up: true},
			&seen{"POST", "/rpc", "", "sk-seller", `{"id":"agentmarket-health-probe","jsonrpc":"2.0","method":"tasks/get","params":{"id":"agentmarket-health-probe"}}`}},
		{"0.3 HTTP+JSON of the Go SDK: /v1 misses, /tasks answers", agentcard.Interface{URL: agent(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/v1/") {
				http.NotFound(w, r)
				return
			}
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"code":5,"message":"task not found"}`))
		}), Binding: "HTTP+JSON", ProtocolVersion: "0.3"},
			listings.ProbeResult{Up: true}, &seen{"GET", "/tasks/agentmarket-health-probe", "", "sk-seller", ""}},
		{"HTTP 503", agentcard.Interface{URL: agent(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }), Binding: "JSONRPC", ProtocolVersion: "1.0"},
			listings.ProbeResult{Cause: "the agent answered HTTP 503 (a server error)"}, nil},
		{"a web page", agentcard.Interface{URL: agent(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte("<html>hello</html>"))
		}), Binding: "JSONRPC", ProtocolVersion: "1.0"},
			listings.ProbeResult{Cause: "the agent answered HTTP 200 with a text/html body, not an A2A answer (is this the agent's A2A endpoint?)"}, nil},
		{"nothing listens", agentcard.Interface{URL: closed.URL, Binding: "JSONRPC", ProtocolVersion: "1.0"},
			listings.ProbeResult{Cause: "connection refused by " + strings.TrimPrefix(closed.URL, "http://") + ": nothing listens on that port (is the agent running, and on this port?)"}, nil},
		{"no answer in time", agentcard.Interface{URL: slow, Binding: "JSONRPC", ProtocolVersion: "1.0"},
			listings.ProbeResult{Cause: "no answer from " + strings.TrimPrefix(slow, "http://") + " within 300ms"}, nil},
	}
	p := &httpfetch.Prober{Guard: loopback(t), Timeout: 300 * time.Millisecond}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got = seen{}
			r := p.Probe(context.Background(), c.in, auth)
			if r != c.want {
				t.Fatalf("probe = %+v, want %+v", r, c.want)
			}
			if c.seen != nil && got != *c.seen {
				t.Fatalf("the agent received %+v, want %+v", got, *c.seen)
			}
		})
	}
}

// TestProbeGuard: a probe goes through the SSRF guard like every
// connection to agents.
func TestProbeGuard(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the guard let the probe through to loopback")
	}))
	defer srv.Close()
	p := &httpfetch.Prober{Guard: httpfetch.Guard{}, Dialer: &net.Dialer{Timeout: time.Second}}
	r := p.Probe(context.Background(), agentcard.Interface{URL: srv.URL, Binding: "JSONRPC", ProtocolVersion: "1.0"}, nil)
	if r.Up || !strings.HasPrefix(r.Cause, "the marketplace does not connect to "+strings.TrimPrefix(srv.URL, "http://")+": ") {
		t.Fatalf("probe = %+v", r)
	}
}
