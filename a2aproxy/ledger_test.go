package a2aproxy_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/metering"
)

type downLedger struct{}

func (downLedger) Bill(context.Context, string, string, metering.Counters, metering.Counters) (metering.Counters, bool, error) {
	return metering.Counters{}, false, errors.New("ledger database unreachable")
}

type rowsRecorder struct {
	mu   sync.Mutex
	rows []metering.Usage
}

func (r *rowsRecorder) Err() error { return nil }

func (r *rowsRecorder) Record(_ context.Context, u metering.Usage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rows = append(r.rows, u)
	return nil
}

// TestLedgerDownKeepsTheUsage: when the ledger cannot be reached, the
// call's row is recorded with what the meter observed as pending usage
// (the agent's report, or the estimate, and the plan's prices), for the
// shipper to bill; it is not recorded as usage-free.
func TestLedgerDownKeepsTheUsage(t *testing.T) {
	rec := &rowsRecorder{}
	p := &a2aproxy.Proxy{Ledger: downLedger{}, Recorder: rec, Clock: agentmarket.NewManualClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))}
	p.Init()
	plan := &listings.Plan{Currency: "usd", InputTokensPerMillionMicros: 3_000_000, OutputTokensPerMillionMicros: 15_000_000, PerTaskMicros: 1000}
	ctx := context.Background()
	if err := p.FinishSend(ctx, "lst_1", "task-1", plan, &wire.Reported{InputTokens: 120, OutputTokens: 480, ComputeMs: 900}); err != nil {
		t.Fatal(err)
	}
	if err := p.FinishSend(ctx, "lst_1", "task-2", plan, nil); err != nil {
		t.Fatal(err)
	}
	if len(rec.rows) != 2 {
		t.Fatalf("%d rows recorded, want 2", len(rec.rows))
	}
	reported, estimated := rec.rows[0], rec.rows[1]
	if p := reported.Pending; p == nil || p.Key != "task-1" || p.Cum != (metering.Counters{InputTokens: 120, OutputTokens: 480, ComputeMs: 900}) ||
		p.Rates.OutputTokensPerMillion != 15_000_000 || p.Rates.PerTask != 1000 {
		t.Errorf("reported row's pending usage = %+v", p)
	}
	if p := estimated.Pending; p == nil || p.Key != "task-2" || p.Add.InputTokens == 0 || p.Add.ComputeMs != 250 || !estimated.Estimated {
		t.Errorf("estimated row's pending usage = %+v (estimated %t)", p, estimated.Estimated)
	}
	// Settled later through a working ledger, the row carries the usage.
	rows := []metering.Usage{reported}
	if err := metering.Settle(ctx, &countingLedger{}, rows); err != nil || rows[0].OutputTokens != 480 || rows[0].Tasks != 1 ||
		rows[0].CostMicros != a2aproxy.Rate(*plan, metering.Counters{InputTokens: 120, OutputTokens: 480, ComputeMs: 900}, 1) {
		t.Errorf("settled row = %+v, %v", rows[0], err)
	}
}

// countingLedger bills every request as a task's first, in full.
type countingLedger struct{}

func (countingLedger) Bill(_ context.Context, _, _ string, cum, add metering.Counters) (metering.Counters, bool, error) {
	return metering.Counters{InputTokens: cum.InputTokens + add.InputTokens, OutputTokens: cum.OutputTokens + add.OutputTokens,
		ComputeMs: cum.ComputeMs + add.ComputeMs}, true, nil
}
