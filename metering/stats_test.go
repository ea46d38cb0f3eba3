package metering_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/metering"
)

// TestAgentErrorCodes: the codes counted against an agent are the meter's
// and the protocol's codes for an agent's failure, and none of the codes
// of a buyer's mistake.
func TestAgentErrorCodes(t *testing.T) {
	want := []int{wire.CodeInternalError, wire.CodeInvalidAgentResponse, a2aproxy.CodeUpstreamUnreachable, a2aproxy.CodeUpstreamTimeout,
		a2aproxy.CodeResultTooLarge, a2aproxy.CodeStreamIdle, a2aproxy.CodeUpstreamRefused, a2aproxy.CodeAgentTaskConflict}
	if !slices.Equal(metering.AgentErrorCodes, want) {
		t.Errorf("AgentErrorCodes = %v, want %v", metering.AgentErrorCodes, want)
	}
	for _, c := range []int{a2aproxy.CodeUnauthorized, a2aproxy.CodeNotEntitled, a2aproxy.CodeBudgetExhausted, a2aproxy.CodeListingUnavailable,
		a2aproxy.CodeBudgetUnchecked, a2aproxy.CodeRequestTooLarge} {
		if slices.Contains(metering.AgentErrorCodes, c) {
			t.Errorf("the buyer's code %d counts against the agent", c)
		}
	}
}

type countingStats struct {
	calls []metering.StatsQuery
	out   []metering.ListingStats
}

func (c *countingStats) ListingStats(_ context.Context, q metering.StatsQuery) ([]metering.ListingStats, error) {
	c.calls = append(c.calls, q)
	return c.out, nil
}

// TestVerifiedWindowAndCache: the last 30 days up to now, every listing
// at once with the default minimums (3 buyer orgs, 20 tasks), kept for
// the TTL.
func TestVerifiedWindowAndCache(t *testing.T) {
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	clock := agentmarket.NewManualClock(now)
	store := &countingStats{out: []metering.ListingStats{{ListingID: "lst_a", Calls: 25}}}
	v := &metering.Verified{Store: store, Clock: clock, TTL: 5 * time.Minute}
	ctx := context.Background()
	s, ok, window, err := v.Listing(ctx, "lst_a")
	if err != nil || !ok || s.Calls != 25 || !window.Start.Equal(now.Add(-30*24*time.Hour)) || !window.End.Equal(now) {
		t.Fatalf("Listing = %+v, %v, %+v, %v", s, ok, window, err)
	}
	if _, ok, _, _ := v.Listing(ctx, "lst_b"); ok {
		t.Error("a listing under the minimum has stats")
	}
	clock.Advance(4 * time.Minute)
	v.Listings(ctx)
	if len(store.calls) != 1 || store.calls[0].MinBuyerOrgs != 3 || store.calls[0].MinTasks != 20 || len(store.calls[0].ListingIDs) != 0 {
		t.Errorf("queries within the TTL: %+v", store.calls)
	}
	clock.Advance(time.Minute)
	v.Listings(ctx)
	if len(store.calls) != 2 || !store.calls[1].To.Equal(now.Add(5*time.Minute)) {
		t.Errorf("after the TTL: %+v", store.calls)
	}
	if orgs, tasks := v.Minimums(); orgs != 3 || tasks != 20 {
		t.Errorf("Minimums() = %d, %d; want 3, 20", orgs, tasks)
	}
	own := &metering.Verified{Store: store, Clock: clock, MinBuyerOrgs: 5, MinTasks: 50}
	own.Listings(ctx)
	if q := store.calls[len(store.calls)-1]; q.MinBuyerOrgs != 5 || q.MinTasks != 50 {
		t.Errorf("own minimums: %+v", q)
	}
}
