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

// TestVerifiedStats (issue 14, item 7), on both storage set-ups: a
// listing's measured figures stay hidden below 20 calls in the last 30
// days; from the 20th call the API shows them, computed by the usage
// store from the rows the meter wrote (latency percentiles by rank of the
// times the meter measured, the median cost of a task, every task
// completed); sellers cannot set them.
func TestVerifiedStats(t *testing.T) {
	meterEnvs(t, func(t *testing.T, e meterEnv) {
		cm := newCommerceMarket(t, e.env, changePricing)
		cm.subscribe(t, cm.buyer, map[string]any{})
		path := "/api/v1/listings/" + cm.listing + "/stats"
		cm.timedCalls(t, cm.buyer, 1, 19)
		r := cm.api.with(cm.other).do("GET", path, nil)
		if r.Status != 200 || r.JSON["stats"] != nil || r.JSON["min_calls"] != float64(20) || r.JSON["listing_id"] != cm.listing {
			t.Fatalf("19 calls: %d %s", r.Status, r.Body)
		}
		cm.timedCalls(t, cm.buyer, 20, 20)
		if r := cm.api.with(cm.other).do("GET", path, nil); r.JSON["stats"] != nil {
			t.Errorf("within the five minutes the figures are kept: %s", r.Body)
		}
		cm.clock.Advance(6 * time.Minute)
		r = cm.api.with(cm.other).do("GET", path, nil)
		stats, _ := r.JSON["stats"].(map[string]any)
		if r.Status != 200 || stats == nil {
			t.Fatalf("20 calls: %d %s", r.Status, r.Body)
		}
		// The meter timed the calls 10, 20, … 200 ms: rank floor(20 × 50 /
		// 100) = 10 and floor(20 × 95 / 100) = 19 of them sorted are 110 and
		// 200 ms.
		// 222 micros a call (9 input tokens × 3 + 13 output × 15), each call
		// its own completed task.
		want := map[string]any{"calls": 20.0, "completed_tasks": 20.0, "failures": 0.0, "send_calls": 20.0,
			"latency_p50_ms": 110.0, "latency_p95_ms": 200.0, "tasks": 20.0,
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
		if r := cm.api.with(cm.other).do("GET", path, nil); r.JSON["stats"] != nil {
			t.Errorf("30 days later: %s", r.Body)
		}
	})
}
