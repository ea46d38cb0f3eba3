package a2aproxy

import (
	"context"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/metering"
)

// TestLocalShareKeepsMetersWithinTheLimit: two meters without Redis, each
// with Limits.LocalShare ½, admit together what one limit allows: a key's
// 10 requests a second (5 each, from idle and each second after), a
// context's 6 calls (3 each), a budget of 10,000 micros in calls of 1,000
// (5 reservations each); with the default share each admits the whole of
// each limit, as before.
func TestLocalShareKeepsMetersWithinTheLimit(t *testing.T) {
	for _, tc := range []struct {
		share                  float64
		perSecond, calls, held int
	}{{0.5, 5, 3, 5}, {0, 10, 6, 10}} {
		clock := agentmarket.NewManualClock(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
		admitted := func(l limit, caps contracts.SessionCaps, rates agentmarket.RateLimits, ctxID string) int {
			n := 0
			for range 20 {
				cl := limitedCall(t, rates, ctxID, caps)
				if l.serve(cl, func(cl *call) error { l.rates.done(cl, &metering.Usage{}); return nil }) == nil {
					n++
				}
			}
			return n
		}
		for meter := range 2 {
			k := testKeeper(clock)
			k.local.share = share(tc.share)
			l := limit{rates: k}
			if got := admitted(l, contracts.SessionCaps{}, agentmarket.RateLimits{RequestsPerSecond: 10}, ""); got != tc.perSecond {
				t.Errorf("share %v, meter %d: %d of 20 calls admitted at once under 10 a second, want %d", tc.share, meter, got, tc.perSecond)
			}
			clock.Advance(time.Second)
			if got := admitted(l, contracts.SessionCaps{}, agentmarket.RateLimits{RequestsPerSecond: 10}, ""); got != tc.perSecond {
				t.Errorf("share %v, meter %d: %d admitted a second later, want %d", tc.share, meter, got, tc.perSecond)
			}
			if got := admitted(l, contracts.SessionCaps{MaxCalls: 6}, agentmarket.RateLimits{}, "ctx-1"); got != tc.calls {
				t.Errorf("share %v, meter %d: %d calls of a context capped at 6, want %d", tc.share, meter, got, tc.calls)
			}

			book := newBudgetBook(fixedSpend(0), nil, clock, 2*time.Second, nil)
			book.share = share(tc.share)
			budget := int64(10_000)
			held := 0
			for range 20 {
				cl := &call{x: headerExchange{}, actor: agentmarket.Actor{OrgID: "org_b", KeyID: "key_b", KeyBudgetMicros: &budget}, contract: &contracts.Contract{ID: "ctr_1"}}
				if book.reserve(context.Background(), cl, 1000) == nil {
					held++
				}
			}
			if held != tc.held {
				t.Errorf("share %v, meter %d: %d reservations of 1,000 under a budget of 10,000, want %d", tc.share, meter, held, tc.held)
			}
		}
	}
}
