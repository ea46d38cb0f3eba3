package embedded

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/metering"
)

// TestRollupMatchesRows: over whole days, the daily rollup answers exactly
// what summing the rows answers, for every grouping and filter, also after
// rows are inserted twice; so do the rollup and the rows together over
// ranges with partial days.
func TestRollupMatchesRows(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "usage.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 9))
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var rows []metering.Usage
	for i := 0; i < 2000; i++ {
		rows = append(rows, metering.Usage{
			ID: fmt.Sprintf("u%d", i), Time: start.Add(time.Duration(rng.IntN(30*24*3600)) * time.Second),
			TaskID: fmt.Sprintf("t%d", rng.IntN(300)), ListingID: fmt.Sprintf("lst_%d", rng.IntN(4)),
			SellerOrgID: fmt.Sprintf("org_s%d", rng.IntN(2)), BuyerOrgID: fmt.Sprintf("org_b%d", rng.IntN(3)),
			APIKeyID: fmt.Sprintf("key_%d", rng.IntN(5)), ContractID: fmt.Sprintf("ctr_%d", rng.IntN(6)),
			InputTokens: rng.Int64N(5000), OutputTokens: rng.Int64N(5000), ComputeMs: rng.Int64N(9000),
			Tasks: rng.Int64N(2), CostMicros: rng.Int64N(100000), Estimated: rng.IntN(2) == 1, Currency: "usd",
		})
	}
	for _, batch := range [][]metering.Usage{rows[:1200], rows[800:], rows[:10]} { // overlapping: re-sent rows
		if err := s.Insert(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	day := 24 * time.Hour
	for _, g := range []metering.GroupBy{metering.ByListing, metering.BySeller, metering.ByBuyer, metering.ByAPIKey, metering.ByDay} {
		for _, q := range []metering.Query{
			{},
			{From: start, To: start.Add(30 * day)},
			{From: start.Add(3 * day), To: start.Add(17 * day)},
			{From: start.Add(5 * day), To: start.Add(6 * day), BuyerOrgID: "org_b1"},
			{SellerOrgID: "org_s0", ListingID: "lst_2"},
			{ContractID: "ctr_3", APIKeyID: "key_1", From: start.Add(day)},
		} {
			q.GroupBy = g
			same(t, "rollup", s.totalsFromRollup, s.totalsFromRows, q)
		}
		// Ranges with partial days: Totals reads the whole days from the
		// rollup and the partial ones from the rows.
		for _, q := range []metering.Query{
			{From: start.Add(3*day + 7*time.Hour + 1234*time.Millisecond)},
			{To: start.Add(20*day + 13*time.Hour)},
			{From: start.Add(2*day + time.Millisecond), To: start.Add(29*day - time.Millisecond), BuyerOrgID: "org_b1"},
			{From: start.Add(5*day + time.Hour), To: start.Add(6*day + time.Hour), SellerOrgID: "org_s0"},
			{From: start.Add(5*day + time.Hour), To: start.Add(5*day + 9*time.Hour)},
			{From: start.Add(-time.Hour), To: start.Add(9 * day), ContractID: "ctr_3"},
		} {
			q.GroupBy = g
			same(t, "split", s.Totals, s.totalsFromRows, q)
		}
	}
}

// same checks that got answers q as want does.
func same(t *testing.T, name string, got, want func(context.Context, metering.Query) ([]metering.Total, error), q metering.Query) {
	t.Helper()
	ctx := context.Background()
	g, err := got(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	w, err := want(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s %+v:\n %s %+v\n rows %+v", q.GroupBy, q, name, g, w)
	}
}

// TestRollupBackfill: a file written before the rollup existed gets it
// filled from its rows when opened.
func TestRollupBackfill(t *testing.T) {
	path := filepath.Join(t.TempDir(), "usage.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	u := metering.Usage{ID: "u1", Time: time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC), ListingID: "lst", BuyerOrgID: "b", InputTokens: 5, Tasks: 1}
	if err := s.Insert(ctx, []metering.Usage{u}); err != nil {
		t.Fatal(err)
	}
	// Back to version 1: no rollup.
	for _, stmt := range []string{"DROP TABLE usage_daily", "PRAGMA user_version = 1"} {
		if _, err := s.db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Totals(ctx, metering.Query{GroupBy: metering.ByListing})
	if err != nil || len(got) != 1 || got[0].Calls != 1 || got[0].InputTokens != 5 {
		t.Fatalf("after backfill: %+v, %v", got, err)
	}
}

// TestRollupOverflowRepaired: a file whose daily rollup summed past int64
// before sums saturated holds a REAL there (SQLite's result of an
// overflowing integer +), which no reader could scan: opening it makes the
// cell the saturated sum, and totals read again.
func TestRollupOverflowRepaired(t *testing.T) {
	path := filepath.Join(t.TempDir(), "usage.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	rows := []metering.Usage{
		{ID: "u1", Time: at, ListingID: "lst", BuyerOrgID: "b", CostMicros: math.MaxInt64, Tasks: 1},
		{ID: "u2", Time: at, ListingID: "lst2", BuyerOrgID: "b2", CostMicros: 5, Tasks: 1},
	}
	if err := s.Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	// What the old upsert left after a second such row: a REAL cell, at
	// version 2.
	for _, stmt := range []string{"UPDATE usage_daily SET cost_micros = cost_micros + cost_micros WHERE listing_id = 'lst'", "PRAGMA user_version = 2"} {
		if _, err := s.db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	var kind string
	if err := s.db.QueryRow("SELECT typeof(cost_micros) FROM usage_daily WHERE listing_id = 'lst'").Scan(&kind); err != nil || kind != "real" {
		t.Fatalf("setup: cell is %q, %v; want a real", kind, err)
	}
	s.Close()
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	day := time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)
	got, err := s.Totals(ctx, metering.Query{GroupBy: metering.ByListing, From: day, To: day.Add(24 * time.Hour)})
	if err != nil || len(got) != 2 || got[0].CostMicros != math.MaxInt64 || got[1].CostMicros != 5 {
		t.Fatalf("totals after the repair: %+v, %v", got, err)
	}
}

// TestOwnRowsByIndex: what an org reads of its own rows (totals per task
// and per tag, a buyer's or a seller's, over any range) is found through
// an index of that org's rows, never by reading every org's rows of the
// range: otherwise any seller's key could have the meter read the whole
// table (GET /api/v1/usage?scope=seller&group_by=task&from=1970-01-01).
func TestOwnRowsByIndex(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "usage.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Date(2026, 12, 8, 10, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		q     metering.Query
		index string
	}{
		{metering.Query{GroupBy: metering.ByTask, BuyerOrgID: "org_b", From: time.Unix(0, 0), To: now}, "usage_buyer_time"},
		{metering.Query{GroupBy: metering.ByTask, SellerOrgID: "org_s", From: time.Unix(0, 0), To: now}, "usage_seller_time"},
		{metering.Query{GroupBy: metering.ByTask, SellerOrgID: "org_s", ListingID: "lst_1", From: now.Add(-time.Hour), To: now}, "usage_seller_time"},
		{metering.Query{GroupBy: metering.ByTag("team"), SellerOrgID: "org_s", From: now.AddDate(0, -1, 0), To: now}, "usage_seller_time"},
		{metering.Query{GroupBy: metering.ByTag("team"), BuyerOrgID: "org_b"}, "usage_buyer_time"},
	} {
		query, args := TotalsSQL(tc.q)
		rows, err := s.db.Query("EXPLAIN QUERY PLAN "+query, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		if !strings.Contains(strings.Join(plan, "; "), tc.index) {
			t.Errorf("%+v: plan %q, want it to read the rows through %s", tc.q, plan, tc.index)
		}
	}
}
