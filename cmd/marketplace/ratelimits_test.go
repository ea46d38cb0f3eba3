package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/cmd/internal/demoagent"
	"github.com/agentmarket/agentmarket/contracts/redis/redistest"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// rpcAnswer posts a JSON-RPC call and returns its HTTP status, headers and
// JSON-RPC error (nil when it succeeded).
func rpcAnswer(t *testing.T, r rpc, method string, params any) (int, http.Header, map[string]any) {
	t.Helper()
	res, err := r.post(method, params)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var out struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: not JSON-RPC (%d): %s", method, res.StatusCode, b)
	}
	return res.StatusCode, res.Header, out.Error
}

// TestRateLimitsOnTheWire: rate limits set through the API, as a buyer
// sees them on the meter: a key's requests per minute answered with
// RateLimit headers, then refused with -32045 on JSON-RPC and with 429 and
// Retry-After on HTTP+JSON; a subscription's tokens per minute debited
// from the agent's reported usage after the call; a listing's calls in
// flight held under concurrency; a subscription's session cap refusing
// one context (-32046) and not another. /readyz says the meter holds them
// on its own.
func TestRateLimitsOnTheWire(t *testing.T) {
	mk := newMarket(t, map[string]string{})
	admin := mk.api.with(mk.buyer)
	if r := mk.api.do("GET", "/readyz", nil); !strings.HasPrefix(fmt.Sprint(get(r.JSON, "checks", "admission_limits", "detail")), "held by this meter on its own") {
		t.Errorf("/readyz of a meter without Redis: %s", r.Body)
	}

	// Only admins set rate limits.
	_, buyerKey := mintKey(t, admin, map[string]any{"name": "orchestrator", "role": "buyer"})
	keyID, limited := mintKey(t, admin, map[string]any{"name": "limited", "role": "buyer"})
	if r := mk.api.with(buyerKey).do("PUT", "/api/v1/api-keys/"+keyID+"/rate-limits", map[string]any{"requests_per_minute": 1000}); r.Status != 403 {
		t.Errorf("a buyer key sets a key's rate limits: %d %s, want 403", r.Status, r.Body)
	}
	if r := admin.do("PUT", "/api/v1/api-keys/"+keyID+"/rate-limits", map[string]any{"requests_per_minute": -1}); r.Status != 422 ||
		strings.Join(r.errorFields(), " ") != "requests_per_minute:range" {
		t.Errorf("a negative limit: %d %s", r.Status, r.Body)
	}
	r := admin.do("PUT", "/api/v1/api-keys/"+keyID+"/rate-limits", map[string]any{"requests_per_minute": 3})
	if r.Status != 200 || get(r.JSON, "rate_limits", "requests_per_minute") != float64(3) {
		t.Fatalf("set the key's rate limits: %d %s", r.Status, r.Body)
	}

	// JSON-RPC: three calls a minute, each told what is left, then -32045.
	b03 := rpc{t: t, url: mk.ep03, key: limited}
	for i := range 3 {
		status, h, e := rpcAnswer(t, b03, "message/send", msg03(fmt.Sprintf("call %d", i), nil))
		if status != 200 || e != nil {
			t.Fatalf("call %d: %d %v", i, status, e)
		}
		if p, l := h.Get("RateLimit-Policy"), h.Get("RateLimit"); p != `"key-rpm";q=3;w=60` || !strings.HasPrefix(l, fmt.Sprintf(`"key-rpm";r=%d;t=`, 2-i)) {
			t.Errorf("call %d: RateLimit-Policy %q, RateLimit %q", i, p, l)
		}
	}
	status, h, e := rpcAnswer(t, b03, "message/send", msg03("a fourth", nil))
	if status != 200 || e == nil || e["code"] != float64(a2aproxy.CodeRateLimited) || h.Get("Retry-After") == "" {
		t.Fatalf("a fourth call in the minute: %d %v, Retry-After %q; want -32045 with Retry-After", status, e, h.Get("Retry-After"))
	}
	// Another key of the org is not limited.
	if _, e := (rpc{t: t, url: mk.ep03, key: buyerKey}).call("message/send", msg03("another key", nil)); e != nil {
		t.Fatalf("another key: %v", e)
	}

	// HTTP+JSON: 429 with Retry-After, in the binding's error shape.
	restID, restKey := mintKey(t, admin, map[string]any{"name": "rest", "role": "buyer"})
	if r := admin.do("PUT", "/api/v1/api-keys/"+restID+"/rate-limits", map[string]any{"requests_per_second": 1, "requests_per_minute": 100}); r.Status != 200 {
		t.Fatalf("set: %d %s", r.Status, r.Body)
	}
	code, body, hdr := restCall(t, restKey, "POST", mk.ep10+"/message:send", "1.0", msg10("over REST", nil))
	if code != 200 || hdr.Get("RateLimit-Policy") != `"key-rps";q=1;w=1, "key-rpm";q=100;w=60` || !strings.Contains(hdr.Get("RateLimit"), `"key-rpm";r=99;`) {
		t.Fatalf("the first REST call: %d %v, RateLimit-Policy %q, RateLimit %q", code, body, hdr.Get("RateLimit-Policy"), hdr.Get("RateLimit"))
	}
	code, body, hdr = restCall(t, restKey, "POST", mk.ep10+"/message:send", "1.0", msg10("over REST again", nil))
	if secs, _ := strconv.Atoi(hdr.Get("Retry-After")); code != 429 || secs < 1 || secs > 2 || get(body, "error", "status") != "RESOURCE_EXHAUSTED" ||
		!strings.Contains(mustJSON(body), `"reason":"RATE_LIMITED"`) {
		t.Fatalf("the second REST call within the second: %d %v, Retry-After %q; want 429, RATE_LIMITED, Retry-After 1-2", code, body, hdr.Get("Retry-After"))
	}

	// Tokens per minute, debited after the call: the 0.3 agent reports 8
	// to 10 tokens a call, so a subscription with 15 a minute admits two
	// calls (the bucket is not empty after the first), then refuses the
	// third until the bucket refills (a few seconds).
	sub03 := mk.subs[mk.id03]
	if r := admin.do("PATCH", "/api/v1/subscriptions/"+sub03, map[string]any{"rate_limits": map[string]any{"tokens_per_minute": 15}}); r.Status != 200 ||
		get(r.JSON, "rate_limits", "tokens_per_minute") != float64(15) {
		t.Fatalf("set the subscription's tokens per minute: %d %s", r.Status, r.Body)
	}
	time.Sleep(2100 * time.Millisecond) // past the meter's contract cache
	_, tokenKey := mintKey(t, admin, map[string]any{"name": "tokens", "role": "buyer"})
	bt := rpc{t: t, url: mk.ep03, key: tokenKey}
	for i := range 2 {
		if _, e := bt.call("message/send", msg03(fmt.Sprintf("tokens %d", i), nil)); e != nil {
			t.Fatalf("call %d under 15 tokens a minute: %v", i, e)
		}
	}
	status, h, e = rpcAnswer(t, bt, "message/send", msg03("tokens 2", nil))
	if secs, _ := strconv.Atoi(h.Get("Retry-After")); e == nil || e["code"] != float64(a2aproxy.CodeRateLimited) || secs < 1 || secs > 20 {
		t.Fatalf("after two calls' tokens of 15 a minute: %d %v, Retry-After %q; want -32045 for 1 to 20 s", status, e, h.Get("Retry-After"))
	}
	if r := admin.do("PATCH", "/api/v1/subscriptions/"+sub03, map[string]any{"rate_limits": map[string]any{}}); r.Status != 200 {
		t.Fatalf("remove: %d %s", r.Status, r.Body)
	}

	// Session caps on the 1.0 listing: two sends a context.
	sub10 := mk.subs[mk.id10]
	if r := admin.do("PATCH", "/api/v1/subscriptions/"+sub10, map[string]any{"session_caps": map[string]any{"max_calls": 2}}); r.Status != 200 ||
		get(r.JSON, "session_caps", "max_calls") != float64(2) {
		t.Fatalf("set the session caps: %d %s", r.Status, r.Body)
	}
	time.Sleep(2100 * time.Millisecond)
	b10 := rpc{t: t, url: mk.ep10, key: mk.buyer, version: "1.0"}
	for i := range 2 {
		if _, e := b10.call("SendMessage", msg10(fmt.Sprintf("in ctx-a %d", i), map[string]any{"contextId": "ctx-a"})); e != nil {
			t.Fatalf("send %d in ctx-a: %v", i, e)
		}
	}
	if _, e := b10.call("SendMessage", msg10("in ctx-a again", map[string]any{"contextId": "ctx-a"})); e == nil || e["code"] != float64(a2aproxy.CodeSessionCapped) {
		t.Fatalf("a third send in ctx-a: %v, want -32046", e)
	}
	if _, e := b10.call("SendMessage", msg10("in ctx-b", map[string]any{"contextId": "ctx-b"})); e != nil {
		t.Fatalf("a send in ctx-b: %v", e)
	}
}

// TestListingInFlightLimit: a seller caps its listing at 2 calls in
// flight over every buyer; 8 concurrent sends to its slow agent get 2
// answered and 6 refused (-32045), and once they end calls go through
// again; two streams under way hold both places until they end.
func TestListingInFlightLimit(t *testing.T) {
	mk := newMarket(t, map[string]string{})
	agent := agentServer(t, demoagent.New(demoagent.Config{Version: "0.3", ReportUsage: true, StepDelay: 300 * time.Millisecond, Name: "Slow"}))
	r := mk.api.with(mk.seller).do("POST", "/api/v1/listings", map[string]any{"card_url": agent.URL, "pricing": pricing,
		"limits": map[string]any{"max_in_flight": 2}})
	if r.Status != 201 || get(r.JSON, "limits", "max_in_flight") != float64(2) {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	listing := r.str("id")
	r = mk.api.with(mk.buyer).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": listing})
	if r.Status != 201 {
		t.Fatalf("subscribe: %d %s", r.Status, r.Body)
	}
	ep := r.str("endpoint")
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, e := (rpc{t: t, url: ep, key: mk.buyer}).call("message/send", msg03(fmt.Sprintf("slow %d", i), nil))
			switch {
			case e == nil:
				admitted.Add(1)
			case e["code"] == float64(a2aproxy.CodeRateLimited):
				refused.Add(1)
			default:
				t.Errorf("call %d: %v", i, e)
			}
		}()
	}
	close(start)
	wg.Wait()
	if admitted.Load() != 2 || refused.Load() != 6 {
		t.Errorf("%d admitted, %d refused under 2 in flight; want 2 and 6", admitted.Load(), refused.Load())
	}
	if _, e := (rpc{t: t, url: ep, key: mk.buyer}).call("message/send", msg03("after", nil)); e != nil {
		t.Errorf("once they ended: %v", e)
	}

	// A stream holds its place until it ends, and its answer carries the
	// remaining quota: with two streams under way a send is refused.
	var open []*bufio.Scanner
	for i, want := range []string{`"listing-inflight";r=1;t=0`, `"listing-inflight";r=0;t=0`} {
		res, err := (rpc{t: t, url: ep, key: mk.buyer}).post("message/stream", msg03(fmt.Sprintf("a long stream %d", i), nil))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if got := res.Header.Get("RateLimit"); got != want {
			t.Errorf("stream %d's RateLimit: %q, want %q", i, got, want)
		}
		sc := bufio.NewScanner(res.Body)
		sc.Scan() // its first event: the stream is under way
		open = append(open, sc)
	}
	if _, e := (rpc{t: t, url: ep, key: mk.buyer}).call("message/send", msg03("beside two streams", nil)); e == nil || e["code"] != float64(a2aproxy.CodeRateLimited) {
		t.Errorf("a send beside two streams under 2 in flight: %v, want -32045", e)
	}
	for _, sc := range open {
		for sc.Scan() {
		}
	}
	if _, e := (rpc{t: t, url: ep, key: mk.buyer}).call("message/send", msg03("after the streams", nil)); e != nil {
		t.Errorf("after the streams ended: %v", e)
	}
}

// TestRateLimitAcrossMeters: two meters sharing Redis (and PostgreSQL)
// hold a key's 20 requests a second together: asked about 100 times a
// second through both, in JSON-RPC and in HTTP+JSON, they admit 20 a
// second past the first, within 5 % over 10 s; every refusal is -32045
// in JSON-RPC, and 429 with a Retry-After in HTTP+JSON. Their /readyz says
// the limits are shared.
func TestRateLimitAcrossMeters(t *testing.T) {
	env := sharedEnv(relationaltest.PostgresDSN(t), redistest.Start(t).URL)
	env["AGENTMARKET_POLICY_RELOAD"] = "100ms"
	first, second := startMarketplace(t, env), startMarketplace(t, env)
	api := client{t: t, base: first.URL}
	_, seller := signup(t, api, "Acme Agents", "owner@acme.example")
	agent := agentServer(t, demoagent.New(demoagent.Config{Version: "1.0", Name: "Fast"}))
	r := api.with(seller).do("POST", "/api/v1/listings", map[string]any{"card_url": agent.URL, "pricing": pricing})
	if r.Status != 201 {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	listing := r.str("id")
	admin := api.with(newBuyerOrg(t, api, "rate across meters"))
	if r := admin.do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": listing}); r.Status != 201 {
		t.Fatalf("subscribe: %d %s", r.Status, r.Body)
	}
	keyID, key := mintKey(t, admin, map[string]any{"name": "limited", "role": "buyer"})
	if r := admin.do("PUT", "/api/v1/api-keys/"+keyID+"/rate-limits", map[string]any{"requests_per_second": 20}); r.Status != 200 {
		t.Fatalf("set: %d %s", r.Status, r.Body)
	}
	time.Sleep(500 * time.Millisecond) // past the second meter's next policy reload
	for _, m := range []*started{first, second} {
		r := (client{t: t, base: m.URL}).do("GET", "/readyz", nil)
		if get(r.JSON, "checks", "admission_limits", "detail") != "shared by every meter through Redis" {
			t.Errorf("/readyz: %s", r.Body)
		}
	}
	eps := []string{first.URL + "/a2a/" + listing, second.URL + "/a2a/" + listing}
	const run, warm = 11 * time.Second, time.Second
	var steady, refused, refused429 atomic.Int64
	begin := time.Now()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := rpc{t: t, url: eps[i%2], key: key, version: "1.0"}
			tick := time.NewTicker(40 * time.Millisecond)
			defer tick.Stop()
			n := 0
			for range tick.C {
				at := time.Since(begin)
				if at >= run {
					return
				}
				n++
				msg := msg10("tick", map[string]any{"messageId": fmt.Sprintf("rl-%d-%d", i, n)})
				ok := false
				if i < 2 { // JSON-RPC through each meter
					_, e := b.call("SendMessage", msg)
					switch {
					case e == nil:
						ok = true
					case e["code"] == float64(a2aproxy.CodeRateLimited):
						refused.Add(1)
					default:
						t.Errorf("JSON-RPC: %v", e)
					}
				} else { // HTTP+JSON through each meter
					status, res, h := restCall(t, key, "POST", eps[i%2]+"/message:send", "1.0", msg)
					switch {
					case status == 200:
						ok = true
					case status == 429 && h.Get("Retry-After") != "":
						refused429.Add(1)
					default:
						t.Errorf("HTTP+JSON: %d %v %v", status, res, h)
					}
				}
				if ok && at >= warm {
					steady.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d admitted in the last %s; refused %d in JSON-RPC, %d in HTTP+JSON (429)", steady.Load(), run-warm, refused.Load(), refused429.Load())
	if n := steady.Load(); n < 190 || n > 210 {
		t.Errorf("%d admitted in %s past the first second under 20 a second through two meters, want 200 ± 5 %%", n, run-warm)
	}
	if refused.Load() == 0 || refused429.Load() == 0 {
		t.Errorf("refusals: %d in JSON-RPC, %d in HTTP+JSON; want both", refused.Load(), refused429.Load())
	}
}
