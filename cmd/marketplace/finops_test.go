package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/docs/examples/pushverify"
)

// alertHook is an org's alert webhook: it answers 500 to its first
// request, then 200, and records every request.
type alertHook struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []hookRequest
}

type hookRequest struct {
	token, contentType, deliveryID string
	body                           contracts.AlertBody
	raw                            []byte
	signature                      string
}

func newAlertHook(t *testing.T) *alertHook {
	h := &alertHook{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var b contracts.AlertBody
		json.Unmarshal(raw, &b)
		h.mu.Lock()
		h.reqs = append(h.reqs, hookRequest{r.Header.Get("X-A2A-Notification-Token"), r.Header.Get("Content-Type"), r.Header.Get("X-AgentMarket-Delivery-Id"), b,
			raw, r.Header.Get("AgentMarket-Signature")})
		first := len(h.reqs) == 1
		h.mu.Unlock()
		if first {
			http.Error(w, "not now", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *alertHook) received() []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookRequest(nil), h.reqs...)
}

// alerted is the org's alerts this month, as "budget_kind percent".
func (cm *commerceMarket) alerted(t *testing.T, key string) []string {
	r := cm.api.with(key).do("GET", "/api/v1/alerts", nil)
	if r.Status != 200 {
		t.Fatalf("alerts: %d %s", r.Status, r.Body)
	}
	var out []string
	items, _ := r.JSON["items"].([]any)
	for _, it := range items {
		m := it.(map[string]any)
		out = append(out, fmt.Sprintf("%s %v%% %v/%v", m["budget_kind"], m["threshold_percent"], m["spent_micros"], m["monthly_budget_micros"]))
	}
	return out
}

// TestSpendAlerts (issue 14, item 4), on both storage set-ups: an org sets
// its thresholds and its alert webhook; a key's budget reaches 50% then
// 100% through metered calls; each threshold is alerted once, listed by
// the API, and POSTed to the webhook by the meter's push delivery outbox
// with the org's token, retried after the webhook's first failure; bad
// webhook addresses are refused. (Alerts involve no payment provider: the
// same with Stripe.)
func TestSpendAlerts(t *testing.T) {
	meterEnvs(t, func(t *testing.T, e meterEnv) {
		env := map[string]string{"AGENTMARKET_PUSH_RETRY_BASE": "100ms"}
		for k, v := range e.env {
			env[k] = v
		}
		// The plan's per-call ceiling is what the test's call uses, so two
		// calls fit in the budget with their reservations.
		pricing := map[string]any{"max_call_input_tokens": 9, "max_call_output_tokens": 13, "max_call_compute_ms": 91}
		for k, v := range commercePricing {
			if !strings.HasPrefix(k, "trial") {
				pricing[k] = v
			}
		}
		cm := newCommerceMarket(t, env, pricing)
		hook := newAlertHook(t)
		cm.subscribe(t, cm.buyer, map[string]any{})
		r := cm.api.with(cm.buyer).do("POST", "/api/v1/api-keys", map[string]any{"name": "orchestrator", "role": "buyer", "monthly_budget_micros": 2_462})
		if r.Status != 201 {
			t.Fatalf("key: %d %s", r.Status, r.Body)
		}
		key, keyID := r.str("key"), r.str("id")

		if r := cm.api.with(cm.buyer).do("PUT", "/api/v1/alerts/settings", map[string]any{"webhook": map[string]any{"url": "https://10.0.0.1/alerts"}}); r.Status != 422 ||
			strings.Join(r.errorFields(), " ") != "webhook.url:refused" {
			t.Errorf("a private webhook: %d %s", r.Status, r.Body)
		}
		r = cm.api.with(cm.buyer).do("PUT", "/api/v1/alerts/settings", map[string]any{"thresholds": []int{100, 50},
			"webhook": map[string]any{"url": hook.srv.URL + "/alerts", "token": "tok-1"}})
		if r.Status != 200 || fmt.Sprint(r.JSON["thresholds"]) != "[50 100]" || r.str("webhook_url") != hook.srv.URL+"/alerts" {
			t.Fatalf("settings: %d %s", r.Status, r.Body)
		}
		if r := cm.api.with(cm.buyer).do("GET", "/api/v1/alerts/settings", nil); strings.Contains(string(r.Body), "tok-1") {
			t.Errorf("the token is shown back: %s", r.Body)
		}

		// 1,231 micros a call (27 + 195 + 9 + 1,000), a budget of 2,462.
		cm.clock.Advance(time.Minute)
		cm.call(t, key)
		waitFor(t, "the 50% alert", 10*time.Second, func() bool { return len(cm.alerted(t, cm.buyer)) == 1 })
		cm.clock.Advance(time.Minute)
		cm.call(t, key)
		waitFor(t, "the 100% alert", 10*time.Second, func() bool { return len(cm.alerted(t, cm.buyer)) == 2 })
		waitFor(t, "the webhook's deliveries", 15*time.Second, func() bool {
			cm.clock.Advance(time.Second) // the retry's backoff runs on the clock
			return len(hook.received()) >= 3
		})
		time.Sleep(time.Second) // more sweeps and deliveries: none repeats
		if got, want := strings.Join(cm.alerted(t, cm.buyer), "; "), "api_key 100% 2462/2462; api_key 50% 1231/2462"; got != want {
			t.Errorf("alerts: %s, want %s", got, want)
		}
		reqs := hook.received()
		if len(reqs) != 3 {
			t.Fatalf("the webhook got %d requests, want 3 (the first one twice): %+v", len(reqs), reqs)
		}
		if reqs[0].deliveryID != reqs[1].deliveryID || reqs[1].deliveryID == reqs[2].deliveryID {
			t.Errorf("delivery ids %s %s %s: the first retried, then another", reqs[0].deliveryID, reqs[1].deliveryID, reqs[2].deliveryID)
		}
		// Signed like push deliveries: verified as a buyer would, against
		// the marketplace's key set.
		// Signed for the org and its alert webhook: another org's verifier
		// refuses them.
		verifier := func(org string) *pushverify.Verifier {
			return &pushverify.Verifier{JWKSURL: cm.m.URL + "/api/v1/push/jwks", Org: org, URL: hook.srv.URL + "/alerts",
				Config: pushverify.ConfigIDs("alerts:" + cm.buyerOrg), Now: cm.clock.Now}
		}
		v, other := verifier(cm.buyerOrg), verifier("org_someoneelse")
		for i, req := range reqs {
			if d, err := v.Verify(context.Background(), req.signature, req.raw); err != nil || d.DeliveryID != req.deliveryID || d.Org != cm.buyerOrg ||
				d.ConfigID != "alerts:"+cm.buyerOrg || d.Target != pushverify.TargetHash(hook.srv.URL+"/alerts") {
				t.Errorf("alert %d's signature: %+v, %v", i, d, err)
			}
			if _, err := other.Verify(context.Background(), req.signature, req.raw); !errors.Is(err, pushverify.ErrNotForYou) {
				t.Errorf("alert %d at another org's verifier: %v, want ErrNotForYou", i, err)
			}
			if _, err := v.Verify(context.Background(), req.signature, append(bytes.Clone(req.raw), ' ')); !errors.Is(err, pushverify.ErrBadSig) {
				t.Errorf("alert %d with a byte added: %v, want ErrBadSig", i, err)
			}
		}
		for i, req := range reqs {
			wantPct := []int{50, 50, 100}[i]
			if req.token != "tok-1" || req.contentType != "application/json" || req.body.Type != "spend_alert" || req.body.BudgetID != keyID ||
				req.body.Percent != wantPct || req.body.BudgetName != "orchestrator" || req.body.BudgetMicros != 2462 {
				t.Errorf("request %d: %+v", i, req)
			}
		}
		if r := cm.api.with(cm.buyer).do("GET", "/api/v1/push-deliveries?status=delivered", nil); len(r.JSON["items"].([]any)) != 2 {
			t.Errorf("the outbox's delivered deliveries: %s", r.Body)
		}
	})
}

// byTag is the usage API's totals grouped by a tag key, as "value=cost".
func (cm *commerceMarket) byTag(t *testing.T, key, tag, accept string) (string, response) {
	t.Helper()
	r := cm.api.with(key).do("GET", "/api/v1/usage?group_by=tag:"+tag+"&from=2026-11-01&to=2026-12-01", nil)
	if r.Status != 200 {
		t.Fatalf("usage by tag %s: %d %s", tag, r.Status, r.Body)
	}
	var out []string
	items, _ := r.JSON["items"].([]any)
	for _, it := range items {
		m := it.(map[string]any)
		out = append(out, fmt.Sprintf("%s=%v/%v", m["key"], m["calls"], m["cost_micros"]))
	}
	return strings.Join(out, " "), r
}

// TestCostAllocation (issue 14, item 5), on both storage set-ups: API keys
// and a subscription carry tags; every usage row carries, at call time,
// the subscription's tags under the key's (which win); the usage API groups
// by any tag key, usage without it under "" (untagged), in JSON and CSV;
// a change of the subscription's tags applies to later calls only; sellers
// cannot group their buyers' usage by tag.
func TestCostAllocation(t *testing.T) {
	meterEnvs(t, func(t *testing.T, e meterEnv) {
		cm := newCommerceMarket(t, e.env, changePricing)
		sub := cm.subscribe(t, cm.buyer, map[string]any{"tags": map[string]string{"env": "prod", "team": "platform"}}).str("id")
		key := func(name string, tags map[string]string) string {
			r := cm.api.with(cm.buyer).do("POST", "/api/v1/api-keys", map[string]any{"name": name, "role": "buyer", "tags": tags})
			if r.Status != 201 {
				t.Fatalf("key: %d %s", r.Status, r.Body)
			}
			return r.str("key")
		}
		payments := key("payments", map[string]string{"team": "payments", "project": "kyc"})
		plain := key("plain", nil)
		if r := cm.api.with(cm.buyer).do("POST", "/api/v1/api-keys", map[string]any{"name": "bad", "tags": map[string]string{"Team": "x"}}); r.Status != 422 ||
			strings.Join(r.errorFields(), " ") != "tags:tag_key" {
			t.Errorf("a bad tag key: %d %s", r.Status, r.Body)
		}

		cm.clock.Advance(time.Minute)
		cm.call(t, payments) // team=payments (the key's), env=prod, project=kyc
		cm.clock.Advance(time.Minute)
		cm.call(t, plain) // team=platform, env=prod
		r := cm.api.with(cm.buyer).do("PATCH", "/api/v1/subscriptions/"+sub, map[string]any{"tags": map[string]string{"env": "staging"}})
		if r.Status != 200 || fmt.Sprint(r.JSON["tags"]) != "map[env:staging]" {
			t.Fatalf("new tags: %d %s", r.Status, r.Body)
		}
		time.Sleep(2500 * time.Millisecond) // the meter's contract cache
		cm.clock.Advance(time.Minute)
		cm.call(t, plain) // env=staging only

		// Grouping by a tag reads the rows, cm.call waited on the cells (by
		// listing): ClickHouse writes the cells only once the rows are in.
		// 222 micros a call (9 × 3 + 13 × 15).
		for tag, want := range map[string]string{
			"team":    "=1/222 payments=1/222 platform=1/222",
			"env":     "prod=2/444 staging=1/222",
			"project": "=2/444 kyc=1/222",
			"nowhere": "=3/666",
		} {
			if got, _ := cm.byTag(t, cm.buyer, tag, ""); got != want {
				t.Errorf("by tag %s: %s, want %s", tag, got, want)
			}
		}
		csvReq, _ := http.NewRequest("GET", cm.m.URL+"/api/v1/usage?group_by=tag:team&from=2026-11-01&to=2026-12-01", nil)
		csvReq.Header.Set("Authorization", "Bearer "+cm.buyer)
		csvReq.Header.Set("Accept", "text/csv")
		res, err := http.DefaultClient.Do(csvReq)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if want := "tag:team,calls,tasks,input_tokens,output_tokens,compute_ms,cost_micros,estimated_calls\n,1,1,9,13,91,222,0\npayments,1,1,9,13,91,222,0\nplatform,1,1,9,13,91,222,0\n"; string(body) != want {
			t.Errorf("CSV:\n%s\nwant\n%s", body, want)
		}
		r = cm.api.with(cm.seller).do("GET", "/api/v1/usage?scope=seller&group_by=tag:team", nil)
		if r.Status != 422 || strings.Join(r.errorFields(), " ") != "group_by:scope" {
			t.Errorf("a seller groups by its buyers' tags: %d %s", r.Status, r.Body)
		}
		if r := cm.api.with(cm.buyer).do("GET", "/api/v1/usage?group_by=tag:Team", nil); r.Status != 422 {
			t.Errorf("a bad tag key in group_by: %d %s", r.Status, r.Body)
		}
	})
}
