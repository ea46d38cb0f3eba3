package listings_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/httpfetch"
	"github.com/agentmarket/agentmarket/listings/httpfetch/httpfetchtest"
)

type downAlerts struct {
	mu  sync.Mutex
	got []listings.AgentHealth
}

func (d *downAlerts) AgentDown(_ context.Context, _ *listings.Listing, h listings.AgentHealth) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, h)
	return nil
}

func (d *downAlerts) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.got)
}

// TestChecker: the active health checks probe published listings' agents
// with the seller's credential, store transitions only, and alert the
// seller once per down period.
func TestChecker(t *testing.T) {
	ctx := context.Background()
	var failing atomic.Bool
	var probes atomic.Int64
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		probes.Add(1)
		if r.Header.Get("X-Api-Key") != "sk-seller" {
			t.Errorf("probe without the seller's credential: %q", r.Header.Get("X-Api-Key"))
		}
		if failing.Load() {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": "x", "error": map[string]any{"code": -32001, "message": "task not found"}})
	}))
	defer agent.Close()
	e := newEnv(t, true)
	raw := strings.Replace(string(card(t, "translator-v1.0.json")), "http://127.0.0.1:9/a2a", agent.URL+"/a2a", 1)
	l := e.mustCreate(t, seller, listings.CreateInput{Card: json.RawMessage(raw), UpstreamAuth: &listings.UpstreamAuth{Header: "X-Api-Key", Value: "sk-seller"}})
	e.mustCreate(t, seller, listings.CreateInput{Card: json.RawMessage(raw), Draft: true}) // never probed

	alerts := &downAlerts{}
	var ups, downs int
	c := &listings.Checker{Store: e.store, Catalog: e.svc, Prober: &httpfetch.Prober{Guard: httpfetchtest.Loopback(e.dns), Timeout: time.Second},
		Alerter: alerts, Clock: e.clock, Observe: func(up bool) {
			if up {
				ups++
			} else {
				downs++
			}
		}}
	check := func(t *testing.T, want listings.AgentHealth, wantAlerts int) {
		t.Helper()
		if n, err := c.CheckAll(ctx); err != nil || n != 1 {
			t.Fatalf("CheckAll = %d, %v; want the one published listing", n, err)
		}
		got := e.stored(t, l.ID).AgentHealth()
		if got.State != want.State || !got.Since.Equal(want.Since) || got.Cause != want.Cause {
			t.Fatalf("agent health = %+v, want %+v", got, want)
		}
		if alerts.count() != wantAlerts {
			t.Fatalf("%d alerts, want %d", alerts.count(), wantAlerts)
		}
	}

	if h := e.stored(t, l.ID).AgentHealth(); h.State != listings.AgentUnknown {
		t.Fatalf("before any probe: %+v", h)
	}
	check(t, listings.AgentHealth{State: listings.AgentAnswering, Since: t0}, 0)
	e.clock.Advance(time.Minute)
	check(t, listings.AgentHealth{State: listings.AgentAnswering, Since: t0}, 0) // since stays: no transition

	failing.Store(true)
	e.clock.Advance(time.Minute)
	down := listings.AgentHealth{State: listings.AgentDown, Since: t0.Add(2 * time.Minute), Cause: "the agent answered HTTP 502 (a server error)"}
	check(t, down, 1)
	e.clock.Advance(time.Minute)
	check(t, down, 1) // still down: one alert per down period

	failing.Store(false)
	e.clock.Advance(time.Minute)
	check(t, listings.AgentHealth{State: listings.AgentAnswering, Since: t0.Add(4 * time.Minute)}, 1)
	failing.Store(true)
	e.clock.Advance(time.Minute)
	check(t, listings.AgentHealth{State: listings.AgentDown, Since: t0.Add(5 * time.Minute), Cause: down.Cause}, 2)
	if probes.Load() != 6 || ups != 3 || downs != 3 {
		t.Fatalf("%d probes (%d up, %d down), want 6 (3, 3)", probes.Load(), ups, downs)
	}
}
