package main

import (
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// TestKillSwitchOperatorOverOrg: a seller's own switch on its listing does
// not stand in the operator's way. The operator's switch takes its place
// (201, not 409); the seller's switch shows lifted by the operator, so the
// seller lifting it again is a 404 and the listing stays off; the seller
// cannot lift the operator's. The audit log has the take-over lift and the
// set; the seller sees the operator's acts there as "operator".
func TestKillSwitchOperatorOverOrg(t *testing.T) {
	ag := startLongAgent(t, "Contested agent")
	lm := newLongMarket(t, map[string]string{"AGENTMARKET_AUTO_APPROVE": "true"})
	listing, ep := lm.list(t, ag.URL, nil, nil)
	sellerAPI, op := lm.api.with(lm.seller), lm.api.with(operatorKey(t, lm.m))
	refused := func() bool {
		_, rerr := rpc{t: t, url: ep, key: lm.buyer, version: "1.0"}.call("SendMessage", msg10("sign in", nil))
		return rerr != nil && rerr["code"] == float64(wire.CodeSwitchedOff)
	}

	r := sellerAPI.do("POST", "/api/v1/kill-switches", map[string]any{"scope": "listing", "target_id": listing, "reason": "redeploying"})
	if r.Status != 201 {
		t.Fatalf("the seller switching its listing off: %d %s", r.Status, r.Body)
	}
	mine := r.str("id")
	r = op.do("POST", "/api/v1/kill-switches", map[string]any{"scope": "listing", "target_id": listing, "reason": "fraud reports"})
	if r.Status != 201 || r.str("id") == mine {
		t.Fatalf("the operator switching the listing off over the seller's switch: %d %s, want 201", r.Status, r.Body)
	}
	theirs := r.str("id")
	if r := op.do("POST", "/api/v1/kill-switches", map[string]any{"scope": "listing", "target_id": listing, "reason": "twice"}); r.Status != 409 {
		t.Errorf("the operator's second switch: %d %s, want 409", r.Status, r.Body)
	}
	if r := sellerAPI.do("POST", "/api/v1/kill-switches", map[string]any{"scope": "listing", "target_id": listing, "reason": "mine again"}); r.Status != 409 {
		t.Errorf("the seller switching it off again under the operator's: %d %s, want 409", r.Status, r.Body)
	}
	if l := sellerAPI.do("POST", "/api/v1/kill-switches/"+mine+"/lift", map[string]any{"reason": "back"}); l.Status != 404 {
		t.Errorf("the seller lifting its taken-over switch: %d %s, want 404", l.Status, l.Body)
	}
	if l := sellerAPI.do("POST", "/api/v1/kill-switches/"+theirs+"/lift", map[string]any{"reason": "back"}); l.Status != 403 {
		t.Errorf("the seller lifting the operator's switch: %d %s, want 403", l.Status, l.Body)
	}
	waitFor(t, "the listing refused", time.Second, refused)
	time.Sleep(300 * time.Millisecond) // past the meter's 200 ms poll
	if !refused() {
		t.Error("the listing is back on after the seller's attempts, want it off")
	}
	list := sellerAPI.do("GET", "/api/v1/kill-switches?active=true", nil)
	if list.Status != 200 || strings.Contains(string(list.Body), mine) || !strings.Contains(string(list.Body), theirs) {
		t.Errorf("the seller's active switches: %d %s, want only the operator's", list.Status, list.Body)
	}
	a := op.do("GET", "/api/v1/audit?action=kill_switch.lift", nil)
	if a.Status != 200 || !strings.Contains(string(a.Body), mine) || !strings.Contains(string(a.Body), "taken over") {
		t.Errorf("the audit log of lifts: %d %s, want the seller's switch taken over", a.Status, a.Body)
	}
	// The seller's admins see in the audit log that the operator set and
	// lifted, not which of the platform's people or keys did.
	sa := sellerAPI.do("GET", "/api/v1/audit?object_type=kill_switch", nil)
	if body := string(sa.Body); sa.Status != 200 || !strings.Contains(body, theirs) || !strings.Contains(body, `"set_by":"operator"`) ||
		!strings.Contains(body, `"lifted_by":"operator"`) {
		t.Errorf("the seller's audit log of the switches: %d %s, want the operator's acts as \"operator\"", sa.Status, sa.Body)
	}
	if oa := op.do("GET", "/api/v1/audit?object_type=kill_switch", nil); strings.Contains(string(oa.Body), `"set_by":"operator"`) {
		t.Errorf("the operator's audit log names itself \"operator\": %s", oa.Body)
	}
	if l := op.do("POST", "/api/v1/kill-switches/"+theirs+"/lift", map[string]any{"reason": "cleared"}); l.Status != 200 {
		t.Fatalf("the operator lifting: %d %s", l.Status, l.Body)
	}
	waitFor(t, "the listing back", time.Second, func() bool { return !refused() })
}
