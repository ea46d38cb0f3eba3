package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts/redis/redistest"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// TestKillSwitchAcrossMeters: two meters share PostgreSQL and Redis. A
// buyer streams a long task through the second; the operator switches the
// listing off through the first's API. Within a second the stream ends
// with -32048 and the agent gets the task's CancelTask; new calls through
// either meter are refused with -32048 (403 SWITCHED_OFF on HTTP+JSON);
// the audit log has the switch with the operator and the reason; lifting
// it restores calls on both meters.
func TestKillSwitchAcrossMeters(t *testing.T) {
	env := sharedEnv(relationaltest.PostgresDSN(t), redistest.Start(t).URL)
	env["AGENTMARKET_POLICY_RELOAD"] = "100ms" // the other meter learns of the subscription at once
	ag := startLongAgent(t, "Switchable agent")
	lm := newLongMarket(t, env)
	listing, ep1 := lm.list(t, ag.URL, nil, nil)
	second := startMarketplace(t, env)
	ep2 := second.URL + "/a2a/" + listing
	sendOK := func(ep string) map[string]any {
		t.Helper()
		_, rerr := rpc{t: t, url: ep, key: lm.buyer, version: "1.0"}.call("SendMessage", msg10("long 0", nil))
		return rerr
	}
	waitFor(t, "the second meter to admit the buyer", 10*time.Second, func() bool { return sendOK(ep2) == nil })

	evs, leave := openStream(t, rpc{t: t, url: ep2, key: lm.buyer, version: "1.0"}, "SendStreamingMessage", msg10("long 5", nil))
	defer leave()
	task, _ := get(<-evs, "result", "task", "id").(string)
	if task == "" {
		t.Fatal("the stream's first event names no task")
	}
	ag.Exec.step(task)
	for l := next(t, evs); l != "part 1;"; l = next(t, evs) {
	}

	op := lm.api.with(operatorKey(t, lm.m))
	const reason = "the agent leaks other buyers' data"
	set := time.Now()
	r := op.do("POST", "/api/v1/kill-switches", map[string]any{"scope": "listing", "target_id": listing, "reason": reason})
	if r.Status != 201 || r.str("scope") != "listing" || r.str("reason") != reason {
		t.Fatalf("switch the listing off: %d %s", r.Status, r.Body)
	}
	ks := r.str("id")

	// The stream ends with the switch's error as its last event.
	var last map[string]any
	func() {
		timeout := time.After(time.Second)
		for {
			select {
			case ev, ok := <-evs:
				if !ok {
					return
				}
				last = ev
			case <-timeout:
				t.Fatalf("the stream was not ended within 1 s of the switch (last event %v)", last)
			}
		}
	}()
	if code := get(last, "error", "code"); code != float64(wire.CodeSwitchedOff) || !strings.Contains(get(last, "error", "message").(string), ks) {
		t.Errorf("the stream's last event: %v, want error -32048 naming %s", last, ks)
	}
	ended := time.Since(set)
	waitFor(t, "the agent to get the task's cancel", time.Second, func() bool {
		for _, x := range ag.calls("CancelTask") {
			if strings.Contains(x.ReqBody, task) {
				return true
			}
		}
		return false
	})
	if d := time.Since(set); d > 1500*time.Millisecond { // waitFor polls every 50 ms
		t.Errorf("the task was canceled at the agent %s after the switch, want within 1 s", d)
	}
	t.Logf("stream ended %s and task canceled at the agent %s after the switch", ended, time.Since(set))

	for _, ep := range []string{ep1, ep2} {
		if rerr := sendOK(ep); rerr == nil || rerr["code"] != float64(wire.CodeSwitchedOff) {
			t.Errorf("a new call through %s: %v, want -32048", ep, rerr)
		}
		status, res, _ := restCall(t, lm.buyer, "POST", ep+"/message:send", "1.0",
			map[string]any{"message": map[string]any{"messageId": "ks-rest", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "hi"}}}})
		if b, _ := json.Marshal(res); status != 403 || !strings.Contains(string(b), "SWITCHED_OFF") {
			t.Errorf("an HTTP+JSON call through %s: %d %s, want 403 SWITCHED_OFF", ep, status, b)
		}
	}

	// The audit log: who and why.
	a := op.do("GET", "/api/v1/audit?action=kill_switch.set", nil)
	if a.Status != 200 || !strings.Contains(string(a.Body), ks) || !strings.Contains(string(a.Body), reason) || !strings.Contains(string(a.Body), `"operator":true`) {
		t.Errorf("the audit log: %d %s, want the switch with the operator and the reason", a.Status, a.Body)
	}
	// The seller sees it on its listing, as the operator's.
	s := lm.api.with(lm.seller).do("GET", "/api/v1/kill-switches?active=true", nil)
	if s.Status != 200 || !strings.Contains(string(s.Body), ks) || !strings.Contains(string(s.Body), `"set_by":"operator"`) {
		t.Errorf("the seller's kill switches: %d %s", s.Status, s.Body)
	}
	// The seller cannot lift the operator's switch.
	if r := lm.api.with(lm.seller).do("POST", "/api/v1/kill-switches/"+ks+"/lift", map[string]any{"reason": "we fixed it"}); r.Status != 403 {
		t.Errorf("the seller lifting the operator's switch: %d %s, want 403", r.Status, r.Body)
	}

	if r := op.do("POST", "/api/v1/kill-switches/"+ks+"/lift", map[string]any{"reason": "the seller fixed the agent"}); r.Status != 200 || r.str("lift_reason") == "" {
		t.Fatalf("lift: %d %s", r.Status, r.Body)
	}
	for _, ep := range []string{ep1, ep2} {
		waitFor(t, "calls through "+ep+" again", time.Second, func() bool { return sendOK(ep) == nil })
	}
}

// TestKillSwitchOwners: who may switch what off. A seller switches off its
// own listing but not another seller's; a buyer org's admin switches off
// its own key (that key's calls are refused and its open task is canceled
// at the agent, the org's other keys and their tasks go on)
// and its own task, but not another org's key or task, which it is told do
// not exist; a buyer key that is not an admin switches nothing off; an org
// cannot lift another org's switch.
func TestKillSwitchOwners(t *testing.T) {
	ag := startLongAgent(t, "Owned agent")
	lm := newLongMarket(t, map[string]string{"AGENTMARKET_AUTO_APPROVE": "true"})
	listing, ep := lm.list(t, ag.URL, nil, nil)
	_, rival := signup(t, lm.api, "Rival Agents", "owner@rival.example")
	rivalAPI, buyerAPI := lm.api.with(rival), lm.api.with(lm.buyer)
	_, intruder := signup(t, lm.api, "Intruder", "it@intruder.example")
	intruderAPI := lm.api.with(intruder)
	send := func(key string) (string, map[string]any) {
		t.Helper()
		res, rerr := rpc{t: t, url: ep, key: key, version: "1.0"}.call("SendMessage", msg10("sign in", nil))
		id, _ := get(res, "task", "id").(string)
		return id, rerr
	}
	keyID, key := mintKey(t, buyerAPI, map[string]any{"name": "orchestrator", "role": "buyer"})
	task, rerr := send(lm.buyer)
	if rerr != nil || task == "" {
		t.Fatalf("a send: %v", rerr)
	}

	// Attackers.
	for _, c := range []struct {
		name   string
		api    client
		body   map[string]any
		status int
	}{
		{"another seller, the listing", rivalAPI, map[string]any{"scope": "listing", "target_id": listing, "reason": "x"}, 403},
		{"another org, the buyer's key", intruderAPI, map[string]any{"scope": "api_key", "target_id": keyID, "reason": "x"}, 404},
		{"another org, the buyer's task", intruderAPI, map[string]any{"scope": "task", "listing_id": listing, "target_id": task, "reason": "x"}, 404},
		{"a buyer, a whole org", buyerAPI, map[string]any{"scope": "buyer_org", "target_id": lm.buyerOrg, "reason": "x"}, 403},
		{"a buyer key that is not an admin, its org's key", lm.api.with(key), map[string]any{"scope": "api_key", "target_id": keyID, "reason": "x"}, 404},
		{"no reason", buyerAPI, map[string]any{"scope": "api_key", "target_id": keyID}, 422},
	} {
		if r := c.api.do("POST", "/api/v1/kill-switches", c.body); r.Status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, r.Status, r.Body, c.status)
		}
	}
	keyTask, rerr := send(key)
	if rerr != nil {
		t.Fatalf("the key after the attempts: %v, want it still calls", rerr)
	}

	// The buyer's admin switches its own key off: that key is refused at
	// once (the embedded meter polls every 200 ms), the org's other keys go
	// on. The key's task is projected first (the shipper's batches settle
	// every 500 ms here), so that the switch finds it by its key.
	time.Sleep(time.Second)
	r := buyerAPI.do("POST", "/api/v1/kill-switches", map[string]any{"scope": "api_key", "target_id": keyID, "reason": "the orchestrator loops"})
	if r.Status != 201 {
		t.Fatalf("the buyer switching its key off: %d %s", r.Status, r.Body)
	}
	keySwitch := r.str("id")
	waitFor(t, "the key refused", time.Second, func() bool {
		_, rerr := send(key)
		return rerr != nil && rerr["code"] == float64(wire.CodeSwitchedOff)
	})
	if _, rerr := send(lm.buyer); rerr != nil {
		t.Errorf("the org's other key: %v, want it still calls", rerr)
	}
	// The key's open task (paused, asking to sign in) is canceled at the
	// agent; the org's other key's task is not.
	canceled := func(id string) bool {
		for _, x := range ag.calls("CancelTask") {
			if strings.Contains(x.ReqBody, id) {
				return true
			}
		}
		return false
	}
	waitFor(t, "the switched key's open task canceled at the agent", 3*time.Second, func() bool { return canceled(keyTask) })
	if canceled(task) {
		t.Errorf("the other key's task %s was canceled by the key's switch", task)
	}
	// The switched key may still read and cancel its task.
	for _, m := range []string{"GetTask", "CancelTask"} {
		if _, rerr := (rpc{t: t, url: ep, key: key, version: "1.0"}).call(m, map[string]any{"id": keyTask}); rerr != nil && rerr["code"] == float64(wire.CodeSwitchedOff) {
			t.Errorf("%s of the switched key's task: %v, want it let through", m, rerr)
		}
	}
	if r := intruderAPI.do("POST", "/api/v1/kill-switches/"+keySwitch+"/lift", map[string]any{"reason": "x"}); r.Status != 404 {
		t.Errorf("another org lifting the buyer's switch: %d %s, want 404", r.Status, r.Body)
	}
	if r := intruderAPI.do("GET", "/api/v1/kill-switches", nil); r.Status != 200 || strings.Contains(string(r.Body), keySwitch) {
		t.Errorf("another org's list: %d %s, want without the buyer's switch", r.Status, r.Body)
	}

	// Its own task: calls on it are refused; the agent gets its cancel.
	r = buyerAPI.do("POST", "/api/v1/kill-switches", map[string]any{"scope": "task", "listing_id": listing, "target_id": task, "reason": "wrong customer"})
	if r.Status != 201 {
		t.Fatalf("the buyer switching its task off: %d %s", r.Status, r.Body)
	}
	waitFor(t, "the task's cancel at the agent", 2*time.Second, func() bool {
		for _, x := range ag.calls("CancelTask") {
			if strings.Contains(x.ReqBody, task) {
				return true
			}
		}
		return false
	})
	waitFor(t, "GetTask refused", time.Second, func() bool {
		_, rerr := rpc{t: t, url: ep, key: lm.buyer, version: "1.0"}.call("GetTask", map[string]any{"id": task})
		return rerr != nil && rerr["code"] == float64(wire.CodeSwitchedOff)
	})

	// A seller switches its own listing off, and lifts it.
	sellerAPI := lm.api.with(lm.seller)
	r = sellerAPI.do("POST", "/api/v1/kill-switches", map[string]any{"scope": "listing", "target_id": listing, "reason": "redeploying"})
	if r.Status != 201 {
		t.Fatalf("the seller switching its listing off: %d %s", r.Status, r.Body)
	}
	if again := sellerAPI.do("POST", "/api/v1/kill-switches", map[string]any{"scope": "listing", "target_id": listing, "reason": "twice"}); again.Status != 409 {
		t.Errorf("a second switch of the same listing: %d %s, want 409", again.Status, again.Body)
	}
	waitFor(t, "the listing refused", time.Second, func() bool {
		_, rerr := send(lm.buyer)
		return rerr != nil && rerr["code"] == float64(wire.CodeSwitchedOff)
	})
	if l := sellerAPI.do("POST", "/api/v1/kill-switches/"+r.str("id")+"/lift", map[string]any{"reason": "back"}); l.Status != 200 {
		t.Fatalf("the seller lifting its switch: %d %s", l.Status, l.Body)
	}
	waitFor(t, "the listing back", time.Second, func() bool { _, rerr := send(lm.buyer); return rerr == nil })
}
