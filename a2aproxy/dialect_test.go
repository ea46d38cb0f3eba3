package a2aproxy

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/agentcard"
)

// The servers 0.3 HTTP+JSON interfaces are found behind, as they answer a
// GET of a task that does not exist.
func dialectServer(kind string) http.HandlerFunc {
	notFound := `{"error":{"code":404,"status":"NOT_FOUND","message":"task not found","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org"}]}}`
	return func(w http.ResponseWriter, r *http.Request) {
		v1 := strings.HasPrefix(r.URL.Path, "/v1/tasks/")
		root := strings.HasPrefix(r.URL.Path, "/tasks/")
		switch {
		case kind == "a2a-go" && root, kind == "both" && root:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, notFound)
		case kind == "a2a-python" && v1, kind == "both" && v1:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"message":"Task not found"}`)
		case kind == "a2a-python":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"detail":"Not Found"}`)
		case kind == "guarded" && r.Header.Get("X-Key") != "k":
			http.Error(w, "no", http.StatusUnauthorized)
		case kind == "guarded" && root:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, notFound)
		default:
			http.NotFound(w, r)
		}
	}
}

func dialectCall(url string, version wire.Version, binding string) *call {
	return &call{
		target: &Target{ListingID: "l-1", UpstreamAuth: &listings.UpstreamAuth{Header: "X-Key", Value: "k"}},
		iface:  agentcard.Interface{URL: url, Binding: binding, ProtocolVersion: string(version)},
		lim:    Limits{RequestTimeout: 5 * time.Second}, upVersion: version,
	}
}

func TestAgentDialect(t *testing.T) {
	for _, tc := range []struct {
		server  string
		version wire.Version
		binding string
		want    wire.Dialect
		probes  int
	}{
		{"a2a-go", wire.V03, agentcard.BindingHTTPJSON, wire.DialectSDK03, 2},
		{"a2a-python", wire.V03, agentcard.BindingHTTPJSON, wire.DialectSpec, 1},
		{"both", wire.V03, agentcard.BindingHTTPJSON, wire.DialectSpec, 1},
		{"nothing", wire.V03, agentcard.BindingHTTPJSON, wire.DialectSpec, 2},
		{"guarded", wire.V03, agentcard.BindingHTTPJSON, wire.DialectSDK03, 2},
		{"a2a-go", wire.V10, agentcard.BindingHTTPJSON, wire.DialectSpec, 0},
		{"a2a-go", wire.V03, agentcard.BindingJSONRPC, wire.DialectSpec, 0},
	} {
		t.Run(tc.server+"/"+string(tc.version)+"/"+tc.binding, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n.Add(1)
				dialectServer(tc.server)(w, r)
			}))
			defer srv.Close()
			clock := agentmarket.NewManualClock(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
			p := guardedProxy(t, clock)
			cl := dialectCall(srv.URL+"/", tc.version, tc.binding)
			if d := p.agentDialect(t.Context(), cl); d != tc.want {
				t.Errorf("dialect %s, want %s", d, tc.want)
			}
			if got := int(n.Load()); got != tc.probes {
				t.Errorf("%d probes, want %d", got, tc.probes)
			}
			// Remembered, then probed again once no longer trusted.
			p.agentDialect(t.Context(), cl)
			if got := int(n.Load()); got != tc.probes {
				t.Errorf("%d probes after a second call, want %d", got, tc.probes)
			}
			clock.Advance(dialectTTL)
			if d := p.agentDialect(t.Context(), cl); d != tc.want || int(n.Load()) != 2*tc.probes {
				t.Errorf("after %s: %s, %d probes", dialectTTL, d, n.Load())
			}
		})
	}
}

func TestAgentDialectUnreachable(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() { // the connection drops: no answer at all
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		dialectServer("a2a-go")(w, r)
	}))
	defer srv.Close()
	clock := agentmarket.NewManualClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	p := guardedProxy(t, clock)
	cl := dialectCall(srv.URL, wire.V03, agentcard.BindingHTTPJSON)
	if d := p.agentDialect(t.Context(), cl); d != wire.DialectSpec {
		t.Errorf("dialect %s of an agent that does not answer", d)
	}
	// Remembered a few seconds only (calls meanwhile cost no probe), then
	// the agent is probed again.
	down.Store(false)
	if d := p.agentDialect(t.Context(), cl); d != wire.DialectSpec {
		t.Errorf("dialect %s right after a probe went unanswered, want the spec's (no new probe yet)", d)
	}
	clock.Advance(dialectRetry)
	if d := p.agentDialect(t.Context(), cl); d != wire.DialectSDK03 {
		t.Errorf("dialect %s once the agent answers", d)
	}
}

// TestAgentDialectOneProbe: concurrent first calls wait for one probe.
func TestAgentDialectOneProbe(t *testing.T) {
	var n atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		<-release
		dialectServer("a2a-go")(w, r)
	}))
	defer srv.Close()
	p := guardedProxy(t, agentmarket.SystemClock{})
	var wg sync.WaitGroup
	got := make([]wire.Dialect, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = p.agentDialect(context.Background(), dialectCall(srv.URL, wire.V03, agentcard.BindingHTTPJSON))
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	for i, d := range got {
		if d != wire.DialectSDK03 {
			t.Errorf("call %d: %s", i, d)
		}
	}
	if n.Load() != 2 {
		t.Errorf("%d probe requests, want 2", n.Load())
	}
}
