package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/contracts"
)

// RunPushGate is the contract of contracts.PushGate: slots up to the
// concurrency across callers, a rate, leases that end, holds.
func RunPushGate(t *testing.T, newGate func(t *testing.T) contracts.PushGate) {
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	start := func(t *testing.T, g contracts.PushGate, dest, id string, lim contracts.PushLimit, at time.Time) (bool, bool, time.Time) {
		t.Helper()
		ok, held, retryAt, err := g.TryStart(ctx, dest, id, lim, at, at.Add(time.Minute))
		must(t, err)
		return ok, held, retryAt
	}
	fast := contracts.PushLimit{Concurrency: 2, PerSecond: 1000, Burst: 1000}

	t.Run("push gate: at most the concurrency in flight, a Finish frees a slot", func(t *testing.T) {
		g := newGate(t)
		for i := range 2 {
			if ok, _, _ := start(t, g, "https://a:443", fmt.Sprintf("d%d", i), fast, now); !ok {
				t.Fatalf("start %d refused", i)
			}
		}
		if ok, held, retryAt := start(t, g, "https://a:443", "d2", fast, now); ok || held || !retryAt.IsZero() {
			t.Fatalf("third start = %v, held %v, retry %v; want refused until a Finish", ok, held, retryAt)
		}
		if ok, _, _ := start(t, g, "https://a:443", "d0", fast, now); !ok {
			t.Error("a start of a delivery holding a slot already was refused")
		}
		if ok, _, _ := start(t, g, "https://b:443", "d2", fast, now); !ok {
			t.Error("another destination's start was refused")
		}
		must(t, g.Finish(ctx, "https://a:443", "d0"))
		if ok, _, _ := start(t, g, "https://a:443", "d2", fast, now); !ok {
			t.Error("a start after a Finish was refused")
		}
		// A slot never given back ends with its lease (a minute).
		if ok, _, _ := start(t, g, "https://a:443", "d3", fast, now.Add(time.Minute+time.Millisecond)); !ok {
			t.Error("a start after the leases ended was refused")
		}
	})

	t.Run("push gate: the rate", func(t *testing.T) {
		g := newGate(t)
		lim := contracts.PushLimit{Concurrency: 100, PerSecond: 10, Burst: 2}
		for i := range 2 {
			if ok, _, _ := start(t, g, "https://a:443", fmt.Sprintf("d%d", i), lim, now); !ok {
				t.Fatalf("start %d of the burst refused", i)
			}
		}
		ok, held, retryAt := start(t, g, "https://a:443", "d2", lim, now)
		if ok || held || !retryAt.Equal(now.Add(100*time.Millisecond)) {
			t.Fatalf("start past the burst = %v, held %v, retry at +%v; want refused until +100ms", ok, held, retryAt.Sub(now))
		}
		if ok, _, _ := start(t, g, "https://a:443", "d2", lim, now.Add(100*time.Millisecond)); !ok {
			t.Error("start after 100ms refused")
		}
	})

	t.Run("push gate: a rate without a burst, as a push config's own (one start per interval, whichever caller)", func(t *testing.T) {
		g := newGate(t)
		lim := contracts.PushLimit{Concurrency: 1, PerSecond: 0.5, Burst: 1}
		const key = "cfg|0123456789abcdef"
		if ok, _, _ := start(t, g, key, "d0", lim, now); !ok {
			t.Fatal("the first start refused")
		}
		must(t, g.Finish(ctx, key, "d0"))
		ok, held, retryAt := start(t, g, key, "d1", lim, now.Add(time.Second))
		if ok || held || !retryAt.Equal(now.Add(2*time.Second)) {
			t.Fatalf("a start 1 s on = %v, held %v, retry at +%v; want refused until +2s", ok, held, retryAt.Sub(now))
		}
		if ok, _, _ := start(t, g, key, "d1", lim, now.Add(2*time.Second)); !ok {
			t.Error("the start 2 s on refused")
		}
	})

	t.Run("push gate: a hold keeps everyone off until it ends; a later hold wins", func(t *testing.T) {
		g := newGate(t)
		must(t, g.Hold(ctx, "https://a:443", now.Add(30*time.Second)))
		must(t, g.Hold(ctx, "https://a:443", now.Add(10*time.Second))) // shorter: ignored
		ok, held, retryAt := start(t, g, "https://a:443", "d0", fast, now.Add(20*time.Second))
		if ok || !held || !retryAt.Equal(now.Add(30*time.Second)) {
			t.Fatalf("start during the hold = %v, held %v, until +%v; want held until +30s", ok, held, retryAt.Sub(now))
		}
		if ok, _, _ := start(t, g, "https://b:443", "d0", fast, now); !ok {
			t.Error("another destination was held")
		}
		if ok, held, _ := start(t, g, "https://a:443", "d0", fast, now.Add(30*time.Second)); !ok || held {
			t.Errorf("start when the hold ended = %v, held %v", ok, held)
		}
	})
}
