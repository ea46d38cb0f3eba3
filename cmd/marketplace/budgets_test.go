package main

import (
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/cmd/internal/demoagent"
)

// keySpend is what the usage API says a key spent, and in how many calls
// (refused ones included: they are metered).
func keySpend(t *testing.T, api client, keyID string) (calls, cost int64) {
	t.Helper()
	q := url.Values{"group_by": {"api_key"}, "api_key_id": {keyID}}
	r := api.do("GET", "/api/v1/usage?"+q.Encode(), nil)
	items, _ := r.JSON["items"].([]any)
	for _, it := range items {
		if row := it.(map[string]any); row["key"] == keyID {
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
	const n, rounds, cost = 12, 4, 1119
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
			r = mk.api.with(mk.buyer).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": r.str("id")})
			if r.Status != 201 {
				t.Fatalf("subscribe: %d %s", r.Status, r.Body)
			}
			ep := r.str("endpoint")
			for round := range rounds {
				keyID, key := mintKey(t, mk.api.with(mk.buyer), map[string]any{"name": fmt.Sprintf("burst %s %d", tc.name, round), "role": "buyer",
					"monthly_budget_micros": tc.budget})
				var wg sync.WaitGroup
				var mu sync.Mutex
				admitted, refused := 0, 0
				start := make(chan struct{})
				for i := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						_, e := (rpc{t: t, url: ep, key: key}).call("message/send", msg03(fmt.Sprintf("burst call %d", i), nil))
						mu.Lock()
						defer mu.Unlock()
						switch {
						case e == nil:
							admitted++
						case e["code"] == float64(a2aproxy.CodeBudgetExhausted):
							refused++
						default:
							t.Errorf("call %d: %v", i, e)
						}
					}()
				}
				close(start)
				wg.Wait()
				var calls, spent int64
				waitFor(t, "the burst's usage rows", 15*time.Second, func() bool {
					calls, spent = keySpend(t, mk.api.with(mk.buyer), keyID)
					return calls == n
				})
				// The bound: the budget, plus what each admitted call used
				// beyond its reservation.
				bound := tc.budget + int64(admitted)*max(0, cost-tc.reserve)
				if spent > bound || spent != int64(admitted)*cost || admitted+refused != n {
					t.Errorf("round %d: %d calls admitted, %d refused, %d micros spent; the bound is %d (budget %d)", round, admitted, refused, spent, bound, tc.budget)
				}
				// Three reservations fit in the budget, a fourth never does,
				// however the calls interleave.
				if admitted != 3 {
					t.Errorf("round %d: %d calls admitted, want 3", round, admitted)
				}
			}
		})
	}
}
