package gormledger_test

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/gormledger"
	"github.com/agentmarket/agentmarket/migrations/relational"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

func TestLedger(t *testing.T) {
	t.Run("unbound", func(t *testing.T) { testLedger(t, false) })
	t.Run("bound", func(t *testing.T) { testLedger(t, true) })
}

// testLedger bills task-1 and task-big, bound in task_owners (where their
// counters then live) or not (task_usage).
func testLedger(t *testing.T, bound bool) {
	relationaltest.Each(t, func(t *testing.T, db *relational.DB) {
		ctx := context.Background()
		l := gormledger.New(db.DB, agentmarket.NewManualClock(time.Unix(0, 0)))
		if bound {
			for _, task := range []string{"task-1", "task-big"} {
				if err := db.DB.Exec("INSERT INTO task_owners (listing_id, task_id, org_id, contract_id, created_at) VALUES (?, ?, 'org_1', 'ctr_1', ?)",
					"lst_1", task, time.Unix(0, 0).UTC()).Error; err != nil {
					t.Fatal(err)
				}
			}
		}
		c := func(i, o, m int64) metering.Counters {
			return metering.Counters{InputTokens: i, OutputTokens: o, ComputeMs: m}
		}
		steps := []struct {
			name      string
			cum, add  metering.Counters
			want      metering.Counters
			wantFirst bool
		}{
			{"first report", c(10, 5, 100), c(0, 0, 0), c(10, 5, 100), true},
			{"replay of the same report", c(10, 5, 100), c(0, 0, 0), c(0, 0, 0), false},
			{"growth bills the increase", c(12, 9, 100), c(0, 0, 0), c(2, 4, 0), false},
			{"an older report bills nothing", c(1, 1, 1), c(0, 0, 0), c(0, 0, 0), false},
			{"additive estimate", c(0, 0, 0), c(3, 0, 50), c(3, 0, 50), false},
		}
		for _, s := range steps {
			got, first, err := l.Bill(ctx, "lst_1", "task-1", s.cum, s.add)
			if err != nil || got != s.want || first != s.wantFirst {
				t.Fatalf("%s: got %+v first=%v err=%v, want %+v first=%v", s.name, got, first, err, s.want, s.wantFirst)
			}
		}
		// A task whose counters reached the top of int64 (stored before
		// reports were bounded) stays there: more usage bills nothing
		// rather than wrapping the counters negative and billing ~2^63 next.
		const maxI = math.MaxInt64
		for _, s := range []struct {
			name      string
			cum, add  metering.Counters
			want      metering.Counters
			wantFirst bool
		}{
			{"the largest report", c(maxI, maxI, maxI), c(0, 0, 0), c(maxI, maxI, maxI), true},
			{"an estimate on top", c(0, 0, 0), c(10, 10, 10), c(0, 0, 0), false},
			{"then a small report", c(1, 1, 1), c(5, 5, 5), c(0, 0, 0), false},
		} {
			got, first, err := l.Bill(ctx, "lst_1", "task-big", s.cum, s.add)
			if err != nil || got != s.want || first != s.wantFirst {
				t.Fatalf("%s: got %+v first=%v err=%v, want %+v first=%v", s.name, got, first, err, s.want, s.wantFirst)
			}
		}
		// Same task id on another listing is another task.
		if got, first, _ := l.Bill(ctx, "lst_2", "task-1", c(1, 1, 1), c(0, 0, 0)); !first || got != c(1, 1, 1) {
			t.Fatalf("other listing: %+v %v", got, first)
		}
	})
}

// TestLedgerConcurrent: many meters reporting the same cumulative counters
// at once bill them exactly once in total.
func TestLedgerConcurrent(t *testing.T) {
	t.Run("unbound", func(t *testing.T) { testLedgerConcurrent(t, false) })
	t.Run("bound", func(t *testing.T) { testLedgerConcurrent(t, true) })
}

func testLedgerConcurrent(t *testing.T, bound bool) {
	relationaltest.Each(t, func(t *testing.T, db *relational.DB) {
		ctx := context.Background()
		l := gormledger.New(db.DB, agentmarket.SystemClock{})
		if bound {
			if err := db.DB.Exec("INSERT INTO task_owners (listing_id, task_id, org_id, contract_id, created_at) VALUES ('lst', 'task', 'org_1', 'ctr_1', ?)",
				time.Unix(0, 0).UTC()).Error; err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		var total metering.Counters
		firsts := 0
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := int64(1); i <= 20; i++ {
					d, first, err := l.Bill(ctx, "lst", "task", metering.Counters{InputTokens: i * 10, OutputTokens: i, ComputeMs: i * 3}, metering.Counters{})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					total.InputTokens += d.InputTokens
					total.OutputTokens += d.OutputTokens
					total.ComputeMs += d.ComputeMs
					if first {
						firsts++
					}
					mu.Unlock()
				}
			}(g)
		}
		wg.Wait()
		if want := (metering.Counters{InputTokens: 200, OutputTokens: 20, ComputeMs: 60}); total != want || firsts != 1 {
			t.Fatalf("billed %+v (firsts %d), want %+v once", total, firsts, want)
		}
	})
}

// TestLedgerBillsARowOnce: a row settled again (a spool replay after a
// crash, or the shipper settling a row settled ahead) gets the answer it
// got the first time and bills nothing more, its Add counters included;
// the same row twice in one batch too. Pruned answers are forgotten.
func TestLedgerBillsARowOnce(t *testing.T) {
	relationaltest.Each(t, func(t *testing.T, db *relational.DB) {
		ctx := context.Background()
		clock := agentmarket.NewManualClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
		l := gormledger.New(db.DB, clock)
		c := func(i, o, m int64) metering.Counters {
			return metering.Counters{InputTokens: i, OutputTokens: o, ComputeMs: m}
		}
		first := []metering.BillRequest{
			{ListingID: "lst", TaskID: "task-1", Cum: c(10, 5, 0), Add: c(0, 0, 40), RowID: "use_1"},
			{ListingID: "lst", TaskID: "call:use_2", Add: c(7, 3, 20), RowID: "use_2"},
			{ListingID: "lst", TaskID: "task-1", Cum: c(12, 5, 0), Add: c(1, 0, 0), RowID: "use_3"},
		}
		want := []metering.BillResult{
			{Delta: c(10, 5, 40), First: true},
			{Delta: c(7, 3, 20), First: true},
			{Delta: c(3, 0, 0)},
		}
		got := l.BillMany(ctx, first)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("first settling, row %d: %+v, want %+v", i, got[i], want[i])
			}
		}
		// Settled again (in another order, with a new row among them): the
		// old rows get their first answers, the task's counters do not move.
		again := []metering.BillRequest{first[2], first[0], {ListingID: "lst", TaskID: "task-1", Cum: c(12, 5, 0), Add: c(0, 0, 5), RowID: "use_4"}, first[1], first[1]}
		got = l.BillMany(ctx, again)
		wantAgain := []metering.BillResult{want[2], want[0], {Delta: c(0, 0, 5)}, want[1], want[1]}
		for i := range wantAgain {
			if got[i] != wantAgain[i] {
				t.Fatalf("settling again, request %d: %+v, want %+v", i, got[i], wantAgain[i])
			}
		}
		if d, _, err := l.Bill(ctx, "lst", "task-1", c(12, 5, 0), c(0, 0, 0)); err != nil || !d.Zero() {
			t.Fatalf("the task's counters moved: %+v %v", d, err)
		}
		clock.Advance(31 * 24 * time.Hour)
		if n, err := l.PruneSettled(ctx, clock.Now().Add(-30*24*time.Hour)); err != nil || n != 4 {
			t.Fatalf("PruneSettled = %d, %v; want 4", n, err)
		}
	})
}
