package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/contracts"
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

// pushKinds names what each delivery carries: an artifact's text, or a
// status's state.
func pushKinds(calls []hookCall) []string {
	var out []string
	for _, c := range calls {
		switch {
		case c.Body["artifactUpdate"] != nil:
			out = append(out, firstText(get(c.Body, "artifactUpdate", "artifact", "parts")))
		case c.Body["statusUpdate"] != nil:
			out = append(out, fmt.Sprint(get(c.Body, "statusUpdate", "status", "state")))
		default:
			out = append(out, fmt.Sprint(c.Body))
		}
	}
	return out
}

// TestPushConfigCapsThroughTheMeter: a buyer caps one of its push
// configs at 2 a second through PUT /api/v1/push-caps (listing_id,
// task_id, config_id). Two configs of one task at one webhook server
// (127.0.0.1): the agent's 5 steps reach the uncapped config as fast as
// they come, and the capped one each 500 ms apart at least, every
// artifact and the end included. Another org cannot set, see or remove
// the caps of the buyer's config: it gets the answer a config that does
// not exist gets. Bad values are a 422 naming each field. On SQLite and
// on PostgreSQL.
func TestPushConfigCapsThroughTheMeter(t *testing.T) { meterEnvs(t, testPushConfigCapsThroughTheMeter) }

func testPushConfigCapsThroughTheMeter(t *testing.T, e meterEnv) {
	ag := startLongAgent(t, "Long 1.0 agent")
	hook := startWebhook(t)
	env := map[string]string{"AGENTMARKET_ADDR": freeAddr(t), "AGENTMARKET_DATA_DIR": t.TempDir()}
	maps.Copy(env, e.env)
	lm := newLongMarket(t, env)
	listing, ep := lm.list(t, ag.URL, nil, nil)
	_, initech := signup(t, lm.api, "Initech", "it@initech.example")
	buyer, other := lm.api.with(lm.buyer), lm.api.with(initech)
	b10 := rpc{t: t, url: ep, key: lm.buyer, version: "1.0"}
	res, rerr := b10.call("SendMessage", map[string]any{"message": msg10("long 5", nil)["message"], "configuration": map[string]any{"returnImmediately": true}})
	if rerr != nil {
		t.Fatalf("send: %v", rerr)
	}
	task, _ := get(res, "task", "id").(string)
	for _, id := range []string{"capped", "free"} {
		if _, e := b10.call("CreateTaskPushNotificationConfig", map[string]any{"taskId": task, "id": id, "url": hook.URL + "/" + id}); e != nil {
			t.Fatalf("push config %s: %v", id, e)
		}
	}
	capped := map[string]any{"listing_id": listing, "task_id": task, "config_id": "capped"}
	with := func(m map[string]any, kv ...any) map[string]any {
		out := maps.Clone(m)
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}

	// Another org: the buyer's config is as unknown to it as one that
	// does not exist.
	theirs := other.do("PUT", "/api/v1/push-caps", with(capped, "per_second", 0.5))
	none := other.do("PUT", "/api/v1/push-caps", with(capped, "config_id", "no-such-config", "per_second", 0.5))
	if theirs.Status != 404 || none.Status != 404 || theirs.code() != none.code() ||
		strings.ReplaceAll(theirs.str("error", "message"), "capped", "no-such-config") != none.str("error", "message") {
		t.Errorf("another org's PUT on the buyer's config: %d %s; on a config that does not exist: %d %s; want the same 404", theirs.Status, theirs.Body, none.Status, none.Body)
	}

	r := buyer.do("PUT", "/api/v1/push-caps", with(capped, "per_second", 100))
	if r.Status != 200 || r.str("destination") != contracts.Destination(hook.URL) || r.JSON["per_second"] != float64(50) || num(r, "requested", "per_second") != 100 ||
		num(r, "destination_caps", "per_second") != 50 || r.str("config_id") != "capped" {
		t.Fatalf("PUT a config's caps above the server's: %d %s; want 50 a second (100 asked, the server's default 50)", r.Status, r.Body)
	}
	if r := buyer.do("PUT", "/api/v1/push-caps", with(capped, "per_second", 2)); r.Status != 200 || r.JSON["per_second"] != float64(2) {
		t.Fatalf("PUT a config's caps: %d %s", r.Status, r.Body)
	}
	for _, tc := range []struct {
		body any
		want []string
	}{
		{with(capped), []string{"per_second:required"}},
		{with(capped, "per_second", 0.001), []string{"per_second:range"}},
		{with(capped, "per_second", 1, "max_in_flight", 1), []string{"max_in_flight:exclusive"}},
		{with(capped, "per_second", 1, "url", hook.URL), []string{"url:exclusive"}},
		{map[string]any{"task_id": task, "per_second": 1}, []string{"listing_id:required", "config_id:required"}},
	} {
		if r := buyer.do("PUT", "/api/v1/push-caps", tc.body); r.Status != 422 || !slices.Equal(r.errorFields(), tc.want) {
			t.Errorf("PUT %v: %d %s, want 422 %v", tc.body, r.Status, r.Body, tc.want)
		}
	}
	// Another org's attempts changed nothing, and it sees none.
	if r := other.do("GET", "/api/v1/push-caps", nil); r.Status != 200 || len(r.JSON["configs"].([]any)) != 0 {
		t.Errorf("another org's GET: %d %s, want no configs", r.Status, r.Body)
	}
	q := "/api/v1/push-caps?listing_id=" + listing + "&task_id=" + task + "&config_id="
	if theirs, none := other.do("DELETE", q+"capped", nil), other.do("DELETE", q+"no-such-config", nil); theirs.Status != 404 || none.Status != 404 || theirs.code() != none.code() {
		t.Errorf("another org's DELETE: %d %s; of a config with none: %d %s; want the same 404", theirs.Status, theirs.Body, none.Status, none.Body)
	}
	r = buyer.do("GET", "/api/v1/push-caps", nil)
	if cs, _ := r.JSON["configs"].([]any); r.Status != 200 || len(cs) != 1 || cs[0].(map[string]any)["per_second"] != float64(2) || cs[0].(map[string]any)["task_id"] != task {
		t.Fatalf("the buyer's GET: %d %s, want its config capped at 2 a second", r.Status, r.Body)
	}

	for range 5 {
		ag.Exec.step(task)
	}
	want := []string{"part 1;", "part 2;", "part 3;", "part 4;", "part 5;", "TASK_STATE_COMPLETED"}
	done := func(path string) bool {
		k := pushKinds(hook.received(path))
		return len(k) > 0 && k[len(k)-1] == "TASK_STATE_COMPLETED"
	}
	waitFor(t, "the end at both configs", 20*time.Second, func() bool { return done("/free") && done("/capped") })
	free, slow := hook.received("/free"), hook.received("/capped")
	for path, calls := range map[string][]hookCall{"/free": free, "/capped": slow} {
		// A status update before the first artifact may go, or be merged.
		if k := slices.DeleteFunc(pushKinds(calls), func(s string) bool { return s == "TASK_STATE_WORKING" }); !slices.Equal(k, want) {
			t.Errorf("%s got %q, want every artifact and the end: %q", path, k, want)
		}
	}
	for i := 1; i < len(slow); i++ {
		if gap := slow[i].At.Sub(slow[i-1].At); gap < 450*time.Millisecond {
			t.Errorf("the capped config's deliveries %d and %d came %s apart; its cap is 2 a second", i-1, i, gap)
		}
	}
	if span := free[len(free)-1].At.Sub(free[0].At); span > 2*time.Second || !free[len(free)-1].At.Before(slow[len(slow)-1].At) {
		t.Errorf("the uncapped config's deliveries took %s, and ended after the capped one's: the cap slowed it", span)
	}

	if r := other.do("DELETE", q+"capped", nil); r.Status != 404 {
		t.Errorf("another org's DELETE: %d", r.Status)
	}
	if r := buyer.do("DELETE", q+"capped", nil); r.Status != 204 {
		t.Errorf("the buyer's DELETE: %d %s, want 204", r.Status, r.Body)
	}
	if r := buyer.do("GET", "/api/v1/push-caps", nil); len(r.JSON["configs"].([]any)) != 0 {
		t.Errorf("GET after the DELETE: %s, want no configs", r.Body)
	}
}
