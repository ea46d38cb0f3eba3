package metering_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/storetest"
)

// TestSettle: pending usage is billed through the ledger as the meter
// would have billed it: the increase, a task counted once, the cost at
// the row's prices; replaying a cumulative report bills nothing more.
func TestSettle(t *testing.T) {
	ctx := context.Background()
	l := &storetest.Ledger{}
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	// pending is row n of task-a whose usage the meter could not bill.
	pending := func(n int, cum metering.Counters) metering.Usage {
		return storetest.Pending(storetest.Row(n, at), "task-a", cum, metering.Counters{})
	}
	rows := []metering.Usage{
		storetest.Row(1, at),
		pending(2, metering.Counters{InputTokens: 1000, OutputTokens: 2000, ComputeMs: 500}),
		pending(3, metering.Counters{InputTokens: 1000, OutputTokens: 3000, ComputeMs: 500}),
		pending(4, metering.Counters{InputTokens: 1000, OutputTokens: 3000, ComputeMs: 500}),
	}
	plain := rows[0]
	l.Down.Store(1)
	if err := metering.Settle(ctx, l, rows); !errors.Is(err, storetest.ErrLedgerDown) {
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
	if want := metering.Price(storetest.Rates, metering.Counters{InputTokens: 1000, OutputTokens: 3000, ComputeMs: 500}, 1); cost != want || want == 0 {
		t.Errorf("settled cost = %d, want %d", cost, want)
	}
}
