package clickhouse_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/clickhouse"
	"github.com/agentmarket/agentmarket/metering/clickhouse/clickhousetest"
	"github.com/agentmarket/agentmarket/metering/storetest"
)

func randomRows(n int, start time.Time, span time.Duration, seed uint64) []metering.Usage {
	rng := rand.New(rand.NewPCG(seed, 9))
	var rows []metering.Usage
	for i := range n {
		rows = append(rows, metering.Usage{
			ID: fmt.Sprintf("u%d_%d", seed, i), Time: start.Add(time.Duration(rng.Int64N(int64(span)))).Truncate(time.Millisecond),
			TaskID: fmt.Sprintf("t%d", rng.IntN(300)), ListingID: fmt.Sprintf("lst_%d", rng.IntN(4)),
			SellerOrgID: fmt.Sprintf("org_s%d", rng.IntN(2)), BuyerOrgID: fmt.Sprintf("org_b%d", rng.IntN(3)),
			APIKeyID: fmt.Sprintf("key_%d", rng.IntN(5)), ContractID: fmt.Sprintf("ctr_%d", rng.IntN(6)),
			InputTokens: rng.Int64N(5000), OutputTokens: rng.Int64N(5000), ComputeMs: rng.Int64N(9000),
			Tasks: rng.Int64N(2), CostMicros: rng.Int64N(100000) - 500, Estimated: rng.IntN(2) == 1, Currency: "usd",
		})
	}
	return rows
}

// rangesOver are query ranges of every shape Spans cuts: whole days, whole
// hours, parts of seconds, open ends, before and across the start of the
// rollups, and empty.
func rangesOver(start time.Time) []metering.Query {
	day, hour := 24*time.Hour, time.Hour
	return []metering.Query{
		{},
		{From: start, To: start.Add(35 * day)},
		{From: start.Add(3 * day), To: start.Add(17 * day)},
		{From: start.Add(3*day + 5*hour), To: start.Add(17*day + 7*hour)},
		{From: start.Add(3*day + 5*hour + 1500*time.Millisecond), To: start.Add(3*day + 9*hour + 7*time.Millisecond)},
		{From: start.Add(29*day + 23*hour + 59*time.Minute)},
		{To: start.Add(12*day + 30*time.Minute)},
		{From: start.Add(5 * day), To: start.Add(6 * day), BuyerOrgID: "org_b1"},
		{SellerOrgID: "org_s0", ListingID: "lst_2"},
		{ContractID: "ctr_3", APIKeyID: "key_1", From: start.Add(day + 3*time.Second)},
		{From: start.Add(7 * hour), To: start.Add(7 * hour)},
	}
}

func checkRollups(t *testing.T, s *clickhouse.Store, start time.Time) {
	t.Helper()
	ctx := context.Background()
	for _, g := range []metering.GroupBy{metering.ByListing, metering.BySeller, metering.ByBuyer, metering.ByAPIKey, metering.ByDay} {
		for _, q := range rangesOver(start) {
			q.GroupBy = g
			got, err := s.Totals(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			want, err := s.TotalsFromRows(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %+v:\n rollups %+v\n rows    %+v", g, q, got, want)
			}
		}
	}
}

// TestRollupMatchesRows: the rollups answer exactly what summing the rows
// answers, for every grouping, filter and shape of range, also when
// batches are sent again, whole or in other cuts, and when a batch spans
// two months (two partitions).
func TestRollupMatchesRows(t *testing.T) {
	s := clickhousetest.Open(t)
	ctx := context.Background()
	start := time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC) // 30 days run into December
	rows := randomRows(3000, start, 30*24*time.Hour, 7)
	for _, batch := range [][]metering.Usage{rows[:1200], rows[800:], rows[:10], rows[2999:], rows[1500:2500]} {
		if err := s.Insert(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	checkRollups(t, s, start)
	// Pinned against the rows' own sums, so a fault shared by both paths
	// shows too.
	got, err := s.Totals(ctx, metering.Query{GroupBy: metering.ByBuyer, From: start, To: start.Add(30 * 24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if want := storetest.Reference(rows, metering.Query{GroupBy: metering.ByBuyer}); !reflect.DeepEqual(got, want) {
		t.Errorf("by buyer\n got  %+v\n want %+v", got, want)
	}
}

// TestRollupsStartWhenComplete: rows stored before the rollups existed
// (no markers, no cells) are read from the rows; the rollups answer from
// usage_rollup_state's time on, rounded up to the hour.
func TestRollupsStartWhenComplete(t *testing.T) {
	s := clickhousetest.Open(t)
	ctx := context.Background()
	start := time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)
	old := randomRows(800, start, 10*24*time.Hour, 1)
	if err := s.InsertRowsOnly(ctx, old); err != nil { // as a meter before migration 0002
		t.Fatal(err)
	}
	complete := start.Add(10*24*time.Hour - 30*time.Minute) // the migration ran then
	s.SetComplete(complete)
	if err := s.Insert(ctx, randomRows(1500, complete, 20*24*time.Hour, 2)); err != nil {
		t.Fatal(err)
	}
	checkRollups(t, s, start)
}

func TestSpans(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	ms := func(s string) int64 { return at(s).UnixMilli() }
	epoch := time.Unix(0, 0)
	const end = (1<<32-1)*1000 + 1000
	cases := []struct {
		name           string
		from, to, done string
		want           []clickhouse.Span
	}{
		{"whole days", "2026-11-01T00:00:00Z", "2026-11-04T00:00:00Z", "", []clickhouse.Span{{clickhouse.KindDay, ms("2026-11-01T00:00:00Z"), ms("2026-11-04T00:00:00Z")}}},
		{"days and hours and ms", "2026-11-01T22:30:00.5Z", "2026-11-04T03:15:00Z", "", []clickhouse.Span{
			{clickhouse.SourceRows, ms("2026-11-01T22:30:00.5Z"), ms("2026-11-01T23:00:00Z")},
			{clickhouse.KindHour, ms("2026-11-01T23:00:00Z"), ms("2026-11-02T00:00:00Z")},
			{clickhouse.KindDay, ms("2026-11-02T00:00:00Z"), ms("2026-11-04T00:00:00Z")},
			{clickhouse.KindHour, ms("2026-11-04T00:00:00Z"), ms("2026-11-04T03:00:00Z")},
			{clickhouse.SourceRows, ms("2026-11-04T03:00:00Z"), ms("2026-11-04T03:15:00Z")},
		}},
		{"hours within a day", "2026-11-01T02:00:00Z", "2026-11-01T05:30:00Z", "", []clickhouse.Span{
			{clickhouse.KindHour, ms("2026-11-01T02:00:00Z"), ms("2026-11-01T05:00:00Z")},
			{clickhouse.SourceRows, ms("2026-11-01T05:00:00Z"), ms("2026-11-01T05:30:00Z")},
		}},
		{"less than an hour", "2026-11-01T02:10:00Z", "2026-11-01T02:50:00Z", "", []clickhouse.Span{{clickhouse.SourceRows, ms("2026-11-01T02:10:00Z"), ms("2026-11-01T02:50:00Z")}}},
		{"a day across two hours' edges", "2026-11-01T23:30:00Z", "2026-11-03T00:30:00Z", "", []clickhouse.Span{
			{clickhouse.SourceRows, ms("2026-11-01T23:30:00Z"), ms("2026-11-02T00:00:00Z")},
			{clickhouse.KindDay, ms("2026-11-02T00:00:00Z"), ms("2026-11-03T00:00:00Z")},
			{clickhouse.SourceRows, ms("2026-11-03T00:00:00Z"), ms("2026-11-03T00:30:00Z")},
		}},
		{"open", "", "", "", []clickhouse.Span{{clickhouse.KindDay, 0, 4294944000000}, {clickhouse.KindHour, 4294944000000, 4294965600000}, {clickhouse.SourceRows, 4294965600000, end}}},
		{"rollups complete from mid-range, rounded up to the hour", "2026-11-01T00:00:00Z", "2026-11-05T00:00:00Z", "2026-11-02T10:20:00Z", []clickhouse.Span{
			{clickhouse.SourceRows, ms("2026-11-01T00:00:00Z"), ms("2026-11-02T11:00:00Z")},
			{clickhouse.KindHour, ms("2026-11-02T11:00:00Z"), ms("2026-11-03T00:00:00Z")},
			{clickhouse.KindDay, ms("2026-11-03T00:00:00Z"), ms("2026-11-05T00:00:00Z")},
		}},
		{"rollups complete after the range", "2026-11-01T00:00:00Z", "2026-11-05T00:00:00Z", "2026-12-02T10:20:00Z", []clickhouse.Span{{clickhouse.SourceRows, ms("2026-11-01T00:00:00Z"), ms("2026-11-05T00:00:00Z")}}},
		{"empty", "2026-11-01T00:00:00Z", "2026-11-01T00:00:00Z", "", []clickhouse.Span{{clickhouse.SourceRows, ms("2026-11-01T00:00:00Z"), ms("2026-11-01T00:00:00Z")}}},
		{"before 1970 and after 2106", "1900-01-01T00:00:00Z", "2200-01-01T00:00:00Z", "", []clickhouse.Span{{clickhouse.KindDay, 0, 4294944000000}, {clickhouse.KindHour, 4294944000000, 4294965600000}, {clickhouse.SourceRows, 4294965600000, end}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var from, to time.Time
			done := epoch
			if tc.from != "" {
				from = at(tc.from)
			}
			if tc.to != "" {
				to = at(tc.to)
			}
			if tc.done != "" {
				done = at(tc.done)
			}
			if got := clickhouse.Spans(from, to, done); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Spans\n got  %+v\n want %+v", got, tc.want)
			}
		})
	}
}

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestRollupTotalsSQL pins the SQL of Totals over rollups, with its
// arguments, in golden files (go test -run RollupTotalsSQL -update
// rewrites them).
func TestRollupTotalsSQL(t *testing.T) {
	nov := func(d, h, m int) time.Time { return time.Date(2026, 11, d, h, m, 0, 0, time.UTC) }
	cases := []struct {
		name     string
		q        metering.Query
		complete time.Time
	}{
		{"whole-days-by-listing-one-buyer", metering.Query{GroupBy: metering.ByListing, From: nov(1, 0, 0), To: nov(30, 0, 0), BuyerOrgID: "org_b"}, time.Unix(0, 0)},
		{"days-hours-and-rows-by-day-one-seller", metering.Query{GroupBy: metering.ByDay, From: nov(1, 22, 30), To: nov(4, 3, 15), SellerOrgID: "org_s"}, time.Unix(0, 0)},
		{"rows-before-complete-by-key", metering.Query{GroupBy: metering.ByAPIKey, From: nov(1, 0, 0), To: nov(5, 0, 0), ContractID: "ctr_1", ListingID: "lst_1"}, nov(2, 10, 20)},
		{"open-by-seller", metering.Query{GroupBy: metering.BySeller}, time.Unix(0, 0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sql, args := clickhouse.RollupTotalsSQL(tc.q, tc.complete)
			var shown []string
			for _, a := range args {
				if v, ok := a.(string); ok {
					shown = append(shown, strconv.Quote(v))
				} else {
					shown = append(shown, fmt.Sprint(a))
				}
			}
			got := sql + "\n-- args: " + strings.Join(shown, ", ") + "\n"
			path := filepath.Join("testdata", tc.name+".sql")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("RollupTotalsSQL(%+v) differs from %s:\n%s", tc.q, path, got)
			}
		})
	}
}
