// Package storetest is the contract every metering.Store must meet. Each
// implementation's tests call Run; the same assertions then hold on the
// embedded SQLite store and on ClickHouse alike.
package storetest

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/spool"
)

// Factory returns a fresh, empty store.
type Factory func(t *testing.T) metering.Store

// t0 is 22:00 UTC, so rows two hours later fall on the next day (and, on
// the last day of a month, in the next month: ClickHouse partitions).
var t0 = time.Date(2026, 11, 30, 22, 0, 0, 123_000_000, time.UTC)

// Row returns a usage row with every field set, distinct per n.
func Row(n int, at time.Time) metering.Usage {
	return metering.Usage{
		ID:   fmt.Sprintf("u_%04d", n),
		Time: at,

		TraceID:      fmt.Sprintf("%032x", n+1),
		TaskID:       fmt.Sprintf("task_%d", n),
		ContextID:    fmt.Sprintf("ctx_%d", n),
		ParentTaskID: fmt.Sprintf("parent_%d", n),

		ListingID:   "lst_1",
		SellerOrgID: "org_seller1",
		BuyerOrgID:  "org_buyer1",
		APIKeyID:    "key_1",
		ContractID:  "ctr_1",

		Method:          "message/send",
		ProtocolVersion: "0.3",
		State:           "completed",
		ErrorCode:       0,

		BytesIn:   int64(100 + n),
		BytesOut:  int64(200 + n),
		LatencyMs: int64(3 + n),

		InputTokens:  int64(1000 + n),
		OutputTokens: int64(2000 + n),
		ComputeMs:    int64(50 + n),
		Tasks:        1,
		CostMicros:   int64(7_000 + n),
		Currency:     "usd",
		Estimated:    n%2 == 1,

		CardHash: fmt.Sprintf("sha256:%064x", n),
		Model:    "model-x",
	}
}

// fixture is a small data set spread over listings, sellers, buyers, keys,
// contracts, tasks and three UTC days. Amounts are powers of ten per row so
// a wrong sum names the rows it mixed up.
func fixture() []metering.Usage {
	type spec struct {
		at                                          time.Time
		listing, seller, buyer, key, contract, task string
		tasks                                       int64
		estimated                                   bool
	}
	specs := []spec{
		{t0.Add(-24 * time.Hour), "lst_1", "org_s1", "org_b1", "key_1", "ctr_1", "task_a", 1, false},  // 2026-11-29
		{t0, "lst_1", "org_s1", "org_b1", "key_1", "ctr_1", "task_a", 0, true},                        // 2026-11-30 22:00:00.123
		{t0.Add(time.Hour), "lst_1", "org_s1", "org_b2", "key_2", "ctr_2", "task_b", 1, false},        // 2026-11-30 23:00:00.123
		{t0.Add(150 * time.Minute), "lst_2", "org_s2", "org_b1", "key_1", "ctr_3", "task_c", 1, true}, // 2026-12-01 00:30:00.123
		{t0.Add(150*time.Minute + time.Millisecond), "lst_2", "org_s2", "org_b1", "key_3", "ctr_3", "task_c", 0, false},
		{t0.Add(150*time.Minute + time.Millisecond), "lst_3", "org_s2", "org_b2", "key_2", "ctr_4", "", 0, false}, // same time: id orders
	}
	var out []metering.Usage
	p := int64(1)
	for i, s := range specs {
		u := Row(i, s.at)
		u.ListingID, u.SellerOrgID, u.BuyerOrgID, u.APIKeyID, u.ContractID, u.TaskID = s.listing, s.seller, s.buyer, s.key, s.contract, s.task
		u.Tasks, u.Estimated = s.tasks, s.estimated
		u.InputTokens, u.OutputTokens, u.ComputeMs, u.CostMicros = p, 2*p, 3*p, 5*p
		p *= 10
		out = append(out, u)
	}
	return out
}

// Reference computes what Totals must answer, by brute force, counting each
// ID once; sums saturate at the largest int64 (metering.Total.Add).
func Reference(rows []metering.Usage, q metering.Query) []metering.Total {
	seen := map[string]bool{}
	sums := map[string]*metering.Total{}
	for _, u := range rows {
		if seen[u.ID] || !Matches(u, q) {
			continue
		}
		seen[u.ID] = true
		k := Key(u, q.GroupBy)
		t := sums[k]
		if t == nil {
			t = &metering.Total{Key: k}
			if q.GroupBy == metering.ByTask {
				t.Task = metering.TaskRef{ListingID: u.ListingID, TaskID: u.TaskID}
			}
			sums[k] = t
		}
		if q.GroupBy == metering.ByTask {
			t.Task.ContextID = max(t.Task.ContextID, u.ContextID)
		}
		row := metering.Total{Calls: 1, Tasks: u.Tasks, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			ComputeMs: u.ComputeMs, CostMicros: u.CostMicros}
		if u.Estimated {
			row.Estimated = 1
		}
		*t = t.Add(row)
	}
	out := []metering.Total{}
	for _, t := range sums {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Matches reports whether q's filters select u.
func Matches(u metering.Usage, q metering.Query) bool {
	ms := u.Time.UnixMilli()
	return (q.From.IsZero() || ms >= q.From.UnixMilli()) &&
		(q.To.IsZero() || ms < q.To.UnixMilli()) &&
		(q.BuyerOrgID == "" || u.BuyerOrgID == q.BuyerOrgID) &&
		(q.SellerOrgID == "" || u.SellerOrgID == q.SellerOrgID) &&
		(q.ListingID == "" || u.ListingID == q.ListingID) &&
		(q.APIKeyID == "" || u.APIKeyID == q.APIKeyID) &&
		(q.ContractID == "" || u.ContractID == q.ContractID)
}

// Key is u's key under g.
func Key(u metering.Usage, g metering.GroupBy) string {
	switch g {
	case metering.ByListing:
		return u.ListingID
	case metering.BySeller:
		return u.SellerOrgID
	case metering.ByBuyer:
		return u.BuyerOrgID
	case metering.ByAPIKey:
		return u.APIKeyID
	case metering.ByTask:
		return u.ListingID + "/" + u.TaskID
	case metering.ByDay:
		return u.Time.UTC().Format(time.DateOnly)
	}
	if key, ok := g.TagKey(); ok {
		v, _ := u.Tags.Get(key)
		return v
	}
	panic("storetest: unknown group by " + string(g))
}

// Stored is u as a store gives it back: time to the millisecond, in UTC.
func Stored(u metering.Usage) metering.Usage {
	u.Time = time.UnixMilli(u.Time.UnixMilli()).UTC()
	return u
}

// Run runs the contract suite.
func Run(t *testing.T, newStore Factory) {
	ctx := context.Background()

	insert := func(t *testing.T, s metering.Store, rows []metering.Usage) {
		t.Helper()
		if err := s.Insert(ctx, rows); err != nil {
			t.Fatalf("Insert(%d rows): %v", len(rows), err)
		}
	}
	totals := func(t *testing.T, s metering.Store, q metering.Query) []metering.Total {
		t.Helper()
		got, err := s.Totals(ctx, q)
		if err != nil {
			t.Fatalf("Totals(%+v): %v", q, err)
		}
		return got
	}
	rowsOf := func(t *testing.T, s metering.Store, q metering.Query) []metering.Usage {
		t.Helper()
		got, err := s.Rows(ctx, q)
		if err != nil {
			t.Fatalf("Rows(%+v): %v", q, err)
		}
		return got
	}
	checkTotals := func(t *testing.T, s metering.Store, all []metering.Usage, q metering.Query) {
		t.Helper()
		got, want := totals(t, s, q), Reference(all, q)
		if !equalTotals(got, want) {
			t.Errorf("Totals(%s)\n got  %+v\n want %+v", describe(q), got, want)
		}
	}

	t.Run("insert and rows round trip every field", func(t *testing.T) {
		s := newStore(t)
		paris, err := time.LoadLocation("Europe/Paris")
		if err != nil {
			paris = time.FixedZone("CET", 3600)
		}
		u := metering.Usage{
			ID:   "u_round_trip",
			Time: time.Date(2026, 12, 1, 1, 2, 3, 456_789_123, paris), // 00:02:03.456 UTC
			// Every string field distinct, one with non-ASCII text.
			TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", TaskID: "task_rt", ContextID: "ctx_rt", ParentTaskID: "task_parent",
			ListingID: "lst_rt", SellerOrgID: "org_seller_rt", BuyerOrgID: "org_buyer_rt", APIKeyID: "key_rt", ContractID: "ctr_rt",
			Method: "SendStreamingMessage", ProtocolVersion: "1.0", State: "input-required", ErrorCode: -32001,
			BytesIn: 1 << 40, BytesOut: 123_456_789, LatencyMs: 987,
			InputTokens: 1_000_000_007, OutputTokens: 2_000_000_011, ComputeMs: 3_600_000, Tasks: 1,
			CostMicros: 9_007_199_254_740_993, Currency: "eur", Estimated: true,
			CardHash: "sha256:0123456789abcdef", Model: "modèle-✓ v2",
			Tags: `{"cost-center":"EU / 42 \"north\"","team":"paiements ✓"}`,
		}
		insert(t, s, []metering.Usage{u})
		got := rowsOf(t, s, metering.Query{})
		if len(got) != 1 {
			t.Fatalf("Rows returned %d rows, want 1: %+v", len(got), got)
		}
		want := Stored(u)
		if !got[0].Time.Equal(want.Time) || got[0].Time.Location() != time.UTC {
			t.Errorf("Time = %v (%v), want %v in UTC", got[0].Time, got[0].Time.Location(), want.Time)
		}
		g, w := got[0], want
		g.Time, w.Time = time.Time{}, time.Time{}
		if g != w {
			t.Errorf("round trip\n got  %+v\n want %+v", g, w)
		}
		// The zero-valued row (apart from what Validate requires) survives too.
		z := metering.Usage{ID: "u_zero", Time: time.Unix(0, 0)}
		insert(t, s, []metering.Usage{z})
		got = rowsOf(t, s, metering.Query{To: time.Unix(1, 0)})
		if !equalRows(got, []metering.Usage{Stored(z)}) {
			t.Errorf("zero row round trip: got %+v, want %+v", got, Stored(z))
		}
	})

	t.Run("a row inserted again counts once", func(t *testing.T) {
		s := newStore(t)
		rows := fixture()
		insert(t, s, rows)
		insert(t, s, rows)      // the same batch re-sent
		insert(t, s, rows[2:4]) // part of it, in another batch
		extra := Row(100, t0.Add(time.Minute))
		insert(t, s, []metering.Usage{rows[0], extra, extra}) // old, new, and a duplicate inside one batch
		all := append(slices.Clone(rows), extra)
		got := rowsOf(t, s, metering.Query{})
		if len(got) != len(all) {
			t.Fatalf("Rows returned %d rows, want %d", len(got), len(all))
		}
		for _, g := range metering.GroupBys {
			checkTotals(t, s, all, metering.Query{GroupBy: g})
		}
	})

	t.Run("concurrent inserts of the same rows count once", func(t *testing.T) {
		s := newStore(t)
		var rows []metering.Usage
		for i := range 200 {
			rows = append(rows, Row(i, t0.Add(time.Duration(i)*time.Second)))
		}
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for w := range 4 {
			wg.Go(func() {
				// Each writer sends every row, in its own batch cut.
				for i := w * 10; i < len(rows); i += 50 {
					if err := s.Insert(ctx, rows[i:min(i+50, len(rows))]); err != nil {
						errs[w] = err
						return
					}
				}
				errs[w] = s.Insert(ctx, rows[:min(w*10, len(rows))])
			})
		}
		wg.Wait()
		for w, err := range errs {
			if err != nil {
				t.Fatalf("writer %d: %v", w, err)
			}
		}
		checkTotals(t, s, rows, metering.Query{GroupBy: metering.ByListing})
		if got := rowsOf(t, s, metering.Query{}); len(got) != len(rows) {
			t.Errorf("Rows returned %d rows, want %d", len(got), len(rows))
		}
	})

	t.Run("totals for every group by", func(t *testing.T) {
		s := newStore(t)
		rows := fixture()
		insert(t, s, rows)
		for _, g := range metering.GroupBys {
			t.Run(string(g), func(t *testing.T) {
				checkTotals(t, s, rows, metering.Query{GroupBy: g})
			})
		}
		// Pinned by hand, so the reference cannot drift with the stores.
		got := totals(t, s, metering.Query{GroupBy: metering.ByListing})
		want := []metering.Total{
			{Key: "lst_1", Calls: 3, Tasks: 2, InputTokens: 111, OutputTokens: 222, ComputeMs: 333, CostMicros: 555, Estimated: 1},
			{Key: "lst_2", Calls: 2, Tasks: 1, InputTokens: 11000, OutputTokens: 22000, ComputeMs: 33000, CostMicros: 55000, Estimated: 1},
			{Key: "lst_3", Calls: 1, Tasks: 0, InputTokens: 100000, OutputTokens: 200000, ComputeMs: 300000, CostMicros: 500000, Estimated: 0},
		}
		if !equalTotals(got, want) {
			t.Errorf("by listing\n got  %+v\n want %+v", got, want)
		}
		// Tasks are keyed "<listing>/<task>"; rows without a task fall under
		// "<listing>/".
		got = totals(t, s, metering.Query{GroupBy: metering.ByTask})
		if len(got) != 4 || got[0].Key != "lst_1/task_a" || got[0].Calls != 2 || got[3].Key != "lst_3/" || got[3].Calls != 1 {
			t.Errorf("by task: %+v", got)
		} else if want := (metering.TaskRef{ListingID: "lst_1", TaskID: "task_a", ContextID: max(rows[0].ContextID, rows[1].ContextID)}); got[0].Task != want || want.ContextID == "" ||
			got[3].Task.ListingID != "lst_3" || got[3].Task.TaskID != "" {
			t.Errorf("by task, the tasks: %+v and %+v, want %+v first", got[0].Task, got[3].Task, want)
		}
	})

	t.Run("totals by tag: its values, untagged rows under the empty key", func(t *testing.T) {
		s := newStore(t)
		rows := fixture()
		tags := []agentmarket.Tags{`{"project":"kyc","team":"payments"}`, `{"team":"risk"}`, `{"project":"kyc"}`, "",
			`{"team":"payments"}`, `{"team.sub":"x","team":"risk"}`}
		for i := range rows {
			rows[i].Tags = tags[i%len(tags)]
		}
		insert(t, s, rows)
		for _, key := range []string{"team", "project", "team.sub", "nowhere"} {
			t.Run(key, func(t *testing.T) {
				checkTotals(t, s, rows, metering.Query{GroupBy: metering.ByTag(key)})
				checkTotals(t, s, rows, metering.Query{GroupBy: metering.ByTag(key), BuyerOrgID: "org_b1", From: t0, To: t0.Add(3 * time.Hour)})
			})
		}
		got := totals(t, s, metering.Query{GroupBy: metering.ByTag("team")})
		var keys []string
		for _, g := range got {
			keys = append(keys, g.Key)
		}
		if strings.Join(keys, ",") != ",payments,risk" {
			t.Errorf("team's values: %q, want untagged, payments, risk", keys)
		}
	})

	t.Run("day grouping is by UTC day", func(t *testing.T) {
		s := newStore(t)
		rows := fixture()
		// 23:59:59.999 and 00:00:00.000 UTC, written in a zone east of UTC
		// where both are on the same local day.
		tokyo := time.FixedZone("JST", 9*3600)
		a := Row(50, time.Date(2026, 12, 2, 23, 59, 59, 999_000_000, time.UTC).In(tokyo))
		b := Row(51, time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC).In(tokyo))
		rows = append(rows, a, b)
		insert(t, s, rows)
		got := totals(t, s, metering.Query{GroupBy: metering.ByDay})
		var keys []string
		for _, g := range got {
			keys = append(keys, g.Key)
		}
		if want := []string{"2026-11-29", "2026-11-30", "2026-12-01", "2026-12-02", "2026-12-03"}; !slices.Equal(keys, want) {
			t.Fatalf("day keys = %v, want %v", keys, want)
		}
		checkTotals(t, s, rows, metering.Query{GroupBy: metering.ByDay})
	})

	t.Run("filters and the half-open time range", func(t *testing.T) {
		s := newStore(t)
		rows := fixture()
		insert(t, s, rows)
		at := rows[3].Time // 2026-12-01 00:30:00.123; rows[4] and [5] are 1 ms later
		queries := []metering.Query{
			{BuyerOrgID: "org_b1"},
			{SellerOrgID: "org_s2"},
			{ListingID: "lst_1"},
			{APIKeyID: "key_2"},
			{ContractID: "ctr_3"},
			{BuyerOrgID: "org_b1", ListingID: "lst_2", APIKeyID: "key_1"},
			{SellerOrgID: "org_nobody"},
			{From: at},                               // from is inclusive
			{To: at},                                 // to is exclusive
			{From: at, To: at.Add(time.Millisecond)}, // exactly one millisecond: rows[3] only
			{From: at.Add(time.Millisecond), To: at.Add(time.Millisecond)},
			{From: t0, To: t0.Add(time.Hour)},
			{From: t0.Add(-time.Millisecond), To: t0.Add(time.Hour + time.Millisecond), SellerOrgID: "org_s1"},
			{From: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
			{From: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		}
		for _, q := range queries {
			for _, g := range metering.GroupBys {
				q.GroupBy = g
				checkTotals(t, s, rows, q)
			}
			var want []metering.Usage
			for _, u := range rows {
				if Matches(u, q) {
					want = append(want, Stored(u))
				}
			}
			got := rowsOf(t, s, q)
			if !equalRows(got, want) {
				t.Errorf("Rows(%s) = %v, want %v", describe(q), ids(got), ids(want))
			}
		}
		one := rowsOf(t, s, metering.Query{From: at, To: at.Add(time.Millisecond)})
		if len(one) != 1 || one[0].ID != rows[3].ID {
			t.Errorf("one millisecond [%v, +1ms) = %v, want [%s]", at, ids(one), rows[3].ID)
		}
	})

	t.Run("empty results", func(t *testing.T) {
		s := newStore(t)
		for _, g := range metering.GroupBys {
			if got := totals(t, s, metering.Query{GroupBy: g}); len(got) != 0 {
				t.Errorf("Totals by %s on an empty store = %+v", g, got)
			}
		}
		if got := rowsOf(t, s, metering.Query{}); len(got) != 0 {
			t.Errorf("Rows on an empty store = %+v", got)
		}
		insert(t, s, fixture())
		if got := totals(t, s, metering.Query{GroupBy: metering.ByDay, BuyerOrgID: "org_none"}); len(got) != 0 {
			t.Errorf("Totals for an unknown buyer = %+v", got)
		}
		if got := rowsOf(t, s, metering.Query{From: t0, To: t0}); len(got) != 0 {
			t.Errorf("Rows of an empty range = %+v", got)
		}
		if err := s.Insert(ctx, nil); err != nil {
			t.Errorf("Insert of no rows: %v", err)
		}
	})

	t.Run("ordering", func(t *testing.T) {
		s := newStore(t)
		var rows []metering.Usage
		// Inserted newest first; ids against time order; ties on time.
		for i := 9; i >= 0; i-- {
			u := Row(i, t0.Add(time.Duration(i/3)*time.Millisecond))
			u.ID = fmt.Sprintf("u_%d", 9-i)
			u.ListingID = fmt.Sprintf("lst_%d", 9-i)
			rows = append(rows, u)
		}
		insert(t, s, rows)
		got := rowsOf(t, s, metering.Query{})
		want := slices.Clone(rows)
		sort.Slice(want, func(i, j int) bool {
			a, b := want[i], want[j]
			if !a.Time.Equal(b.Time) {
				return a.Time.Before(b.Time)
			}
			return a.ID < b.ID
		})
		for i := range want {
			want[i] = Stored(want[i])
		}
		if !equalRows(got, want) {
			t.Errorf("Rows order = %v, want %v (time, then id)", ids(got), ids(want))
		}
		tot := totals(t, s, metering.Query{GroupBy: metering.ByListing})
		if !slices.IsSortedFunc(tot, func(a, b metering.Total) int {
			switch {
			case a.Key < b.Key:
				return -1
			case a.Key > b.Key:
				return 1
			}
			return 0
		}) || len(tot) != 10 {
			t.Errorf("Totals not ordered by key: %+v", tot)
		}
	})

	t.Run("a full shipper batch", func(t *testing.T) {
		s := newStore(t)
		var rows []metering.Usage
		for i := range spool.DefaultBatchRows {
			u := Row(i, t0.Add(time.Duration(i)*time.Minute))
			u.ListingID = fmt.Sprintf("lst_%d", i%7)
			rows = append(rows, u)
		}
		insert(t, s, rows)
		insert(t, s, rows[:1000])
		checkTotals(t, s, rows, metering.Query{GroupBy: metering.ByListing})
		checkTotals(t, s, rows, metering.Query{GroupBy: metering.ByDay, From: t0.Add(24 * time.Hour), To: t0.Add(48 * time.Hour)})
	})

	t.Run("sums past int64 saturate and spare other keys", func(t *testing.T) {
		// A broken or hostile seller's rows at the largest int64 (stored
		// before amounts were bounded, say): two in one day, one the next
		// day. Next to them an ordinary buyer's rows, and rows whose sums
		// come to exactly the largest int64 and to 7 below it. Every total
		// reads: exact where it fits, saturated where it does not, never an
		// error or a wrapped number, and other keys are untouched.
		const maxI = math.MaxInt64
		huge := func(n int, at time.Time) metering.Usage {
			u := Row(n, at)
			u.ListingID, u.SellerOrgID, u.BuyerOrgID, u.APIKeyID, u.ContractID = "lst_huge", "org_s_huge", "org_b_huge", "key_huge", "ctr_huge"
			u.InputTokens, u.OutputTokens, u.ComputeMs, u.CostMicros = maxI, maxI, maxI, maxI
			return u
		}
		edge := func(n int, at time.Time, v int64) metering.Usage {
			u := Row(n, at)
			u.ListingID, u.SellerOrgID, u.BuyerOrgID, u.APIKeyID, u.ContractID = "lst_edge", "org_s_edge", "org_b_edge", "key_edge", "ctr_edge"
			u.InputTokens, u.OutputTokens, u.ComputeMs, u.CostMicros = v, v, v, v
			return u
		}
		day := 24 * time.Hour
		rows := append(fixture(),
			huge(200, t0), huge(201, t0.Add(time.Minute)), huge(202, t0.Add(day)),
			edge(210, t0, maxI-5), edge(211, t0.Add(time.Minute), 5),
			edge(212, t0.Add(day), maxI-10), edge(213, t0.Add(day+time.Minute), 3),
		)
		s := newStore(t)
		insert(t, s, rows)
		midnight := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
		for _, q := range []metering.Query{
			{},
			{From: midnight, To: midnight.Add(3 * day)},     // whole days
			{From: t0.Add(-time.Hour), To: t0.Add(2 * day)}, // not on days
			{From: midnight, To: midnight.Add(day)},         // one day
			{BuyerOrgID: "org_b1"},
			{SellerOrgID: "org_s_huge", From: midnight, To: midnight.Add(3 * day)},
			{ContractID: "ctr_edge", From: t0.Add(-time.Millisecond), To: t0.Add(2 * day)},
		} {
			for _, g := range metering.GroupBys {
				q.GroupBy = g
				checkTotals(t, s, rows, q)
			}
		}
		// Pinned by hand, so the reference cannot drift with the stores.
		got := totals(t, s, metering.Query{GroupBy: metering.ByListing, ListingID: "lst_huge"})
		want := []metering.Total{{Key: "lst_huge", Calls: 3, Tasks: 3, InputTokens: maxI, OutputTokens: maxI, ComputeMs: maxI, CostMicros: maxI, Estimated: 1}}
		if !equalTotals(got, want) {
			t.Errorf("huge listing\n got  %+v\n want %+v", got, want)
		}
		got = totals(t, s, metering.Query{GroupBy: metering.ByDay, ListingID: "lst_edge"})
		want = []metering.Total{
			{Key: "2026-11-30", Calls: 2, Tasks: 2, InputTokens: maxI, OutputTokens: maxI, ComputeMs: maxI, CostMicros: maxI, Estimated: 1},
			{Key: "2026-12-01", Calls: 2, Tasks: 2, InputTokens: maxI - 7, OutputTokens: maxI - 7, ComputeMs: maxI - 7, CostMicros: maxI - 7, Estimated: 1},
		}
		if !equalTotals(got, want) {
			t.Errorf("edge listing by day\n got  %+v\n want %+v", got, want)
		}
		if got := rowsOf(t, s, metering.Query{ListingID: "lst_huge"}); len(got) != 3 || got[0].CostMicros != maxI || got[2].InputTokens != maxI {
			t.Errorf("huge rows do not read back: %+v", got)
		}
	})

	t.Run("bad input is refused", func(t *testing.T) {
		s := newStore(t)
		for _, q := range []metering.Query{
			{},
			{GroupBy: "week"},
			{GroupBy: metering.ByDay, From: t0, To: t0.Add(-time.Second)},
		} {
			if _, err := s.Totals(ctx, q); agentmarket.KindOf(err) != agentmarket.Invalid {
				t.Errorf("Totals(%s) err = %v, want invalid", describe(q), err)
			}
		}
		if _, err := s.Rows(ctx, metering.Query{From: t0, To: t0.Add(-time.Second)}); agentmarket.KindOf(err) != agentmarket.Invalid {
			t.Errorf("Rows with to before from: err = %v, want invalid", err)
		}
		bad := []metering.Usage{Row(1, t0), {Time: t0}}
		if err := s.Insert(ctx, bad); agentmarket.KindOf(err) != agentmarket.Invalid {
			t.Errorf("Insert of a row without id: err = %v, want invalid", err)
		}
		if got := rowsOf(t, s, metering.Query{}); len(got) != 0 {
			t.Errorf("a refused batch stored %v", ids(got))
		}
	})
}

func equalTotals(got, want []metering.Total) bool {
	if len(got) == 0 && len(want) == 0 {
		return true
	}
	return reflect.DeepEqual(got, want)
}

func equalRows(got, want []metering.Usage) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := got[i], want[i]
		if !g.Time.Equal(w.Time) || g.Time.Location() != time.UTC {
			return false
		}
		g.Time, w.Time = time.Time{}, time.Time{}
		if g != w {
			return false
		}
	}
	return true
}

func ids(rows []metering.Usage) []string {
	out := []string{}
	for _, u := range rows {
		out = append(out, u.ID)
	}
	return out
}

func describe(q metering.Query) string {
	s := fmt.Sprintf("group_by=%s", q.GroupBy)
	if !q.From.IsZero() {
		s += " from=" + q.From.UTC().Format(time.RFC3339Nano)
	}
	if !q.To.IsZero() {
		s += " to=" + q.To.UTC().Format(time.RFC3339Nano)
	}
	for _, f := range []struct{ k, v string }{
		{"buyer", q.BuyerOrgID}, {"seller", q.SellerOrgID}, {"listing", q.ListingID}, {"api_key", q.APIKeyID}, {"contract", q.ContractID},
	} {
		if f.v != "" {
			s += " " + f.k + "=" + f.v
		}
	}
	return s
}
