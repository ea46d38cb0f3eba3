package main

import (
	"testing"
	"time"
)

// timedCalls makes the calls numbered from to to (from 1) a second
// apart, the agent taking 10 ms times the call's number to answer.
func (cm *commerceMarket) timedCalls(t *testing.T, key string, from, to int) {
	t.Helper()
	defer cm.agentLag.Store(0)
	for i := from; i <= to; i++ {
		cm.clock.Advance(time.Second)
		cm.agentLag.Store(int64(time.Duration(i) * 10 * time.Millisecond))
		cm.call(t, key)
	}
}

// subscribedBuyer signs up a buyer org and subscribes it to the listing,
// and returns its admin key.
func (cm *commerceMarket) subscribedBuyer(t *testing.T, org, email string) string {
	t.Helper()
	_, key := signup(t, cm.api, org, email)
	cm.subscribe(t, key, map[string]any{})
	return key
}

// TestVerifiedStats (issue 14, item 7; issue 23, item 4), on both storage
// set-ups: a listing's measured figures stay hidden until 20 tasks from 3
// buyer orgs were metered in the last 30 days (20 calls of one or two
// orgs are not enough); then the API shows them, computed by the usage
// store from the rows the meter wrote (latency percentiles by rank of the
// times the meter measured, the median cost of a task, every task
// completed); sellers cannot set them.
func TestVerifiedStats(t *testing.T) {
	meterEnvs(t, func(t *testing.T, e meterEnv) {
		cm := newCommerceMarket(t, e.env, changePricing)
		cm.subscribe(t, cm.buyer, map[string]any{})
		cm.subscribe(t, cm.other, map[string]any{})
		third := cm.subscribedBuyer(t, "Umbrella", "it@umbrella.example")
		path := "/api/v1/listings/" + cm.listing + "/stats"
		hidden := func(when string) {
			t.Helper()
			r := cm.api.with(cm.other).do("GET", path, nil)
			if r.Status != 200 || r.JSON["stats"] != nil || r.JSON["min_buyer_orgs"] != float64(3) || r.JSON["min_tasks"] != float64(20) ||
				r.JSON["listing_id"] != cm.listing {
				t.Fatalf("%s: %d %s", when, r.Status, r.Body)
			}
		}
		cm.timedCalls(t, cm.buyer, 1, 20)
		cm.clock.Advance(6 * time.Minute) // past the five minutes figures are kept
		hidden("20 tasks of one org")
		cm.timedCalls(t, cm.other, 21, 21)
		cm.clock.Advance(6 * time.Minute)
		hidden("21 tasks of two orgs")
		cm.timedCalls(t, third, 22, 22)
		hidden("within the five minutes the figures are kept")
		cm.clock.Advance(6 * time.Minute)
		r := cm.api.with(cm.other).do("GET", path, nil)
		stats, _ := r.JSON["stats"].(map[string]any)
		if r.Status != 200 || stats == nil {
			t.Fatalf("22 tasks of three orgs: %d %s", r.Status, r.Body)
		}
		// The meter timed the calls 10, 20, … 220 ms: rank floor(22 × 50 /
		// 100) = 11 and floor(22 × 95 / 100) = 20 of them sorted are 120 and
		// 210 ms.
		// 222 micros a call (9 input tokens × 3 + 13 output × 15), each call
		// its own completed task.
		want := map[string]any{"calls": 22.0, "completed_tasks": 22.0, "failures": 0.0, "send_calls": 22.0,
			"latency_p50_ms": 120.0, "latency_p95_ms": 210.0, "tasks": 22.0,
			"median_task_cost_micros": 222.0, "currency": "usd", "estimated_calls": 0.0}
		for k, v := range want {
			if stats[k] != v {
				t.Errorf("stats[%s] = %v, want %v", k, stats[k], v)
			}
		}
		window := r.JSON["window"].(map[string]any)
		if now := cm.clock.Now(); window["end"] != now.Format(time.RFC3339Nano) || window["start"] != now.Add(-30*24*time.Hour).Format(time.RFC3339Nano) {
			t.Errorf("window %v, want the 30 days to %s", window, now)
		}

		// Sellers cannot enter figures.
		if r := cm.api.with(cm.seller).do("PATCH", "/api/v1/listings/"+cm.listing, map[string]any{"stats": map[string]any{"calls": 1e6}}); r.Status != 422 {
			t.Errorf("a seller's figures: %d %s", r.Status, r.Body)
		}
		// Thirty days later the calls are out of the window.
		cm.clock.Advance(30 * 24 * time.Hour)
		hidden("30 days later")
	})
}
