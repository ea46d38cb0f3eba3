package main

import (
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// TestKillSwitchOwnKey: an admin key switched off by its org's other
// admin cannot lift its own switch (403, and its calls stay refused), nor
// switch itself off; the other admin lifts it.
func TestKillSwitchOwnKey(t *testing.T) {
	ag := startLongAgent(t, "Keyed agent")
	lm := newLongMarket(t, map[string]string{"AGENTMARKET_AUTO_APPROVE": "true"})
	_, ep := lm.list(t, ag.URL, nil, nil)
	buyerAPI := lm.api.with(lm.buyer)
	adminID, admin := mintKey(t, buyerAPI, map[string]any{"name": "ops robot", "role": "admin"})
	adminAPI := lm.api.with(admin)
	refused := func() bool {
		_, rerr := rpc{t: t, url: ep, key: admin, version: "1.0"}.call("SendMessage", msg10("sign in", nil))
		return rerr != nil && rerr["code"] == float64(wire.CodeSwitchedOff)
	}
	if r := adminAPI.do("POST", "/api/v1/kill-switches", map[string]any{"scope": "api_key", "target_id": adminID, "reason": "me"}); r.Status != 403 {
		t.Errorf("a key switching itself off: %d %s, want 403", r.Status, r.Body)
	}
	r := buyerAPI.do("POST", "/api/v1/kill-switches", map[string]any{"scope": "api_key", "target_id": adminID, "reason": "the robot loops"})
	if r.Status != 201 {
		t.Fatalf("the org's admin switching the robot's key off: %d %s", r.Status, r.Body)
	}
	ks := r.str("id")
	waitFor(t, "the key refused", time.Second, refused)
	if l := adminAPI.do("POST", "/api/v1/kill-switches/"+ks+"/lift", map[string]any{"reason": "not me"}); l.Status != 403 {
		t.Errorf("the switched-off key lifting its own switch: %d %s, want 403", l.Status, l.Body)
	}
	time.Sleep(300 * time.Millisecond) // past the meter's 200 ms poll
	if !refused() {
		t.Error("the key calls again after lifting its own switch, want it refused")
	}
	if l := buyerAPI.do("POST", "/api/v1/kill-switches/"+ks+"/lift", map[string]any{"reason": "fixed"}); l.Status != 200 {
		t.Fatalf("the other admin lifting: %d %s", l.Status, l.Body)
	}
	waitFor(t, "the key back", time.Second, func() bool { return !refused() })
}
