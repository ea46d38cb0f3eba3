package metering_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/storetest"
)

// memLedger is an in-memory Ledger with the semantics every ledger must
// have: max(billed, cum) + add, the increase returned.
type memLedger struct {
	mu     sync.Mutex
	billed map[string]metering.Counters
	down   atomic.Int64 // fail this many calls
}

var errLedgerDown = errors.New("ledger database down")

func (l *memLedger) Bill(_ context.Context, listingID, taskID string, cum, add metering.Counters) (metering.Counters, bool, error) {
	if l.down.Add(-1) >= 0 {
		return metering.Counters{}, false, errLedgerDown
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.billed == nil {
		l.billed = map[string]metering.Counters{}
	}
	k := listingID + "/" + taskID
	old, seen := l.billed[k]
	n := metering.Counters{InputTokens: max(old.InputTokens, cum.InputTokens) + add.InputTokens,
		OutputTokens: max(old.OutputTokens, cum.OutputTokens) + add.OutputTokens, ComputeMs: max(old.ComputeMs, cum.ComputeMs) + add.ComputeMs}
	l.billed[k] = n
	return n.Sub(old), !seen, nil
}

var pricesForTest = metering.Rates{InputTokensPerMillion: 3_000_000, OutputTokensPerMillion: 15_000_000, ComputePerHour: 3_600_000, PerTask: 1_000}

// pendingRow is row n of task task whose usage the meter could not bill.
func pendingRow(n int, task string, cum, add metering.Counters) metering.Usage {
	u := row(n)
	u.TaskID = task
	u.InputTokens, u.OutputTokens, u.ComputeMs, u.Tasks, u.CostMicros = 0, 0, 0, 0, 0
	u.Pending = &metering.PendingBill{Key: task, Cum: cum, Add: add, Rates: pricesForTest}
	return u
}

// TestSpoolKeepsPendingUsage: a row with pending usage goes through the
// spool whole (record version 2), next to rows without.
func TestSpoolKeepsPendingUsage(t *testing.T) {
	s := MustOpenSpool(t, t.TempDir(), metering.SpoolOptions{})
	want := []metering.Usage{row(1), pendingRow(2, "task-9", metering.Counters{InputTokens: 10, OutputTokens: 20, ComputeMs: 300},
		metering.Counters{InputTokens: 4, ComputeMs: 7}), row(3)}
	if err := s.Append(want...); err != nil {
		t.Fatal(err)
	}
	got, _ := readAll(t, s)
	for i := range want {
		if w := storetest.Stored(want[i]); !reflect.DeepEqual(got[i], w) {
			t.Errorf("row %d\n got  %+v (pending %+v)\n want %+v (pending %+v)", i, got[i], got[i].Pending, w, w.Pending)
		}
	}
}

// TestSettle: pending usage is billed through the ledger as the meter
// would have billed it: the increase, a task counted once, the cost at
// the row's prices; replaying a cumulative report bills nothing more.
func TestSettle(t *testing.T) {
	ctx := context.Background()
	l := &memLedger{}
	rows := []metering.Usage{
		row(1),
		pendingRow(2, "task-a", metering.Counters{InputTokens: 1000, OutputTokens: 2000, ComputeMs: 500}, metering.Counters{}),
		pendingRow(3, "task-a", metering.Counters{InputTokens: 1000, OutputTokens: 3000, ComputeMs: 500}, metering.Counters{}),
		pendingRow(4, "task-a", metering.Counters{InputTokens: 1000, OutputTokens: 3000, ComputeMs: 500}, metering.Counters{}),
	}
	plain := rows[0]
	l.down.Store(1)
	if err := metering.Settle(ctx, l, rows); !errors.Is(err, errLedgerDown) {
		t.Fatalf("Settle with the ledger down = %v", err)
	}
	// The failed request's row stays pending; the others went through.
	if rows[1].Pending == nil || rows[2].Pending != nil || rows[3].Pending != nil {
		t.Fatalf("after a partly failed Settle, pending = %v %v %v; want only the failed row's", rows[1].Pending != nil, rows[2].Pending != nil, rows[3].Pending != nil)
	}
	if err := metering.Settle(ctx, l, rows); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rows[0], plain) {
		t.Errorf("a row without pending usage changed: %+v", rows[0])
	}
	var out, tasks, cost int64
	for _, u := range rows[1:] {
		if u.Pending != nil {
			t.Fatalf("row %s still pending", u.ID)
		}
		out += u.OutputTokens
		tasks += u.Tasks
		cost += u.CostMicros
	}
	if out != 3000 || tasks != 1 {
		t.Errorf("settled output tokens %d, tasks %d; want 3000 (the last report), 1", out, tasks)
	}
	// Rows settled in another order than they were observed still add up
	// to the whole report, priced once.
	if want := metering.Price(pricesForTest, metering.Counters{InputTokens: 1000, OutputTokens: 3000, ComputeMs: 500}, 1); cost != want || want == 0 {
		t.Errorf("settled cost = %d, want %d", cost, want)
	}
}

// TestShipperSettlesPendingUsage: rows the meter could not bill wait in
// the spool while the ledger is down (the shipper retries), and reach the
// store billed, once; a shipper without Settle never stores them
// unbilled.
func TestShipperSettlesPendingUsage(t *testing.T) {
	ctx := context.Background()
	sp := MustOpenSpool(t, t.TempDir(), metering.SpoolOptions{})
	store := mustOpenStore(t)
	l := &memLedger{}
	l.down.Store(3)
	sh := metering.NewShipper(sp, store, metering.ShipperOptions{BatchRows: 10, MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond,
		Settle: func(ctx context.Context, rows []metering.Usage) error { return metering.Settle(ctx, l, rows) }})
	rows := []metering.Usage{row(1), pendingRow(2, "task-b", metering.Counters{OutputTokens: 40}, metering.Counters{InputTokens: 8, ComputeMs: 120}), row(3)}
	if err := sp.Append(rows...); err != nil {
		t.Fatal(err)
	}
	if err := sh.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	checkStored(t, store, idsOf(rows))
	all, err := store.Rows(ctx, metering.Query{})
	var got []metering.Usage
	for _, u := range all {
		if u.TaskID == "task-b" {
			got = append(got, u)
		}
	}
	if err != nil || len(got) != 1 {
		t.Fatalf("task-b rows = %d, %v", len(got), err)
	}
	if u := got[0]; u.InputTokens != 8 || u.OutputTokens != 40 || u.ComputeMs != 120 || u.Tasks != 1 || u.CostMicros == 0 {
		t.Errorf("settled row = %+v", u)
	}
	if st := sh.Stats(); st.Failures < 3 {
		t.Errorf("stats = %+v, want the ledger's failures counted", st)
	}

	// Without Settle, a pending row is never stored.
	sp2 := MustOpenSpool(t, t.TempDir(), metering.SpoolOptions{})
	store2 := mustOpenStore(t)
	sh2 := metering.NewShipper(sp2, store2, metering.ShipperOptions{MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond})
	if err := sp2.Append(pendingRow(5, "task-c", metering.Counters{OutputTokens: 1}, metering.Counters{})); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_ = sh2.Flush(fctx)
	if n, _ := store2.Rows(ctx, metering.Query{}); len(n) != 0 {
		t.Errorf("a pending row was stored unbilled")
	}
}
