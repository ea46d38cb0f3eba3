package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// fallbackPricing is the fallback listing's plan: a task costs 7,000
// micros and nothing else does, so its bill is exact.
var fallbackPricing = map[string]any{"currency": "usd", "per_task_micros": 7_000}

// metered is one raw JSON-RPC call through the meter: its status, the
// listing the meter says served it, and its answer.
type metered struct {
	status   int
	servedBy string
	body     map[string]any
	raw      string
}

// meterPost posts a 1.0 JSON-RPC call to a listing's endpoint on the meter.
func meterPost(t *testing.T, endpoint, key, method string, params any) *http.Response {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest("POST", endpoint, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// meterRPC is meterPost's whole answer.
func meterRPC(t *testing.T, endpoint, key, method string, params any) metered {
	t.Helper()
	res := meterPost(t, endpoint, key, method, params)
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := metered{status: res.StatusCode, servedBy: res.Header.Get("AgentMarket-Served-By"), raw: string(raw)}
	_ = json.Unmarshal(raw, &out.body)
	return out
}

func sendParams(text string) map[string]any {
	return map[string]any{"message": map[string]any{"messageId": fmt.Sprintf("m-%d", time.Now().UnixNano()), "role": "ROLE_USER",
		"parts": []any{map[string]any{"text": text}}}, "configuration": map[string]any{"returnImmediately": true}}
}

// TestFallback (issue 26, item 4): a buyer names, on its subscription to
// a listing, a fallback among the listings it also subscribes to (refused:
// one it does not subscribe to, the subscription's own, a duplicate;
// another org neither reads nor sets it). With the primary's agent up,
// calls are its own and say so (AgentMarket-Served-By); killed, a send
// through the primary's endpoint is served by the fallback's official-SDK
// agent, billed on the fallback's plan (7,000 micros a task), attributed
// to the fallback in usage and in the FOCUS export, counted in
// agentmarket_meter_fallbacks_total; the task's GetTask through the
// primary's endpoint reaches the fallback; once the meter ejected the
// primary, sends still go to the fallback. A listing whose agent named a
// task and then dropped the stream, or took a send and dropped it, is
// never replaced by its fallback. On both storage set-ups.
func TestFallback(t *testing.T) {
	databases(t, func(t *testing.T, env map[string]string, _ string) {
		env["AGENTMARKET_HEALTH_CHECK_INTERVAL"] = "0"
		testFallback(t, env)
	})
}

func testFallback(t *testing.T, env map[string]string) {
	m := startMarketplace(t, env)
	api := client{t: t, base: m.URL}
	_, seller := signup(t, api, "Acme Agents", "owner@acme.example")
	_, buyer := signup(t, api, "Globex", "it@globex.example")
	_, other := signup(t, api, "Initech", "it@initech.example")
	a := startSDKAgent(t, "1.0", a2a.TransportProtocolJSONRPC)
	b := startSDKAgent(t, "1.0", a2a.TransportProtocolJSONRPC)
	// Every call dials: the killed agent then refuses the connection.
	a.srv.Config.SetKeepAlivesEnabled(false)
	primary, endpoint := listAndSubscribe(t, api, seller, buyer, a.URL)
	r := api.with(seller).do("POST", "/api/v1/listings", map[string]any{"card_url": b.URL, "pricing": fallbackPricing})
	if r.Status != 201 {
		t.Fatalf("list the fallback: %d %s", r.Status, r.Body)
	}
	fb := r.str("id")
	subscribe := func(key, listing string) string {
		r := api.with(key).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": listing})
		if r.Status != 201 {
			t.Fatalf("subscribe to %s: %d %s", listing, r.Status, r.Body)
		}
		return r.str("id")
	}
	subscribe(buyer, fb)
	otherSub := subscribe(other, fb)
	var primarySub string
	for _, it := range api.with(buyer).do("GET", "/api/v1/subscriptions", nil).JSON["items"].([]any) {
		if s := it.(map[string]any); s["listing_id"] == primary {
			primarySub = s["id"].(string)
		}
	}

	// Configuration: refusals, each on its field.
	put := func(key, sub string, ids ...string) response {
		return api.with(key).do("PUT", "/api/v1/subscriptions/"+sub+"/fallbacks", map[string]any{"listing_ids": ids})
	}
	for _, c := range []struct {
		ids  []string
		want string
	}{
		{[]string{primary}, "listing_ids[0]:self"},
		{[]string{fb, fb}, "listing_ids[1]:duplicate"},
		{[]string{"lst_nobody"}, "listing_ids[0]:not_subscribed"},
	} {
		if r := put(buyer, primarySub, c.ids...); r.Status != 422 || !slices.Contains(r.errorFields(), c.want) {
			t.Errorf("fallbacks %v: %d %s, want 422 %s", c.ids, r.Status, r.Body, c.want)
		}
	}
	if r := put(other, otherSub, primary); r.Status != 422 || !slices.Contains(r.errorFields(), "listing_ids[0]:not_subscribed") {
		t.Errorf("a fallback the org does not subscribe to: %d %s", r.Status, r.Body)
	}
	if r := put(other, primarySub, fb); r.Status != 404 {
		t.Errorf("another org sets the buyer's fallbacks: %d %s, want 404", r.Status, r.Body)
	}
	if r := api.with(other).do("GET", "/api/v1/subscriptions/"+primarySub+"/fallbacks", nil); r.Status != 404 {
		t.Errorf("another org reads the buyer's fallbacks: %d %s, want 404", r.Status, r.Body)
	}
	r = put(buyer, primarySub, fb)
	if r.Status != 200 || fmt.Sprint(r.JSON["fallbacks"]) != "["+fb+"]" {
		t.Fatalf("set the fallback: %d %s", r.Status, r.Body)
	}
	cands, _ := r.JSON["candidates"].([]any)
	if len(cands) != 1 || get(cands[0].(map[string]any), "listing_id") != fb || get(cands[0].(map[string]any), "position") != float64(1) ||
		fmt.Sprint(get(cands[0].(map[string]any), "shared_skill_tags")) != "[test]" {
		t.Errorf("the candidates: %s", r.Body)
	}
	if r := api.with(buyer).do("GET", "/api/v1/subscriptions/"+primarySub, nil); fmt.Sprint(r.JSON["fallbacks"]) != "["+fb+"]" {
		t.Errorf("the subscription's fallbacks: %s", r.Body)
	}
	if r := api.with(buyer).do("GET", "/api/v1/audit?action=subscription.fallbacks&object_id="+primarySub, nil); !strings.Contains(string(r.Body), fb) {
		t.Errorf("the audit log has no entry of the fallbacks set: %d %s", r.Status, r.Body)
	}

	// The buyer console shows the fallback and sets them with its form.
	web := webSession(t, m.URL, "/signin", url.Values{"email": {"it@globex.example"}, "password": {"correct horse battery"}})
	if web == nil {
		t.Fatal("the buyer could not sign in")
	}
	console := func() string {
		res, err := web.Get(m.URL + "/buyer")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	page := console()
	if !strings.Contains(page, `data-candidate="`+fb+`"`) || !strings.Contains(page, `name="pos_`+fb+`" min="0" max="5" value="1"`) ||
		!strings.Contains(page, "data-fallback-list><bdi>SDK 1.0 JSONRPC agent</bdi>") {
		t.Errorf("the buyer console does not show the fallback:\n%s", page)
	}
	setPlace := func(place string) {
		t.Helper()
		token := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(console())
		if token == nil {
			t.Fatal("the console has no CSRF token")
		}
		res, err := web.PostForm(m.URL+"/buyer/subscriptions/"+primarySub+"/fallbacks", url.Values{"csrf": {html.UnescapeString(token[1])}, "pos_" + fb: {place}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("the fallbacks form: %d", res.StatusCode)
		}
	}
	setPlace("0")
	if r := api.with(buyer).do("GET", "/api/v1/subscriptions/"+primarySub+"/fallbacks", nil); fmt.Sprint(r.JSON["fallbacks"]) != "[]" {
		t.Errorf("the fallbacks after the form took them off: %s", r.Body)
	}
	setPlace("1")
	if r := api.with(buyer).do("GET", "/api/v1/subscriptions/"+primarySub+"/fallbacks", nil); fmt.Sprint(r.JSON["fallbacks"]) != "["+fb+"]" {
		t.Errorf("the fallbacks after the form set them: %s", r.Body)
	}

	// The primary up: its own calls, named as such.
	waitFor(t, "the meter to read the fallbacks", 10*time.Second, func() bool {
		return meterRPC(t, endpoint, buyer, "SendMessage", sendParams("hello")).servedBy == primary
	})
	if b.sends(0) != 0 {
		t.Fatalf("with the primary up, the fallback got %d sends", b.sends(0))
	}

	// The primary killed: the fallback serves, through the primary's endpoint.
	a.kill()
	downSend := sendParams("the primary is down")
	got := meterRPC(t, endpoint, buyer, "SendMessage", downSend)
	task, _ := get(got.body, "result", "task", "id").(string)
	if got.status != 200 || got.servedBy != fb || task == "" {
		t.Fatalf("a send with the primary down: %d served by %q: %s; want the fallback's task", got.status, got.servedBy, got.raw)
	}
	if b.sends(0) != 1 {
		t.Errorf("the fallback got %d sends, want 1", b.sends(0))
	}
	if by := get(got.body, "result", "task", "metadata", "https://agentmarket.dev/a2a/extensions/usage/v1", "servedBy"); by != fb {
		t.Errorf("the usage extension of the fallback's task names %v, want %s: %s", by, fb, got.raw)
	}
	// The primary back, the orchestrator's retry of that send (same
	// messageId, same message) is answered with the fallback's task, not
	// made again at the primary.
	a.revive(t)
	a.srv.Config.SetKeepAlivesEnabled(false)
	sentA, sentB := a.sends(0), b.sends(0)
	if again := meterRPC(t, endpoint, buyer, "SendMessage", downSend); get(again.body, "result", "task", "id") != task || again.servedBy != fb ||
		a.sends(0) != sentA || b.sends(0) != sentB {
		t.Errorf("the retry of the send the fallback served: served by %q, %d sends at the primary, %d at the fallback: %s",
			again.servedBy, a.sends(0)-sentA, b.sends(0)-sentB, again.raw)
	}
	a.kill()
	// A call on the task, through the primary's endpoint, reaches the fallback.
	gets := b.rpcs("GetTask")
	gt := meterRPC(t, endpoint, buyer, "GetTask", map[string]any{"id": task})
	if get(gt.body, "result", "id") != task || gt.servedBy != fb || b.rpcs("GetTask") != gets+1 {
		t.Errorf("GetTask of the fallback's task: served by %q, %d GetTasks at the fallback: %s", gt.servedBy, b.rpcs("GetTask")-gets, gt.raw)
	}
	// Ejected after its failures, the primary is not even tried.
	for i := range 6 {
		if got := meterRPC(t, endpoint, buyer, "SendMessage", sendParams(fmt.Sprintf("again %d", i))); got.servedBy != fb || get(got.body, "result", "task", "id") == nil {
			t.Fatalf("send %d with the primary down: served by %q: %s", i, got.servedBy, got.raw)
		}
	}
	page = string(api.do("GET", "/metrics", nil).Body)
	line := fmt.Sprintf(`agentmarket_meter_fallbacks_total{fallback="%s",listing="%s"} 7`, fb, primary)
	if !strings.Contains(page, line) {
		t.Errorf("/metrics has no %s:\n%s", line, grepLines(page, "fallbacks_total"))
	}
	if ready := api.do("GET", "/readyz", nil); !strings.Contains(string(ready.Body), a.URL) {
		t.Errorf("/readyz does not list the ejected primary: %s", ready.Body)
	}

	// Attribution: the fallback's usage rows and bill (7 tasks at 7,000),
	// none billed on the primary.
	byListing := map[string]map[string]any{}
	waitFor(t, "the usage of the fallback's calls", 15*time.Second, func() bool {
		items, _ := api.with(buyer).do("GET", "/api/v1/usage?group_by=listing", nil).JSON["items"].([]any)
		for _, it := range items {
			byListing[get(it.(map[string]any), "key").(string)] = it.(map[string]any)
		}
		return byListing[fb] != nil && get(byListing[fb], "calls") == float64(9) // 7 sends, a replay, a GetTask
	})
	if c := get(byListing[fb], "cost_micros"); c != float64(7*7_000) || get(byListing[fb], "tasks") != float64(7) {
		t.Errorf("the fallback's usage: %v, want 7 tasks at 7,000 micros", byListing[fb])
	}
	if p := byListing[primary]; p == nil || get(p, "tasks") != float64(1) {
		t.Errorf("the primary's usage: %v, want its one task before the kill", p)
	}
	items, _ := api.with(buyer).do("GET", "/api/v1/usage?group_by=tag:fallback_for", nil).JSON["items"].([]any)
	var stoodIn any
	for _, it := range items {
		if get(it.(map[string]any), "key") == primary {
			stoodIn = get(it.(map[string]any), "calls")
		}
	}
	if stoodIn != float64(9) {
		t.Errorf("usage by tag fallback_for: %v calls for the primary, want the 9 the fallback served", stoodIn)
	}
	if page := console(); !strings.Contains(page, "data-fallback-served>9 calls to this agent this month") {
		t.Errorf("the buyer console does not say how many calls fallbacks served:\n%s", page)
	}
	// FOCUS: the fallback's 7 tasks are its rows, billed on its plan (7 ×
	// 7,000 micros: 4.9 cents, invoiced as 5 and spread over the rows); the
	// primary's row has its one task before the kill.
	period := time.Now().UTC().Format("2006-01")
	var tasks, billed map[string]int64
	var lastRows []map[string]string
	defer func() {
		if t.Failed() {
			for _, r := range lastRows {
				t.Logf("FOCUS row: %s %s %s %s", r["x_ListingId"], r["x_LineKind"], r["x_BilledCostMicros"], r["ConsumedQuantity"])
			}
		}
	}()
	waitFor(t, "the FOCUS export of the fallback's tasks", 15*time.Second, func() bool {
		req, _ := http.NewRequest("GET", m.URL+"/api/v1/exports/focus?period="+period, nil)
		req.Header.Set("Authorization", "Bearer "+buyer)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		tasks, billed = map[string]int64{}, map[string]int64{}
		lastRows = focusRecords(t, string(body))
		for _, row := range lastRows {
			if row["x_LineKind"] == "tasks" {
				tasks[row["x_ListingId"]] += atoi64(row["ConsumedQuantity"])
				billed[row["x_ListingId"]] += atoi64(row["x_BilledCostMicros"])
			}
		}
		return tasks[fb] == 7
	})
	if billed[fb] != 50_000 || tasks[primary] != 1 {
		t.Errorf("FOCUS: the fallback's tasks billed %d micros, want 50,000; the primary's tasks %d, want 1", billed[fb], tasks[primary])
	}

	// A stream goes to the fallback as well, relayed event by event.
	if events, by := streamThrough(t, endpoint, buyer); events < 1 || by != fb {
		t.Errorf("a stream with the primary down: %d events, served by %q; want the fallback's", events, by)
	}

	// A listing whose agent took the work and dropped it keeps the call.
	d := startDropper(t)
	dl, dEndpoint := dropperListing(t, api, seller, buyer, d)
	if r := put(buyer, subscriptionOf(t, api, buyer, dl), fb); r.Status != 200 {
		t.Fatalf("the dropper's fallback: %d %s", r.Status, r.Body)
	}
	before := b.sends(0)
	time.Sleep(2500 * time.Millisecond) // the meter's contract cache
	if got := meterRPC(t, dEndpoint, buyer, "SendMessage", sendParams("dropped")); got.servedBy != dl || get(got.body, "error") == nil {
		t.Errorf("a send the agent took and dropped: served by %q: %s; want the listing's error", got.servedBy, got.raw)
	}
	events, servedBy := streamThrough(t, dEndpoint, buyer)
	if events < 1 || servedBy != dl {
		t.Errorf("a stream that named a task: %d events, served by %q", events, servedBy)
	}
	if d.requests.Load() != 2 || b.sends(0) != before {
		t.Errorf("the dropper got %d requests, the fallback %d sends: work the agent took went to the fallback", d.requests.Load(), b.sends(0)-before)
	}
}

// dropperListing lists a card whose one interface is the dropper's and
// subscribes the buyer.
func dropperListing(t *testing.T, api client, seller, buyer string, d *dropper) (listing, endpoint string) {
	t.Helper()
	card := map[string]any{"name": "Dropper", "description": "takes work and drops it", "version": "1.0.0",
		"supportedInterfaces": []any{map[string]any{"url": d.URL, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}},
		"capabilities":        map[string]any{"streaming": true}, "defaultInputModes": []string{"text/plain"}, "defaultOutputModes": []string{"text/plain"},
		"skills": []any{map[string]any{"id": "drop", "name": "Drop", "description": "drops", "tags": []string{"test"}}}}
	r := api.with(seller).do("POST", "/api/v1/listings", map[string]any{"card": card, "pricing": pricing})
	if r.Status != 201 {
		t.Fatalf("list the dropper: %d %s", r.Status, r.Body)
	}
	listing = r.str("id")
	r = api.with(buyer).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": listing})
	if r.Status != 201 {
		t.Fatalf("subscribe to the dropper: %d %s", r.Status, r.Body)
	}
	return listing, r.str("endpoint")
}

func subscriptionOf(t *testing.T, api client, key, listing string) string {
	t.Helper()
	for _, it := range api.with(key).do("GET", "/api/v1/subscriptions", nil).JSON["items"].([]any) {
		if s := it.(map[string]any); s["listing_id"] == listing {
			return s["id"].(string)
		}
	}
	t.Fatalf("no subscription to %s", listing)
	return ""
}

// streamThrough streams a send through the meter and counts the events
// relayed before the stream ended.
func streamThrough(t *testing.T, endpoint, key string) (events int, servedBy string) {
	t.Helper()
	res := meterPost(t, endpoint, key, "SendStreamingMessage", sendParams("stream"))
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data:") && strings.Contains(sc.Text(), `"result"`) {
			events++
		}
	}
	return events, res.Header.Get("AgentMarket-Served-By")
}
