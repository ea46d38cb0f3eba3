package metering_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/metering"
)

// spendStore answers Totals with its totals and remembers the query.
type spendStore struct {
	queryStore
	totals []metering.Total
}

func (s spendStore) Totals(ctx context.Context, q metering.Query) ([]metering.Total, error) {
	s.queryStore.Totals(ctx, q)
	return s.totals, nil
}

// TestSpend: spend is the cost of one key's (or contract's) usage from the
// given time to the UTC midnight after an hour past the clock's now (whole
// days: the store's daily rollups answer it), summed across buyers, and a
// sum past the int64 range is the largest value.
func TestSpend(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var q metering.Query
	store := spendStore{queryStore: queryStore{got: &q}, totals: []metering.Total{{Key: "org_a", CostMicros: 700}, {Key: "org_b", CostMicros: 42}}}
	s := metering.Spend{Store: store, Clock: agentmarket.NewManualClock(now)}
	got, err := s.Spent(ctx, "key_1", "ctr_1", from)
	if err != nil || got != 742 {
		t.Fatalf("Spent = %d, %v; want 742", got, err)
	}
	want := metering.Query{GroupBy: metering.ByBuyer, From: from, To: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), APIKeyID: "key_1", ContractID: "ctr_1"}
	if !q.From.Equal(want.From) || !q.To.Equal(want.To) || q.GroupBy != want.GroupBy || q.APIKeyID != want.APIKeyID || q.ContractID != want.ContractID {
		t.Errorf("query %+v, want %+v", q, want)
	}

	store.totals = []metering.Total{{Key: "org_a", CostMicros: math.MaxInt64 - 1}, {Key: "org_b", CostMicros: 2}}
	s.Store = store
	if got, err := s.Spent(ctx, "key_1", "", from); err != nil || got != math.MaxInt64 {
		t.Errorf("Spent past the int64 range = %d, %v; want %d", got, err, int64(math.MaxInt64))
	}
}

// TestSpendUntil: the end of a spend query is the midnight after an hour
// past now, so 23:30 reads tomorrow's rows too (a clock ahead).
func TestSpendUntil(t *testing.T) {
	for now, want := range map[time.Time]time.Time{
		time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC):                 time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 30, 23, 30, 0, 0, time.UTC):                time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 31, 22, 0, 0, 0, time.FixedZone("", 3600)): time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		if got := metering.SpendUntil(now); !got.Equal(want) {
			t.Errorf("SpendUntil(%s) = %s, want %s", now, got, want)
		}
	}
}
