package main

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestPushCapsAPI: a buyer lowers the caps of its push deliveries to its
// webhook server through PUT /api/v1/push-caps; a cap above the server's
// (the operator's 4 in flight, 20 a second) gives the server's, and the
// answer says what the deliveries get; bad values are a 422 naming each
// field; another org neither sees nor deletes them, and its own caps for
// the same server leave the first org's alone.
func TestPushCapsAPI(t *testing.T) {
	m := startMarketplace(t, map[string]string{"AGENTMARKET_PUSH_DESTINATION_CAPS": "https://hooks.globex.example=4/20"})
	api := client{t: t, base: m.URL}
	_, globex := signup(t, api, "Globex", "it@globex.example")
	_, initech := signup(t, api, "Initech", "it@initech.example")
	buyer, other := api.with(globex), api.with(initech)

	r := buyer.do("PUT", "/api/v1/push-caps", map[string]any{"url": "https://hooks.globex.example/a2a/tasks", "max_in_flight": 2, "per_second": 100})
	if r.Status != 200 || r.str("destination") != "https://hooks.globex.example:443" || r.JSON["max_in_flight"] != float64(2) || r.JSON["per_second"] != float64(20) ||
		num(r, "requested", "per_second") != 100 || num(r, "destination_caps", "max_in_flight") != 4 || num(r, "destination_caps", "per_second") != 20 {
		t.Fatalf("PUT caps: %d %s; want 200, 2 in flight, 20 a second (100 asked, clamped to the server's 20)", r.Status, r.Body)
	}
	// A server the operator named no caps for has the defaults (8, 50).
	if r := buyer.do("PUT", "/api/v1/push-caps", map[string]any{"url": "https://other.globex.example", "max_in_flight": 20}); r.Status != 200 ||
		r.JSON["max_in_flight"] != float64(8) || r.JSON["per_second"] != float64(50) || r.JSON["requested"].(map[string]any)["per_second"] != nil {
		t.Errorf("PUT caps above the defaults: %d %s; want 8 in flight and 50 a second", r.Status, r.Body)
	}

	for _, tc := range []struct {
		body any
		want []string
	}{
		{map[string]any{"url": "https://hooks.globex.example", "max_in_flight": 0, "per_second": -1}, []string{"max_in_flight:range", "per_second:range"}},
		{map[string]any{"url": "ftp://hooks.globex.example", "max_in_flight": 1}, []string{"url:url"}},
		{map[string]any{"url": "https://hooks.globex.example"}, []string{"max_in_flight:required"}},
		{map[string]any{"max_in_flight": 1}, []string{"url:url"}},
	} {
		if r := buyer.do("PUT", "/api/v1/push-caps", tc.body); r.Status != 422 || !slices.Equal(r.errorFields(), tc.want) {
			t.Errorf("PUT %v: %d %s, want 422 %v", tc.body, r.Status, r.Body, tc.want)
		}
	}
	if r := buyer.do("PUT", "/api/v1/push-caps", `{"url":"https://hooks.globex.example","max_in_flight":1.5}`); r.Status != 422 || !slices.Equal(r.errorFields(), []string{"max_in_flight:type"}) {
		t.Errorf("PUT a fractional max_in_flight: %d %s, want 422 max_in_flight:type", r.Status, r.Body)
	}

	// The other org: sees none, deletes none, sets its own.
	if r := other.do("GET", "/api/v1/push-caps", nil); r.Status != 200 || len(r.JSON["items"].([]any)) != 0 {
		t.Errorf("another org's GET: %d %s, want no items", r.Status, r.Body)
	}
	if r := other.do("DELETE", "/api/v1/push-caps?url=https://hooks.globex.example", nil); r.Status != 404 {
		t.Errorf("another org's DELETE: %d %s, want 404", r.Status, r.Body)
	}
	if r := other.do("PUT", "/api/v1/push-caps", map[string]any{"url": "https://hooks.globex.example", "max_in_flight": 1, "per_second": 1}); r.Status != 200 {
		t.Errorf("another org's PUT of its own caps: %d %s", r.Status, r.Body)
	}
	r = buyer.do("GET", "/api/v1/push-caps", nil)
	items, _ := r.JSON["items"].([]any)
	if r.Status != 200 || len(items) != 2 {
		t.Fatalf("GET caps: %d %s, want the buyer's 2", r.Status, r.Body)
	}
	if c := items[0].(map[string]any); c["destination"] != "https://hooks.globex.example:443" || c["max_in_flight"] != float64(2) || c["per_second"] != float64(20) {
		t.Errorf("the buyer's caps after the other org set its own: %v", c)
	}

	if r := buyer.do("DELETE", "/api/v1/push-caps?url=https://hooks.globex.example/any/path", nil); r.Status != 204 {
		t.Errorf("DELETE: %d %s, want 204", r.Status, r.Body)
	}
	if r := buyer.do("GET", "/api/v1/push-caps", nil); len(r.JSON["items"].([]any)) != 1 {
		t.Errorf("GET after the DELETE: %s, want the other server's only", r.Body)
	}
	if r := api.do("GET", "/api/v1/push-caps", nil); r.Status != 401 {
		t.Errorf("GET without a key: %d, want 401", r.Status)
	}
}

// num is the number at path in r's JSON (0 when none).
func num(r response, path ...string) float64 {
	n, _ := r.at(path...).(float64)
	return n
}

// TestPushCapsThroughTheMeter: caps a buyer sets through the API bind the
// meter's deliveries. Three push configs of one task at one webhook
// server, capped by the buyer at 1 in flight and 1 a second: the
// agent's one update reaches the server three times (once per config), a
// second apart, not at once.
func TestPushCapsThroughTheMeter(t *testing.T) {
	ag := startLongAgent(t, "Long 1.0 agent")
	hook := startWebhook(t)
	lm := newLongMarket(t, map[string]string{"AGENTMARKET_ADDR": freeAddr(t), "AGENTMARKET_DATA_DIR": t.TempDir()})
	_, ep := lm.list(t, ag.URL, nil, nil)
	if r := lm.api.with(lm.buyer).do("PUT", "/api/v1/push-caps", map[string]any{"url": hook.URL, "max_in_flight": 1, "per_second": 1}); r.Status != 200 {
		t.Fatalf("PUT caps: %d %s", r.Status, r.Body)
	}
	b10 := rpc{t: t, url: ep, key: lm.buyer, version: "1.0"}
	res, rerr := b10.call("SendMessage", map[string]any{"message": msg10("long 4", nil)["message"], "configuration": map[string]any{"returnImmediately": true}})
	if rerr != nil {
		t.Fatalf("send: %v", rerr)
	}
	task, _ := get(res, "task", "id").(string)
	for i := range 3 {
		if _, e := b10.call("CreateTaskPushNotificationConfig", map[string]any{"taskId": task, "id": fmt.Sprintf("cfg-%d", i), "url": hook.URL + "/hook"}); e != nil {
			t.Fatalf("push config %d: %v", i, e)
		}
	}
	ag.Exec.step(task)
	waitFor(t, "three deliveries", 20*time.Second, func() bool { return len(hook.received("/hook")) >= 3 })
	got := hook.received("/hook")
	if gap := got[2].At.Sub(got[0].At); gap < 1500*time.Millisecond {
		t.Errorf("three deliveries to the server within %s; the buyer's caps allow 1 a second", gap)
	}
}
