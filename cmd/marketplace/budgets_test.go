package main

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/cmd/internal/demoagent"
	"github.com/agentmarket/agentmarket/contracts/redis/redistest"
	"github.com/agentmarket/agentmarket/metering/clickhouse/clickhousetest"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// listingSpend is what the usage API says the org of key spent on a
// listing, and in how many calls (refused ones included: they are
// metered).
func listingSpend(t *testing.T, api client, listingID string) (calls, cost int64) {
	t.Helper()
	r := api.do("GET", "/api/v1/usage?"+url.Values{"group_by": {"listing"}}.Encode(), nil)
	items, _ := r.JSON["items"].([]any)
	for _, it := range items {
		if row := it.(map[string]any); row["key"] == listingID {
			return int64(row["calls"].(float64)), int64(row["cost_micros"].(float64))
		}
	}
	return 0, 0
}

// TestBudgetBurst: N concurrent sends at a key whose monthly budget is a
// few calls' worth, from empty, through the meter, to an agent that
// reports its usage: the key spends no more than its budget plus what the
// admitted calls used beyond their reservations (docs/billing.md,
// "Budgets"), every time. The agent's usage (3 input tokens, 7 output, 49
// ms: 1,119 micros at the test's plan) is within the plan's declared
// per-call ceiling in one listing (a reservation of 1,350 micros: the
// budget is never overshot) and past it in another (1,018: each call
// overshoots by 101 at most). On both meters: the embedded one, which
// bills each call as it ends, and the one over PostgreSQL and ClickHouse,
// which leaves bills to its shipper (the spend counts what the task
// reported).
func TestBudgetBurst(t *testing.T) {
	meterEnvs(t, func(t *testing.T, e meterEnv) { budgetBurst(t, newMarket(t, e.env)) })
}

func budgetBurst(t *testing.T, mk *market) {
	const n, cost = 12, 1119
	for _, tc := range []struct {
		name            string
		ceiling         [3]int64 // input tokens, output tokens, compute ms
		reserve, budget int64
	}{
		{"usage within the ceiling", [3]int64{10, 20, 200}, 1350, 3*1350 + 500},
		{"usage past the ceiling", [3]int64{1, 1, 1}, 1018, 3*1018 + 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agent := agentServer(t, demoagent.New(demoagent.Config{Version: "0.3", ReportUsage: true, StepDelay: 60 * time.Millisecond, Name: "Burst " + tc.name}))
			pr := map[string]any{"max_call_input_tokens": tc.ceiling[0], "max_call_output_tokens": tc.ceiling[1], "max_call_compute_ms": tc.ceiling[2]}
			for k, v := range pricing {
				pr[k] = v
			}
			r := mk.api.with(mk.seller).do("POST", "/api/v1/listings", map[string]any{"card_url": agent.URL, "pricing": pr})
			if r.Status != 201 || get(r.JSON, "pricing", "max_call_output_tokens") != float64(tc.ceiling[1]) {
				t.Fatalf("list: %d %s", r.Status, r.Body)
			}
			listing := r.str("id")
			for round, kind := range []string{"key", "subscription", "org", "key"} {
				orgAdmin := mk.api.with(newBuyerOrg(t, mk.api, fmt.Sprintf("%s %d", tc.name, round)))
				sub := map[string]any{"listing_id": listing}
				if kind == "subscription" {
					sub["monthly_budget_micros"] = tc.budget
				}
				r := orgAdmin.do("POST", "/api/v1/subscriptions", sub)
				if r.Status != 201 {
					t.Fatalf("subscribe: %d %s", r.Status, r.Body)
				}
				ep := r.str("endpoint")
				if kind == "org" {
					if r := orgAdmin.do("PUT", "/api/v1/org/budget", map[string]any{"monthly_budget_micros": tc.budget}); r.Status != 200 ||
						r.JSON["monthly_budget_micros"] != float64(tc.budget) {
						t.Fatalf("org budget: %d %s", r.Status, r.Body)
					}
				}
				// The key's budget on one key; the others' spread over two
				// keys without one.
				var keys []string
				if kind == "key" {
					_, key := mintKey(t, orgAdmin, map[string]any{"name": "capped", "role": "buyer", "monthly_budget_micros": tc.budget})
					keys = []string{key}
				} else {
					_, k1 := mintKey(t, orgAdmin, map[string]any{"name": "one", "role": "buyer"})
					_, k2 := mintKey(t, orgAdmin, map[string]any{"name": "two", "role": "buyer"})
					keys = []string{k1, k2}
				}
				admitted, refused := fireSends(t, n, []string{ep}, keys)
				var calls, spent int64
				waitFor(t, "the burst's usage rows", 15*time.Second, func() bool {
					calls, spent = listingSpend(t, orgAdmin, listing)
					return calls == n
				})
				// The bound: the budget, plus what each admitted call used
				// beyond its reservation.
				bound := tc.budget + int64(admitted)*max(0, cost-tc.reserve)
				if spent > bound || spent != int64(admitted)*cost || admitted+refused != n {
					t.Errorf("round %d (%s budget): %d calls admitted, %d refused, %d micros spent; the bound is %d (budget %d)", round, kind, admitted, refused, spent, bound, tc.budget)
				}
				// Three reservations fit in the budget, a fourth never does,
				// however the calls interleave.
				if admitted != 3 {
					t.Errorf("round %d (%s budget): %d calls admitted, want 3", round, kind, admitted)
				}
			}
		})
	}
}

// fireSends sends n messages at once, spread over the endpoints eps and
// the keys, and counts the calls answered and those refused for a budget.
func fireSends(t *testing.T, n int, eps, keys []string) (admitted, refused int) {
	t.Helper()
	return fireSendsRefused(t, n, eps, keys, a2aproxy.CodeBudgetExhausted)
}

// fireSendsRefused is fireSends counting the refusals with code.
func fireSendsRefused(t *testing.T, n int, eps, keys []string, code int) (admitted, refused int) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, e := (rpc{t: t, url: eps[i%len(eps)], key: keys[i%len(keys)]}).call("message/send", msg03(fmt.Sprintf("burst call %d", i), nil))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case e == nil:
				admitted++
			case e["code"] == float64(code):
				refused++
			default:
				t.Errorf("call %d: %v", i, e)
			}
		}()
	}
	close(start)
	wg.Wait()
	return admitted, refused
}

// newBuyerOrg signs a new buyer org up and returns its admin key.
func newBuyerOrg(t *testing.T, api client, name string) string {
	t.Helper()
	_, key := signup(t, api, "Burst "+name, strings.ReplaceAll(strings.ToLower(name), " ", "-")+"@burst.example")
	return key
}

// TestOrgBudgetSetting: only an org's admin sets its monthly budget; GET
// /org shows it; null removes it; a negative one is refused.
func TestOrgBudgetSetting(t *testing.T) {
	m := startMarketplace(t, map[string]string{})
	api := client{t: t, base: m.URL}
	admin := api.with(newBuyerOrg(t, api, "budget setting"))
	for _, role := range []string{"buyer", "finance", "seller"} {
		_, key := mintKey(t, admin, map[string]any{"name": role, "role": role})
		if r := api.with(key).do("PUT", "/api/v1/org/budget", map[string]any{"monthly_budget_micros": 1}); r.Status != 403 {
			t.Errorf("a %s key sets the org's budget: %d %s, want 403", role, r.Status, r.Body)
		}
	}
	if r := admin.do("PUT", "/api/v1/org/budget", map[string]any{"monthly_budget_micros": -1}); r.Status != 422 ||
		strings.Join(r.errorFields(), " ") != "monthly_budget_micros:non_negative" {
		t.Errorf("a negative budget: %d %s", r.Status, r.Body)
	}
	if r := admin.do("PUT", "/api/v1/org/budget", map[string]any{"monthly_budget_micros": 7_000_000}); r.Status != 200 {
		t.Fatalf("set: %d %s", r.Status, r.Body)
	}
	if r := admin.do("GET", "/api/v1/org", nil); r.JSON["monthly_budget_micros"] != float64(7_000_000) {
		t.Errorf("GET /org after the budget is set: %s", r.Body)
	}
	if r := admin.do("PUT", "/api/v1/org/budget", map[string]any{"monthly_budget_micros": nil}); r.Status != 200 || r.JSON["monthly_budget_micros"] != nil {
		t.Errorf("remove: %d %s", r.Status, r.Body)
	}
}

// TestBudgetBurstAcrossMeters: two meters sharing Redis (and PostgreSQL,
// and ClickHouse for the usage both record)
// hold a key's budget together: 12 concurrent sends through both, at a
// fresh key with room for three reservations, admit three, every time;
// the spend stays within the budget.
func TestBudgetBurstAcrossMeters(t *testing.T) {
	env := sharedEnv(relationaltest.PostgresDSN(t), redistest.Start(t).URL)
	env["AGENTMARKET_POLICY_RELOAD"] = "100ms" // the other meter learns of a subscription at once
	env["AGENTMARKET_CLICKHOUSE_URL"] = clickhousetest.DSN(t)
	first, second := startMarketplace(t, env), startMarketplace(t, env)
	api := client{t: t, base: first.URL}
	_, seller := signup(t, api, "Acme Agents", "owner@acme.example")
	listing := listBurstAgent(t, api, seller, "Burst")
	const n, cost, budget = 12, 1119, 3*1350 + 500
	for round := range 3 {
		admin := api.with(newBuyerOrg(t, api, fmt.Sprintf("across meters %d", round)))
		r := admin.do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": listing})
		if r.Status != 201 {
			t.Fatalf("subscribe: %d %s", r.Status, r.Body)
		}
		_, key := mintKey(t, admin, map[string]any{"name": "capped", "role": "buyer", "monthly_budget_micros": budget})
		time.Sleep(500 * time.Millisecond) // past the second meter's next policy reload
		admitted, refused := fireSends(t, n, []string{r.str("endpoint"), second.URL + "/a2a/" + listing}, []string{key})
		var calls, spent int64
		waitFor(t, fmt.Sprintf("the burst's usage rows (%d admitted, %d refused)", admitted, refused), 15*time.Second, func() bool {
			calls, spent = listingSpend(t, admin, listing)
			return calls == n
		})
		if admitted != 3 || admitted+refused != n || spent != int64(admitted)*cost || spent > budget {
			t.Errorf("round %d: %d calls admitted, %d refused, %d micros spent; want 3 admitted, within the budget of %d", round, admitted, refused, spent, budget)
		}
	}
}

// listBurstAgent lists a demo agent whose sends cost 1,119 micros and
// reserve 1,350 (its per-call ceiling at the pricing's rates), and returns
// the listing's id.
func listBurstAgent(t *testing.T, api client, seller, name string) string {
	t.Helper()
	agent := agentServer(t, demoagent.New(demoagent.Config{Version: "0.3", ReportUsage: true, StepDelay: 60 * time.Millisecond, Name: name}))
	pr := map[string]any{"max_call_input_tokens": 10, "max_call_output_tokens": 20, "max_call_compute_ms": 200}
	for k, v := range pricing {
		pr[k] = v
	}
	r := api.with(seller).do("POST", "/api/v1/listings", map[string]any{"card_url": agent.URL, "pricing": pr})
	if r.Status != 201 {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	return r.str("id")
}

// sharedEnv is the environment of marketplaces (with their meters) that
// share a PostgreSQL database and a Redis server.
func sharedEnv(dsn, redisURL string) map[string]string {
	return map[string]string{
		"AGENTMARKET_DATABASE_URL": dsn,
		"AGENTMARKET_SECRET_KEY":   "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
		"AGENTMARKET_AUTO_APPROVE": "true",
		"AGENTMARKET_REDIS_URL":    redisURL,
	}
}
