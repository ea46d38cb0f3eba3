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
	"github.com/agentmarket/agentmarket/migrations/gormdb"
	"github.com/agentmarket/agentmarket/migrations/gormdb/gormdbtest"
)

func TestLedger(t *testing.T) {
	gormdbtest.Each(t, func(t *testing.T, db *gormdb.DB) {
		ctx := context.Background()
		l := gormledger.New(db.DB, agentmarket.NewManualClock(time.Unix(0, 0)))
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
	gormdbtest.Each(t, func(t *testing.T, db *gormdb.DB) {
		ctx := context.Background()
		l := gormledger.New(db.DB, agentmarket.SystemClock{})
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
