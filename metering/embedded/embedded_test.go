package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/embedded"
	"github.com/agentmarket/agentmarket/metering/storetest"
)

// MustOpen opens a usage store in a temporary file, closed after the test.
func MustOpen(tb testing.TB) *embedded.Store {
	tb.Helper()
	s, err := embedded.Open(filepath.Join(tb.TempDir(), "usage.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) metering.Store { return MustOpen(t) })
}

func TestReopenKeepsRows(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "usage.db")
	s, err := embedded.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	u := storetest.Row(1, time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	if err := s.Insert(ctx, []metering.Usage{u}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = embedded.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Insert(ctx, []metering.Usage{u}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Rows(ctx, metering.Query{})
	if err != nil || len(got) != 1 || got[0] != storetest.Stored(u) {
		t.Fatalf("after reopen: %+v, %v", got, err)
	}
}

// TestTotalsSQL: whole UTC days read the daily rollup, the rest (and
// per-task totals) the rows; every sum saturates instead of failing.
func TestTotalsSQL(t *testing.T) {
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	const sat = "MIN(SUM(%[1]s / 4294967296) * 4294967296 + SUM(%[1]s %% 4294967296), 9223372036854775807)"
	sums := func(cols ...string) string {
		out := make([]string, len(cols))
		for i, c := range cols {
			out[i] = fmt.Sprintf(sat, c)
		}
		return strings.Join(out, ", ")
	}
	rollupSums := sums("calls", "tasks", "input_tokens", "output_tokens", "compute_ms", "cost_micros", "estimated")
	rowSums := "COUNT(*), " + sums("tasks", "input_tokens", "output_tokens", "compute_ms", "cost_micros", "estimated")
	tests := []struct {
		name     string
		q        metering.Query
		wantSQL  string
		wantArgs []any
	}{
		{"whole days: the rollup", metering.Query{GroupBy: metering.ByListing, From: day, To: day.AddDate(0, 1, 0), BuyerOrgID: "org_b"},
			"SELECT listing_id AS k, " + rollupSums + " FROM usage_daily WHERE buyer_org_id = ? AND day >= ? AND day < ? GROUP BY k ORDER BY k",
			[]any{"org_b", day.UnixMilli() / 86_400_000, day.AddDate(0, 1, 0).UnixMilli() / 86_400_000}},
		{"by day over the rollup", metering.Query{GroupBy: metering.ByDay},
			"SELECT day AS k, " + rollupSums + " FROM usage_daily GROUP BY k ORDER BY k", nil},
		// The whole days from the rollup, the partial first day from the
		// rows.
		{"not on days: the rollup and the partial day's rows", metering.Query{GroupBy: metering.BySeller, From: day.Add(time.Millisecond), ContractID: "ctr_1"},
			"SELECT k, " + rollupSums + " FROM (SELECT seller_org_id AS k, calls, tasks, input_tokens, output_tokens, compute_ms, cost_micros, estimated FROM usage_daily WHERE contract_id = ? AND day >= ?" +
				" UNION ALL SELECT seller_org_id AS k, 1, tasks, input_tokens, output_tokens, compute_ms, cost_micros, estimated FROM usage WHERE time_ms >= ? AND time_ms < ? AND contract_id = ?) GROUP BY k ORDER BY k",
			[]any{"ctr_1", day.UnixMilli()/86_400_000 + 1, day.UnixMilli() + 1, day.AddDate(0, 0, 1).UnixMilli(), "ctr_1"}},
		{"within one day: the rows", metering.Query{GroupBy: metering.BySeller, From: day.Add(time.Hour), To: day.Add(2 * time.Hour)},
			"SELECT seller_org_id AS k, " + rowSums + " FROM usage WHERE time_ms >= ? AND time_ms < ? GROUP BY k ORDER BY k",
			[]any{day.Add(time.Hour).UnixMilli(), day.Add(2 * time.Hour).UnixMilli()}},
		{"by task: the rows", metering.Query{GroupBy: metering.ByTask, From: day, To: day.Add(24 * time.Hour)},
			"SELECT listing_id || '/' || task_id AS k, " + rowSums + ", MAX(context_id) FROM usage WHERE time_ms >= ? AND time_ms < ? GROUP BY k ORDER BY k",
			[]any{day.UnixMilli(), day.Add(24 * time.Hour).UnixMilli()}},
		// The rollup has no tags: a tag grouping reads the rows, whole days
		// or not, and the key (checked by TagKey) is inlined in the path.
		{"by tag: the rows", metering.Query{GroupBy: metering.ByTag("team"), From: day, To: day.AddDate(0, 1, 0), BuyerOrgID: "org_b"},
			`SELECT COALESCE(json_extract(NULLIF(tags, ''), '$."team"'), '') AS k, ` + rowSums +
				" FROM usage WHERE time_ms >= ? AND time_ms < ? AND buyer_org_id = ? GROUP BY k ORDER BY k",
			[]any{day.UnixMilli(), day.AddDate(0, 1, 0).UnixMilli(), "org_b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sql, args := embedded.TotalsSQL(tt.q)
			if sql != tt.wantSQL {
				t.Errorf("sql\n got  %s\n want %s", sql, tt.wantSQL)
			}
			if !reflect.DeepEqual(args, tt.wantArgs) {
				t.Errorf("args = %#v, want %#v", args, tt.wantArgs)
			}
		})
	}
}

// TestShipperKilled: SIGKILLs of the shipper in the middle of batches and
// between insert and acknowledgement lose nothing and count nothing twice
// (storetest.KillShipper).
func TestShipperKilled(t *testing.T) {
	storetest.KillShipper(t, func(t *testing.T) string { return filepath.Join(t.TempDir(), "usage.db") },
		func(_ context.Context, path string) (metering.Store, error) { return embedded.Open(path) })
}

// cancelAfter is a context whose Err turns to context.Canceled after n
// calls: cancelled in the middle of an Insert.
type cancelAfter struct {
	context.Context
	n int
}

func (c *cancelAfter) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// TestInsertFailureRollsBack: an Insert that fails part way stores none of
// its rows and none of their sums; the same batch sent again then counts
// once. After Close, Insert fails.
func TestInsertFailureRollsBack(t *testing.T) {
	s, err := embedded.Open(filepath.Join(t.TempDir(), "usage.db"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []metering.Usage
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i := range 2000 {
		rows = append(rows, storetest.Row(i, t0.Add(time.Duration(i)*time.Second)))
	}
	err = s.Insert(&cancelAfter{Context: context.Background(), n: 2}, rows)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Insert cancelled part way: %v, want context.Canceled", err)
	}
	ctx := context.Background()
	if got, err := s.Rows(ctx, metering.Query{}); err != nil || len(got) != 0 {
		t.Fatalf("after the failed Insert: %d rows, %v", len(got), err)
	}
	if got, err := s.Totals(ctx, metering.Query{GroupBy: metering.ByDay}); err != nil || len(got) != 0 {
		t.Fatalf("after the failed Insert: totals %+v, %v", got, err)
	}
	if err := s.Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Totals(ctx, metering.Query{GroupBy: metering.ByDay}); err != nil || metering.Sum(got).Calls != int64(len(rows)) {
		t.Fatalf("after the batch sent again: totals %+v, %v; want %d calls", got, err, len(rows))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Insert(ctx, rows[:1]); err == nil {
		t.Fatal("Insert after Close succeeded")
	}
}
