package spool_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/spool"
	"github.com/agentmarket/agentmarket/metering/storetest"
)

// pendingRow is row n of task task whose usage the meter could not bill.
func pendingRow(n int, task string, cum, add metering.Counters) metering.Usage {
	return storetest.Pending(row(n), task, cum, add)
}

// TestSpoolKeepsPendingUsage: a row with pending usage goes through the
// spool whole (record version 2), next to rows without.
func TestSpoolKeepsPendingUsage(t *testing.T) {
	s := MustOpenSpool(t, t.TempDir(), spool.Options{})
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

// TestShipperSettlesPendingUsage: rows the meter could not bill wait in
// the spool while the ledger is down (the shipper retries), and reach the
// store billed, once; a shipper without Settle never stores them
// unbilled.
func TestShipperSettlesPendingUsage(t *testing.T) {
	ctx := context.Background()
	sp := MustOpenSpool(t, t.TempDir(), spool.Options{})
	store := mustOpenStore(t)
	l := &storetest.Ledger{}
	l.Down.Store(3)
	sh := spool.NewShipper(sp, store, spool.ShipperOptions{BatchRows: 10, MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond,
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
	sp2 := MustOpenSpool(t, t.TempDir(), spool.Options{})
	store2 := mustOpenStore(t)
	sh2 := spool.NewShipper(sp2, store2, spool.ShipperOptions{MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond})
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
