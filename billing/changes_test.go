package billing_test

import (
	"context"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/contracts"
)

// Properties of a plan change in a month, on random plans, change instants
// (to the millisecond) and usage:
//   - each part's fee is its plan's fee × its whole seconds / the month's,
//     exactly, and the two parts' seconds add up to the stay's;
//   - between two plans of the same fee, a change costs not a fraction of
//     a micro of fee: the fee lines sum to fee × stay seconds / month's;
//   - to a plan dearer in every price, a later change never costs more
//     (without allowances: each part has its plan's allowance in full, so
//     usage moved from one part to the other can land outside one and
//     inside the other);
//   - the lines' minor amounts sum to the total.
func TestPropertyPlanChange(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 3))
	for range propertyRuns {
		in := randomInput(r)
		month, p1 := in.billed, in.plan
		p1.Version = 1
		p2 := p1
		p2.Version = 2
		p2.MonthlyFeeMicros = min(agentmarket.MaxMonthlyFeeMicros, p2.MonthlyFeeMicros+magnitude(r)/10)
		p2.InputTokensPerMillionMicros = min(agentmarket.MaxUnitPriceMicros, p2.InputTokensPerMillionMicros+magnitude(r)/1000)
		p2.PerTaskMicros = min(agentmarket.MaxUnitPriceMicros, p2.PerTaskMicros+magnitude(r)/1_000_000)
		p2.IncludedInputTokens, p2.IncludedTasks = p2.IncludedInputTokens/2, p2.IncludedTasks/2
		length := month.End.Sub(month.Start)
		start := month.Start.Add(time.Duration(r.Int64N(int64(length / 2)))).Truncate(time.Millisecond)
		change := start.Add(time.Millisecond + time.Duration(r.Int64N(int64(month.End.Sub(start)-time.Millisecond)))).Truncate(time.Millisecond)
		rows := make([]usageRow, r.IntN(6))
		for i := range rows {
			rows[i] = usageRow{start.Add(time.Duration(r.Int64N(int64(month.End.Sub(start))))).Truncate(time.Millisecond),
				billing.Usage{InputTokens: magnitude(r) / 100, Tasks: magnitude(r) / 10_000}}
		}
		split := func(p1, p2 billing.Part, at time.Time) []billing.Part {
			p1.Span, p2.Span = period(start, at), period(at, month.End)
			for _, row := range rows {
				u := &p2.Usage
				if row.at.Before(at) {
					u = &p1.Usage
				}
				u.InputTokens += row.u.InputTokens
				u.Tasks += row.u.Tasks
			}
			return []billing.Part{p1, p2}
		}
		inv, err := billing.RateParts(month, split(billing.Part{Plan: p1}, billing.Part{Plan: p2}, change))
		if err != nil {
			t.Fatal(err)
		}
		monthSec := month.End.Unix() - month.Start.Unix()
		var secs int64
		var sum int64
		for _, l := range inv.Lines {
			sum += l.AmountMinor
			if l.Kind != billing.LineFlatFee {
				continue
			}
			fee := []int64{p1.MonthlyFeeMicros, p2.MonthlyFeeMicros}[l.Part]
			if want := big.NewRat(fee*l.Used, monthSec); l.ExactMicros().Cmp(want) != 0 {
				t.Fatalf("part %d fee %s, want %s", l.Part, l.ExactMicros(), want)
			}
			secs += l.Used
		}
		if stay := month.End.Unix() - start.Unix(); secs != stay || sum != inv.TotalMinor {
			t.Fatalf("fee seconds %d, stay %d; lines %d, total %d", secs, stay, sum, inv.TotalMinor)
		}
		same := p1
		same.Version = 2
		sameInv, err := billing.RateParts(month, split(billing.Part{Plan: p1}, billing.Part{Plan: same}, change))
		if err != nil {
			t.Fatal(err)
		}
		fees := new(big.Rat)
		for _, l := range sameInv.Lines {
			if l.Kind == billing.LineFlatFee {
				fees.Add(fees, l.ExactMicros())
			}
		}
		if want := big.NewRat(p1.MonthlyFeeMicros*secs, monthSec); fees.Cmp(want) != 0 {
			t.Fatalf("a change between equal fees: %s, want %s", fees, want)
		}
		later := change.Add(time.Duration(r.Int64N(int64(month.End.Sub(change))))).Truncate(time.Millisecond)
		if later.After(change) {
			q1, q2 := p1, p2
			q1.IncludedInputTokens, q1.IncludedTasks, q2.IncludedInputTokens, q2.IncludedTasks = 0, 0, 0, 0
			inv1, err := billing.RateParts(month, split(billing.Part{Plan: q1}, billing.Part{Plan: q2}, change))
			if err != nil {
				t.Fatal(err)
			}
			inv2, err := billing.RateParts(month, split(billing.Part{Plan: q1}, billing.Part{Plan: q2}, later))
			if err != nil {
				t.Fatal(err)
			}
			if inv2.ExactMicros().Cmp(inv1.ExactMicros()) > 0 {
				t.Fatalf("a later change to a dearer plan costs more: %s > %s", inv2.ExactMicros(), inv1.ExactMicros())
			}
		}
	}
}

// history is a PlanHistory in memory.
type history map[string][]contracts.PlanChange

func (h history) PlanChanges(_ context.Context, id string) ([]contracts.PlanChange, error) {
	return h[id], nil
}

// TestPlanChangeWithTheProvider: a mid-month change reports the usage
// until then to the old items, makes the new version's prices and replaces
// the subscription's items, once (its key); later usage goes to the new
// items; the month's invoice rates each part by its plan, to the micro; and
// reconciliation finds nothing amiss.
func TestPlanChangeWithTheProvider(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	dear := basePlan(99_000_000)
	dear.Version, dear.InputTokensPerMillionMicros, dear.IncludedInputTokens = 4, 5_000_000, 2_000_000
	e.plans["lst_echo/4"] = dear
	c := e.attach(t, "ctr_1")
	e.use(t, "ctr_1", t0.Add(time.Hour), billing.Usage{InputTokens: 1_500_000, Tasks: 1})
	at := date(2026, 5, 10, 12, 0, 0).Add(250 * time.Millisecond)
	e.use(t, "ctr_1", at.Add(-time.Millisecond), billing.Usage{InputTokens: 100})
	e.use(t, "ctr_1", at, billing.Usage{InputTokens: 2_500_000, Tasks: 1})
	e.at(at.Add(time.Second))
	h := history{}
	svc := e.service()
	svc.History = h
	ch := contracts.PlanChange{ContractID: "ctr_1", Seq: 1, At: at, FromVersion: 3, ToVersion: 4}
	if err := svc.ChangePlan(ctx, c, ch, "Echo agent"); err != nil {
		t.Fatal(err)
	}
	h["ctr_1"] = []contracts.PlanChange{ch}
	c.PlanVersion = 4
	e.ctrs.all[0] = *c
	wantCalls(t, e.prov.take(),
		"ReportUsage si_ctr_1_input_tokens 1500100 2026-05-10T11:59:59Z am1/contract/ctr_1/usage/input_tokens/1777802400-1778414400",
		"ReportUsage si_ctr_1_tasks 1 2026-05-10T11:59:59Z am1/contract/ctr_1/usage/tasks/1777802400-1778414400",
		"EnsurePlan lst_echo v4",
		"ChangePlan sub_ctr_1 si_ctr_1_flat→price_lst_echo_4_flat at 2026-05-10T12:00:00.25Z am1/contract/ctr_1/plan-change/1")
	sub, _ := e.store.Subscription(ctx, "ctr_1")
	if sub.Refs.MeteredItemIDs[billing.LineInputTokens] != "si_ctr_1_input_tokens+" {
		t.Fatalf("items after the change: %+v", sub.Refs)
	}
	e.at(date(2026, 5, 11))
	runOnce(t, e.reporter(), 2)
	if n := e.prov.countedFor("si_ctr_1_input_tokens+"); n != 2_500_000 {
		t.Errorf("the new input item got %d, want the 2,500,000 tokens after the change", n)
	}

	may := billing.MonthOf(t0)
	e.at(date(2026, 6, 1, 0, 5))
	led := e.ledger()
	led.History = h
	if n, err := led.CloseMonth(ctx, may); err != nil || n != 1 {
		t.Fatalf("CloseMonth = %d, %v", n, err)
	}
	inv, _ := e.store.Invoice(ctx, "ctr_1", may.Start)
	// v3 from 10:17:42 on 3 May to 12:00:00 on 10 May (610,938 s) of
	// $49: 11,176,807 + 74/93 micros; v4 from there (1,857,600 s) of $99:
	// 68,661,290 + 10/31; usage: v3 (1,500,100 − 1,000,000) input × 3 =
	// 1,500,300; v4: the month's allowance is shared, v3 used 1,000,000
	// of it free, so v4's 2,000,000 leaves 1,000,000: (2,500,000 −
	// 1,000,000) × 5 = 7,500,000.
	want, err := billing.RateParts(may, []billing.Part{
		{Plan: e.plans["lst_echo/3"], Span: period(t0, at), Usage: billing.Usage{InputTokens: 1_500_100, Tasks: 1}},
		{Plan: dear, Span: period(at, may.End), Usage: billing.Usage{InputTokens: 2_500_000, Tasks: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if summary(&inv.Invoice) != summary(want) {
		t.Errorf("May's invoice\n  %s\nwant\n  %s", summary(&inv.Invoice), summary(want))
	}
	if l := inv.Invoice.Lines; l[0].Used != 610_938 || l[0].AmountMicros != 11_176_807 || l[5].AmountMicros != 68_661_290 || l[5].Used != 1_857_600 || l[1].AmountMicros != 1_500_300 || l[6].AmountMicros != 7_500_000 ||
		inv.Invoice.Parts[1].PlanVersion != 4 {
		t.Errorf("the parts: %+v", inv.Invoice.Lines)
	}
	if d, err := svc.Reconcile(ctx, may); err != nil || len(d) != 0 {
		t.Errorf("Reconcile = %+v, %v", d, err)
	}
}

type scheduledStates struct{ canceled []string }

func (s *scheduledStates) CancelScheduled(_ context.Context, id string) (*contracts.Contract, error) {
	s.canceled = append(s.canceled, id)
	return nil, nil
}

type due []contracts.Contract

func (d due) DueCancellations(context.Context, time.Time) ([]contracts.Contract, error) {
	return d, nil
}

// TestEndScheduled: at the end of the period a buyer asked for, the usage
// until then is reported, the subscription recorded as canceled then (the
// provider ended it itself: no call to cancel), and the contract canceled.
func TestEndScheduled(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.attach(t, "ctr_1")
	end := date(2026, 6, 1)
	c.CancelAt = &end
	e.use(t, "ctr_1", date(2026, 5, 31, 23, 59, 59), billing.Usage{Tasks: 3})
	e.at(end.Add(10 * time.Second))
	svc := e.service()
	svc.Scheduled = due{*c}
	states := &scheduledStates{}
	if n, err := svc.EndScheduled(ctx, states); err != nil || n != 1 || len(states.canceled) != 1 {
		t.Fatalf("EndScheduled = %d, %v; canceled %v", n, err, states.canceled)
	}
	wantCalls(t, e.prov.take(), "ReportUsage si_ctr_1_tasks 3 2026-05-31T23:59:59Z am1/contract/ctr_1/usage/tasks/1777802400-1780272000")
	if sub, _ := e.store.Subscription(ctx, "ctr_1"); sub.CanceledAt == nil || !sub.CanceledAt.Equal(end) {
		t.Errorf("subscription canceled at %v, want %v", sub.CanceledAt, end)
	}
}

// TestCanChangePlan: the currency rule ChangePlan applies is the one the
// pages ask before offering a change (contracts.PlanChangeChecker).
func TestCanChangePlan(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	euro := basePlan(49_000_000)
	euro.Version, euro.Currency = 4, "eur"
	e.plans["lst_echo/4"] = euro
	same := basePlan(99_000_000)
	same.Version = 5
	e.plans["lst_echo/5"] = same
	c := e.contract("ctr_1", t0)
	var checker contracts.PlanChangeChecker = &billing.Hooks{Service: e.ledger()}
	if err := checker.CanChangePlan(ctx, c, 4); agentmarket.CodeOf(err) != "invalid_plan_change" {
		t.Errorf("to a plan in eur: %v, want invalid_plan_change", err)
	}
	if err := checker.CanChangePlan(ctx, c, 5); err != nil {
		t.Errorf("to a plan in usd: %v", err)
	}
}
