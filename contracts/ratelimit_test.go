package contracts_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// TestRateLimit: Limit requests per key and window, then refusals that
// say how long until the window ends; each key and each window counts on
// its own; a failing shared store leaves the process's own counts in
// charge.
func TestRateLimit(t *testing.T) {
	ctx := context.Background()
	clock := agentmarket.NewManualClock(time.Date(2026, 5, 1, 10, 0, 15, 0, time.UTC))
	rl := &contracts.RateLimit{Clock: clock, Limit: 3, Window: time.Minute}
	for i := range 3 {
		if err := rl.Take(ctx, "ip:192.0.2.1"); err != nil {
			t.Fatalf("request %d refused: %v", i+1, err)
		}
	}
	var ae *agentmarket.Error
	if err := rl.Take(ctx, "ip:192.0.2.1"); !asErr(err, &ae) || ae.Kind != agentmarket.TooManyRequests || ae.Code != "rate_limited" || ae.RetryAfter != 45*time.Second {
		t.Fatalf("fourth request: %v, want too many requests, retry after 45s (the window's end)", err)
	}
	if err := rl.Take(ctx, "ip:198.51.100.7"); err != nil {
		t.Errorf("another address: %v", err)
	}
	clock.Advance(44*time.Second + 500*time.Millisecond)
	if err := rl.Take(ctx, "ip:192.0.2.1"); !asErr(err, &ae) || ae.RetryAfter != time.Second {
		t.Errorf("half a second before the window ends: %v, want retry after 1s (rounded up)", err)
	}
	clock.Advance(time.Second)
	for i := range 3 {
		if err := rl.Take(ctx, "ip:192.0.2.1"); err != nil {
			t.Fatalf("next window, request %d refused: %v", i+1, err)
		}
	}
	if err := rl.Take(ctx, "ip:192.0.2.1"); err == nil {
		t.Error("next window: the fourth request went through")
	}

	down := &contracts.RateLimit{Clock: clock, Limit: 2, Store: failingAttempts{}}
	for range 2 {
		if err := down.Take(ctx, "ip:192.0.2.1"); err != nil {
			t.Fatalf("with the shared store down: %v", err)
		}
	}
	if err := down.Take(ctx, "ip:192.0.2.1"); err == nil {
		t.Error("with the shared store down, the third request went through")
	}
}
