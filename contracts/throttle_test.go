package contracts_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/storetest"
)

func TestMemoryAttempts(t *testing.T) {
	storetest.RunAttempts(t, func(t *testing.T) contracts.AttemptStore { return contracts.NewMemoryAttempts() })
}

// TestThrottle: five failures, then waits of 1 s, 2 s, 4 s … under
// every key that failed; the check refuses before the attempt is judged;
// a success resets the key; a failing shared store leaves the process's
// own counts in charge.
func TestThrottle(t *testing.T) {
	ctx := context.Background()
	clock := agentmarket.NewManualClock(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC))
	th := &contracts.Throttle{Clock: clock}
	acct, ip := "acct:a@b.example", "ip:192.0.2.1"
	for i := range 5 {
		if err := th.Check(ctx, acct, ip); err != nil {
			t.Fatalf("attempt %d refused: %v", i+1, err)
		}
		th.Failed(ctx, acct, ip)
	}
	// Five failures cost 1 s, six 2 s.
	err := th.Check(ctx, acct)
	var ae *agentmarket.Error
	if !asErr(err, &ae) || ae.Kind != agentmarket.TooManyRequests || ae.RetryAfter != time.Second {
		t.Fatalf("after five failures: %v, want too many requests, retry after 1s", err)
	}
	if err := th.Check(ctx, "ip:198.51.100.7"); err != nil {
		t.Errorf("another address: %v", err)
	}
	if err := th.Check(ctx, "acct:other@b.example", ip); err == nil {
		t.Error("another account from the throttled address went through")
	}
	clock.Advance(time.Second)
	if err := th.Check(ctx, acct, ip); err != nil {
		t.Fatalf("after the wait: %v", err)
	}
	th.Failed(ctx, acct, ip)
	if err := th.Check(ctx, acct); !asErr(err, &ae) || ae.RetryAfter != 2*time.Second {
		t.Errorf("after six failures: %v, want retry after 2s", err)
	}
	th.Succeeded(ctx, acct, ip)
	if err := th.Check(ctx, acct, ip); err != nil {
		t.Errorf("after a success: %v", err)
	}
	// Capped.
	for range 40 {
		th.Failed(ctx, acct)
	}
	if err := th.Check(ctx, acct); !asErr(err, &ae) || ae.RetryAfter != contracts.DefaultThrottleMax {
		t.Errorf("after many failures: %v, want the cap %s", err, contracts.DefaultThrottleMax)
	}

	// A shared store that fails: the process's own counts stand in.
	down := &contracts.Throttle{Clock: clock, Store: failingAttempts{}}
	for range 7 {
		down.Failed(ctx, acct)
	}
	if err := down.Check(ctx, acct); err == nil {
		t.Error("with the shared store down, seven failures went unthrottled")
	}
}

type failingAttempts struct{}

func (failingAttempts) AddFailure(context.Context, string, time.Time, time.Duration) (int64, error) {
	return 0, errDown
}
func (failingAttempts) Failures(context.Context, string) (int64, time.Time, error) {
	return 0, time.Time{}, errDown
}
func (failingAttempts) ResetFailures(context.Context, string) error { return errDown }

func asErr(err error, target **agentmarket.Error) bool {
	ae, ok := err.(*agentmarket.Error)
	if ok {
		*target = ae
	}
	return ok
}
