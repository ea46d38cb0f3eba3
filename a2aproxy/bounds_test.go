package a2aproxy_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/listings"
)

// TestReportPastTheBound: an agent reporting more than
// agentmarket.MaxQuantity of a counter for a task (a hostile seller's
// 9·10^18 tokens) is billed the bound, at a cost that is exact and far
// from overflowing, and the call is flagged in the metrics.
func TestReportPastTheBound(t *testing.T) {
	rec := &rowsRecorder{}
	reg := prometheus.NewRegistry()
	p := &a2aproxy.Proxy{Ledger: countingLedger{}, Recorder: rec, Metrics: a2aproxy.NewMetrics(reg),
		Clock: agentmarket.NewManualClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))}
	p.Init()
	top := agentmarket.MaxUnitPriceMicros
	plan := &listings.Plan{Currency: "usd", InputTokensPerMillionMicros: top, OutputTokensPerMillionMicros: top, ComputePerHourMicros: top, PerTaskMicros: top}
	ctx := context.Background()
	if err := p.FinishSend(ctx, "lst_hostile", "task-1", plan, &wire.Reported{InputTokens: 9_000_000_000_000_000_000, OutputTokens: math.MaxInt64, ComputeMs: 3_600_000}); err != nil {
		t.Fatal(err)
	}
	if err := p.FinishSend(ctx, "lst_fair", "task-2", plan, &wire.Reported{InputTokens: 1000, OutputTokens: 2000, ComputeMs: 3_600_000}); err != nil {
		t.Fatal(err)
	}
	if len(rec.rows) != 2 {
		t.Fatalf("%d rows recorded, want 2", len(rec.rows))
	}
	u := rec.rows[0]
	bound := agentmarket.MaxQuantity
	// 2 × 10^12 tokens at $10,000 a million, an hour at $10,000, a task at $10,000.
	if want := int64(2*bound/1_000_000*top + 2*top); u.InputTokens != bound || u.OutputTokens != bound || u.ComputeMs != 3_600_000 || u.CostMicros != want {
		t.Errorf("hostile row: tokens %d/%d, compute %d, cost %d; want %d/%d, 3600000, %d", u.InputTokens, u.OutputTokens, u.ComputeMs, u.CostMicros, bound, bound, want)
	}
	if u := rec.rows[1]; u.InputTokens != 1000 || u.OutputTokens != 2000 {
		t.Errorf("fair row changed: %+v", u)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var flagged []string
	for _, f := range families {
		if f.GetName() != "agentmarket_meter_usage_clamped_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			flagged = append(flagged, fmt.Sprintf("%s=%v", m.GetLabel()[0].GetValue(), m.GetCounter().GetValue()))
		}
	}
	if got := strings.Join(flagged, " "); got != "lst_hostile=1" {
		t.Errorf("agentmarket_meter_usage_clamped_total: %q, want lst_hostile=1", got)
	}
}
