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
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
)

// TestReportPastTheBound: an agent reporting more than
// agentmarket.MaxQuantity of a counter for a task (a hostile seller's
// 9·10^18 tokens) is billed the bound, at a cost that is exact and far
// from overflowing, and the call is flagged in the metrics.
func TestReportPastTheBound(t *testing.T) {
	rec := &rowsRecorder{}
	reg := prometheus.NewRegistry()
	p := &a2aproxy.Proxy{Ledger: countingLedger{}, Recorder: rec, Metrics: a2aproxy.NewMetrics(reg, a2aproxy.MetricsOptions{}),
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
	// The rows are spooled pending; the shipper settles them (Project).
	if err := p.Project(ctx, rec.rows); err != nil {
		t.Fatal(err)
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

// flakySpend answers what it is set to answer.
type flakySpend struct {
	spent int64
	err   error
}

func (f *flakySpend) Spent(context.Context, string, string, time.Time) (int64, error) {
	return f.spent, f.err
}

// TestBudgetsFailClosed: when the spend of a budgeted key or contract
// cannot be read, the call is refused with -32044, unless a reading of the
// same month at most a minute old stands in; calls without a budget go on;
// a saturated spend is a spent budget.
func TestBudgetsFailClosed(t *testing.T) {
	clock := agentmarket.NewManualClock(time.Date(2026, 12, 31, 23, 57, 0, 0, time.UTC))
	sp := &flakySpend{}
	p := &a2aproxy.Proxy{Spend: sp, Clock: clock}
	p.Init()
	down := agentmarket.Errorf(agentmarket.Unavailable, "usage_store", "the usage store failed")
	budget := int64(1000)
	keyed := agentmarket.Actor{OrgID: "org_b", KeyID: "key_b", KeyBudgetMicros: &budget}
	free := agentmarket.Actor{OrgID: "org_b", KeyID: "key_free"}
	none := &contracts.Contract{ID: "ctr_1"}
	capped := &contracts.Contract{ID: "ctr_2", MonthlyBudgetMicros: &budget}
	steps := []struct {
		name     string
		actor    agentmarket.Actor
		contract *contracts.Contract
		spent    int64
		err      error
		advance  time.Duration
		want     int // JSON-RPC code, 0 for allowed
	}{
		{"store down, spend never read: refused", keyed, none, 0, down, 0, a2aproxy.CodeBudgetUnchecked},
		{"store down, a contract budget never read: refused", free, capped, 0, down, 0, a2aproxy.CodeBudgetUnchecked},
		{"store down, no budget: goes on", free, none, 0, down, 0, 0},
		{"store back, under budget", keyed, none, 400, nil, 0, 0},
		{"store down, the last reading is 30 s old: it stands", keyed, none, 0, down, 30 * time.Second, 0},
		{"store down, the last reading is 61 s old: refused", keyed, none, 0, down, 31 * time.Second, a2aproxy.CodeBudgetUnchecked},
		{"store back at 23:59:30, under budget again", keyed, none, 999, nil, 89 * time.Second, 0},
		{"store down 40 s later, in January: December's reading does not stand", keyed, none, 0, down, 40 * time.Second, a2aproxy.CodeBudgetUnchecked},
		{"store back, budget spent", keyed, none, 1000, nil, 0, a2aproxy.CodeBudgetExhausted},
		{"a saturated spend is a spent budget", keyed, none, math.MaxInt64, nil, 3 * time.Second, a2aproxy.CodeBudgetExhausted},
	}
	for _, s := range steps {
		clock.Advance(s.advance)
		sp.spent, sp.err = s.spent, s.err
		err := p.CheckBudgets(context.Background(), s.actor, s.contract)
		got := 0
		if err != nil {
			got = a2aproxy.RPCCode(err)
		}
		if got != s.want {
			t.Errorf("%s: code %d (%v), want %d", s.name, got, err, s.want)
		}
	}
}
