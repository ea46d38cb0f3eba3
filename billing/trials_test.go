package billing_test

import (
	"context"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
)

// TestRateTrialThenPaid: a contract that starts on 10 May in a 14-day trial
// pays nothing for the trial (its usage is shown, at zero) and, from 24 May,
// 8/31 of the fee and its usage past the allowance, rounded once.
func TestRateTrialThenPaid(t *testing.T) {
	may := billing.MonthOf(date(2026, 5, 1))
	plan := basePlan(49_000_000)
	trialEnd := date(2026, 5, 24)
	inv, err := billing.RateParts(may, []billing.Part{
		{Plan: plan, Span: period(date(2026, 5, 10), trialEnd), Usage: billing.Usage{InputTokens: 5_000_000, Tasks: 400}, Trial: true},
		{Plan: plan, Span: period(trialEnd, may.End), Usage: billing.Usage{InputTokens: 1_500_000, Tasks: 100}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Trial: nothing. Paid: fee 49,000,000 × 691,200 / 2,678,400 =
	// 12,645,161 + 9/31; input (1,500,000 − 1,000,000) × 3 = 1,500,000;
	// tasks within the allowance. Subtotal 14,145,161 + 9/31 micros =
	// 1,414.516… cents → 1,415.
	want := "flat_fee=0[0] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] " +
		"flat_fee=12645161+9/31[1265] input_tokens=1500000[150] output_tokens=0[0] compute=0[0] tasks=0[0] " +
		"subtotal=14145161+9/31 total=1415"
	if got := summary(inv); got != want {
		t.Errorf("invoice\n  %s\nwant\n  %s", got, want)
	}
	if len(inv.Parts) != 2 || !inv.Parts[0].Trial || inv.Parts[1].Trial || !inv.Parts[0].Active.End.Equal(trialEnd) ||
		!inv.Active.Start.Equal(date(2026, 5, 10)) || !inv.Active.End.Equal(may.End) {
		t.Errorf("parts %+v, active %+v", inv.Parts, inv.Active)
	}
	trialLine := inv.Lines[1]
	if trialLine.Part != 0 || trialLine.Used != 5_000_000 || trialLine.Quantity != 5_000_000 || trialLine.UnitPriceMicros != 0 ||
		trialLine.Description != "Input tokens, per million, free trial" {
		t.Errorf("the trial's input line = %+v, want the usage shown at a price of zero", trialLine)
	}
	if fee := inv.Lines[0]; fee.Used != 14*86400 || fee.Description != "Free trial: no monthly fee, prorated for 14 of 31 days" {
		t.Errorf("the trial's fee line = %+v", fee)
	}
	if paid := inv.Lines[5]; paid.Part != 1 || paid.Used != 8*86400 || paid.Description != "Monthly fee, prorated for 8 of 31 days" {
		t.Errorf("the paid fee line = %+v", paid)
	}
}

func TestRatePartsInvalid(t *testing.T) {
	may := billing.MonthOf(date(2026, 5, 1))
	plan := basePlan(1)
	eur := plan
	eur.Currency = "eur"
	for _, tc := range []struct {
		name  string
		parts []billing.Part
		want  string
	}{
		{"no parts", nil, "parts:required"},
		{"overlapping parts", []billing.Part{{Plan: plan, Span: period(date(2026, 5, 1), date(2026, 5, 10))},
			{Plan: plan, Span: period(date(2026, 5, 9), date(2026, 5, 20))}}, "parts[1].span.start:ordered"},
		{"two currencies", []billing.Part{{Plan: plan, Span: period(date(2026, 5, 1), date(2026, 5, 10))},
			{Plan: eur, Span: period(date(2026, 5, 10), date(2026, 5, 20))}}, "parts[1].plan.currency:same_currency"},
		{"outside the period", []billing.Part{{Plan: plan, Span: period(date(2026, 4, 1), date(2026, 4, 10))}}, "parts:outside_period"},
		{"negative usage", []billing.Part{{Plan: plan, Span: period(date(2026, 5, 1), date(2026, 5, 10)), Usage: billing.Usage{Tasks: -1}}},
			"parts[0].usage.tasks:non_negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := billing.RateParts(may, tc.parts)
			if got := fieldRules(t, err, "invalid_rating_input"); got != tc.want {
				t.Errorf("fields %q, want %q (%v)", got, tc.want, err)
			}
		})
	}
}

// randomTrial is a plan, a contract's stay in a month that starts in trial
// (its trial may begin before the month, and end before, in or after it)
// and usage rows at random instants of the month.
type randomTrial struct {
	plan     listings.Plan
	month    billing.Period
	start    time.Time // the contract's start, the trial's start
	trialEnd time.Time
	end      time.Time // the stay's end (the month's end, or a cancellation)
	rows     []usageRow
}

type usageRow struct {
	at time.Time
	u  billing.Usage
}

func newRandomTrial(r *rand.Rand) randomTrial {
	in := randomInput(r)
	month := in.billed
	length := month.End.Sub(month.Start)
	start := month.Start.Add(time.Duration(r.Int64N(int64(length)))).Truncate(time.Millisecond)
	if r.IntN(3) == 0 {
		start = month.Start.Add(-time.Duration(r.Int64N(int64(20 * 24 * time.Hour))))
	}
	trialEnd := start.Add(time.Duration(1 + r.Int64N(int64(30*24*time.Hour)))).Truncate(time.Millisecond)
	end := month.End
	if r.IntN(3) == 0 && trialEnd.Before(month.End) {
		end = trialEnd.Add(time.Duration(r.Int64N(int64(month.End.Sub(trialEnd)) + 1)))
	}
	rt := randomTrial{plan: in.plan, month: month, start: start, trialEnd: trialEnd, end: end}
	for range r.IntN(6) {
		from := maxTime(start, month.Start)
		if !from.Before(end) {
			break
		}
		at := from.Add(time.Duration(r.Int64N(int64(end.Sub(from))))).Truncate(time.Millisecond)
		rt.rows = append(rt.rows, usageRow{at, billing.Usage{InputTokens: magnitude(r) / 1000, OutputTokens: magnitude(r) / 1000,
			ComputeMs: magnitude(r) / 1000, Tasks: magnitude(r) / 100_000}})
	}
	return rt
}

// parts splits the stay at the trial's end, as billing does for a contract.
func (rt randomTrial) parts(trialEnd time.Time) []billing.Part {
	sum := func(from, to time.Time) billing.Usage {
		var u billing.Usage
		for _, row := range rt.rows {
			if !row.at.Before(from) && row.at.Before(to) {
				u.InputTokens += row.u.InputTokens
				u.OutputTokens += row.u.OutputTokens
				u.ComputeMs += row.u.ComputeMs
				u.Tasks += row.u.Tasks
			}
		}
		return u
	}
	var parts []billing.Part
	if trialEnd.After(rt.month.Start) && rt.start.Before(rt.end) {
		parts = append(parts, billing.Part{Plan: rt.plan, Span: period(rt.start, minTime(trialEnd, rt.end)),
			Usage: sum(rt.month.Start, trialEnd), Trial: true})
	}
	if trialEnd.Before(rt.end) {
		from := rt.month.Start
		if len(parts) > 0 {
			from = trialEnd
		}
		parts = append(parts, billing.Part{Plan: rt.plan, Span: period(trialEnd, rt.end), Usage: sum(from, rt.month.End)})
	}
	return parts
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// rateIfActive rates parts, or reports that the stay has no whole second
// in the month (nil).
func rateIfActive(t *testing.T, month billing.Period, parts []billing.Part) *billing.Invoice {
	t.Helper()
	if len(parts) == 0 {
		return nil
	}
	inv, err := billing.RateParts(month, parts)
	if agentmarket.CodeOf(err) == "invalid_rating_input" && fieldRules(t, err, "invalid_rating_input") == "parts:outside_period" {
		return nil
	}
	if err != nil {
		t.Fatalf("RateParts(%+v): %v", parts, err)
	}
	return inv
}

// Properties of trials, on random plans, stays and usage:
//   - a trial costs nothing: the invoice of trial + paid equals, to the
//     micro, that of the paid part alone, and a stay that ends with its
//     trial costs zero;
//   - every line of a trial part is zero, and its usage is shown;
//   - the paid fee is the monthly fee × paid seconds / month seconds,
//     exactly;
//   - a later trial end never costs more;
//   - the lines' minor amounts sum to the total.
func TestPropertyTrials(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 1))
	both := 0
	for range propertyRuns {
		rt := newRandomTrial(r)
		parts := rt.parts(rt.trialEnd)
		inv := rateIfActive(t, rt.month, parts)
		if inv == nil {
			continue
		}
		if len(parts) == 2 {
			both++
		}
		var paid []billing.Part
		for _, p := range parts {
			if !p.Trial {
				paid = append(paid, p)
			}
		}
		alone := rateIfActive(t, rt.month, paid)
		switch {
		case alone == nil && inv.TotalMinor != 0:
			t.Fatalf("%+v: a stay with nothing paid costs %d", rt, inv.TotalMinor)
		case alone != nil && (inv.ExactMicros().Cmp(alone.ExactMicros()) != 0 || inv.TotalMinor != alone.TotalMinor):
			t.Fatalf("%+v: with its trial %s micros (%d), the paid part alone %s (%d)", rt, inv.ExactMicros(), inv.TotalMinor,
				alone.ExactMicros(), alone.TotalMinor)
		}
		var sum int64
		for _, l := range inv.Lines {
			sum += l.AmountMinor
			if inv.Parts[l.Part].Trial && (l.AmountMicros != 0 || l.AmountFraction.Num != 0 || l.AmountMinor != 0) {
				t.Fatalf("%+v: trial line %+v is not zero", rt, l)
			}
			if l.Kind == billing.LineFlatFee && !inv.Parts[l.Part].Trial {
				on := inv.Parts[l.Part].Active
				want := big.NewRat(rt.plan.MonthlyFeeMicros*(on.End.Unix()-on.Start.Unix()), rt.month.End.Unix()-rt.month.Start.Unix())
				if l.ExactMicros().Cmp(want) != 0 {
					t.Fatalf("%+v: paid fee %s micros, want %s", rt, l.ExactMicros(), want)
				}
			}
		}
		if sum != inv.TotalMinor {
			t.Fatalf("%+v: lines sum to %d, total %d", rt, sum, inv.TotalMinor)
		}
		if parts[0].Trial && parts[0].Usage != (billing.Usage{}) && inv.Lines[1].Used+inv.Lines[2].Used+inv.Lines[3].Used+inv.Lines[4].Used == 0 {
			t.Fatalf("%+v: the trial's usage is not shown", rt)
		}
		later := rt.trialEnd.Add(time.Duration(r.Int64N(int64(10 * 24 * time.Hour)))).Truncate(time.Millisecond)
		if inv2 := rateIfActive(t, rt.month, rt.parts(later)); inv2 != nil && inv2.ExactMicros().Cmp(inv.ExactMicros()) > 0 {
			t.Fatalf("%+v: a trial ending at %v costs %s micros, more than ending at %v (%s)", rt, later, inv2.ExactMicros(), rt.trialEnd, inv.ExactMicros())
		}
	}
	if both < propertyRuns/4 {
		t.Fatalf("only %d of %d runs had a trial and a paid part in the month", both, propertyRuns)
	}
}

// trialEnv is an env with a trialing contract (on plan version 3 with a
// trial of 14 days and 1,000,000 tokens) and the real Subscriptions over
// an in-memory contract store.
type trialEnv struct {
	*env
	subs   *contracts.Subscriptions
	cstore *memContracts
}

func newTrialEnv(t *testing.T) *trialEnv {
	e := newEnv(t)
	plan := e.plans["lst_echo/3"]
	plan.TrialDays, plan.TrialTokens = 14, 1_000_000
	e.plans["lst_echo/3"] = plan
	cstore := &memContracts{byID: map[string]contracts.Contract{}}
	return &trialEnv{env: e, cstore: cstore, subs: &contracts.Subscriptions{Store: cstore, Policies: noReload{}, Clock: e.clock}}
}

// trialing makes a contract trialing from now for 14 days, attached to the
// provider when attach is set.
func (e *trialEnv) trialing(t *testing.T, id string, cancelAtEnd, attach bool) contracts.Contract {
	t.Helper()
	now := e.clock.Now()
	end := now.Add(14 * 24 * time.Hour)
	c := contracts.Contract{ID: id, BuyerOrgID: "org_buyer", ListingID: "lst_echo", SellerOrgID: "org_seller", PlanVersion: 3,
		Status: contracts.ContractTrialing, CreatedAt: now, UpdatedAt: now, TrialEnd: &end, CancelAtTrialEnd: cancelAtEnd}
	e.cstore.byID[id] = c
	e.ctrs.all = append(e.ctrs.all, c)
	if attach {
		if err := e.service().Attach(context.Background(), &c, buyer, "Echo agent", e.plans["lst_echo/3"], ""); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func (e *trialEnv) endTrials(t *testing.T, svc *billing.Service, want int) {
	t.Helper()
	svc.Trials = e.cstore
	n, err := svc.EndTrials(context.Background(), e.subs)
	if err != nil || n != want {
		t.Fatalf("EndTrials = %d, %v; want %d", n, err, want)
	}
	// The contracts the lister sees follow the store.
	for i, c := range e.ctrs.all {
		e.ctrs.all[i] = e.cstore.byID[c.ID]
	}
}

// TestTrialEndsWhenItsAllowanceIsUsedUp: with Stripe, a trial whose tokens
// run out ends right after the call that used them up (to the
// millisecond), however late the sweep; the provider is told once, only
// later usage is reported, the month's invoice charges only what came
// after, and reconciliation finds nothing amiss.
func TestTrialEndsWhenItsAllowanceIsUsedUp(t *testing.T) {
	e := newTrialEnv(t)
	ctx := context.Background()
	start := e.clock.Now()
	c := e.trialing(t, "ctr_t", false, true)
	wantCalls(t, e.prov.take(), "EnsurePlan lst_echo v3", "EnsureCustomer org_buyer \"Buyer Ltd\" billing@buyer.example",
		"Subscribe ctr_t trial_end=2026-05-17T10:17:42Z cancel_at_trial_end=false anchor=2026-06-01T00:00:00Z")
	if sub, _ := e.store.Subscription(ctx, "ctr_t"); !sub.UsageFrom.Equal(*c.TrialEnd) {
		t.Fatalf("usage reported from %v, want the trial's end %v", sub.UsageFrom, c.TrialEnd)
	}
	crossing := start.Add(2*time.Hour + 250*time.Millisecond)
	e.use(t, "ctr_t", start.Add(time.Hour), billing.Usage{InputTokens: 400_000, OutputTokens: 200_000, Tasks: 1})
	e.use(t, "ctr_t", crossing, billing.Usage{InputTokens: 300_000, OutputTokens: 100_001, Tasks: 1}) // 1,000,001 tokens in all
	e.use(t, "ctr_t", crossing.Add(time.Millisecond), billing.Usage{InputTokens: 1_100_000, Tasks: 1})
	e.use(t, "ctr_t", start.Add(3*time.Hour), billing.Usage{InputTokens: 500_000, OutputTokens: 300_000, Tasks: 1})

	svc := e.service()
	e.at(start.Add(time.Hour + time.Minute)) // 600,000 tokens: not yet
	e.endTrials(t, svc, 0)
	e.at(start.Add(5 * time.Hour)) // the sweep comes late
	e.endTrials(t, svc, 1)
	end := crossing.Add(time.Millisecond)
	got := e.cstore.byID["ctr_t"]
	if got.Status != contracts.ContractActive || !got.TrialEnd.Equal(end) {
		t.Fatalf("after the sweep: %+v, want active with the trial ended at %v", got, end)
	}
	wantCalls(t, e.prov.take(), "EndTrialNow sub_ctr_t am1/contract/ctr_t/trial-end")
	if sub, _ := e.store.Subscription(ctx, "ctr_t"); !sub.UsageFrom.Equal(end) {
		t.Fatalf("usage reported from %v, want %v", sub.UsageFrom, end)
	}
	e.endTrials(t, svc, 0) // over: nothing more

	// Reported: only the two rows after the trial.
	e.at(start.Add(6 * time.Hour))
	runOnce(t, e.reporter(), 3)
	for kind, want := range map[billing.LineKind]int64{billing.LineInputTokens: 1_600_000, billing.LineOutputTokens: 300_000, billing.LineTasks: 2} {
		if n := e.prov.countedFor(itemID("ctr_t", kind)); n != want {
			t.Errorf("%s reported %d, want %d", kind, n, want)
		}
	}

	// The month on the own ledger's rating: the trial free, then the fee
	// from the trial's end and the usage past the allowance.
	may := billing.MonthOf(start)
	e.at(date(2026, 6, 1, 0, 5))
	if n, err := e.ledger().CloseMonth(ctx, may); err != nil || n != 1 {
		t.Fatalf("CloseMonth = %d, %v", n, err)
	}
	inv, err := e.store.Invoice(ctx, "ctr_t", may.Start)
	if err != nil {
		t.Fatal(err)
	}
	// Paid from 12:17:42 on 3 May (the trial's end, 12:17:42.251, to the
	// second for the fee): 2,461,338 of 2,678,400 seconds of 49,000,000 =
	// 45,028,958 + 1/3; input 1,600,000 − 1,000,000 = 600,000 × 3 =
	// 1,800,000; output 300,000 − 200,000 = 100,000 × 15 = 1,500,000; 2
	// tasks within the allowance. Subtotal 48,328,958 + 1/3 micros =
	// 4,832.89… cents → 4,833.
	want := "flat_fee=0[0] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] " +
		"flat_fee=45028958+1/3[4503] input_tokens=1800000[180] output_tokens=1500000[150] compute=0[0] tasks=0[0] " +
		"subtotal=48328958+1/3 total=4833"
	if got := summary(&inv.Invoice); got != want {
		t.Errorf("May's invoice\n  %s\nwant\n  %s", got, want)
	}
	if trialIn := inv.Invoice.Lines[1]; trialIn.Used != 700_000 || inv.Invoice.Lines[2].Used != 300_001 {
		t.Errorf("the trial's usage shown: %+v", inv.Invoice.Lines[:5])
	}
	if d, err := e.service().Reconcile(ctx, may); err != nil || len(d) != 0 {
		t.Errorf("Reconcile = %+v, %v; want no drift", d, err)
	}
}

// TestTrialEndsWithItsDays: without a usage allowance the trial ends at
// its scheduled end, with no call to the provider (it ended the trial at
// the same instant); a buyer who chose to stop is canceled then; and one
// who chose to stop but used up the allowance is canceled at once, at the
// provider too.
func TestTrialEndsWithItsDays(t *testing.T) {
	e := newTrialEnv(t)
	ctx := context.Background()
	start := e.clock.Now()
	e.trialing(t, "ctr_days", false, true)
	e.trialing(t, "ctr_stop", true, true)
	e.trialing(t, "ctr_stop_early", true, true)
	e.trialing(t, "ctr_ledger", false, false)
	calls := e.prov.take() // plan and customer, then one Subscribe each
	if want := "Subscribe ctr_stop trial_end=2026-05-17T10:17:42Z cancel_at_trial_end=true anchor=2026-06-01T00:00:00Z"; calls[3] != want {
		t.Errorf("subscribe: %s\nwant %s", calls[3], want)
	}
	e.use(t, "ctr_stop_early", start.Add(time.Minute), billing.Usage{OutputTokens: 2_000_000})
	svc := e.service()
	e.at(start.Add(time.Hour))
	e.endTrials(t, svc, 1)
	wantCalls(t, e.prov.take(), "CancelSubscription sub_ctr_stop_early am1/contract/ctr_stop_early/cancel")
	if c := e.cstore.byID["ctr_stop_early"]; c.Status != contracts.ContractCanceled || !c.CanceledAt.Equal(start.Add(time.Minute+time.Millisecond)) {
		t.Errorf("stopped early: %+v", c)
	}

	e.at(start.Add(14*24*time.Hour - time.Second))
	e.endTrials(t, svc, 0)
	due := start.Add(14 * 24 * time.Hour)
	e.at(due.Add(30 * time.Second))
	e.endTrials(t, svc, 3)
	wantCalls(t, e.prov.take())
	for id, want := range map[string]contracts.ContractStatus{"ctr_days": contracts.ContractActive, "ctr_stop": contracts.ContractCanceled,
		"ctr_ledger": contracts.ContractActive} {
		c := e.cstore.byID[id]
		if c.Status != want || !c.TrialEnd.Equal(due) || (want == contracts.ContractCanceled) != (c.CanceledAt != nil && c.CanceledAt.Equal(due)) {
			t.Errorf("%s after its trial's days: %+v, want %s from %v", id, c, want, due)
		}
	}
	for id, canceled := range map[string]bool{"ctr_days": false, "ctr_stop": true, "ctr_stop_early": true} {
		if sub, _ := e.store.Subscription(ctx, id); (sub.CanceledAt != nil) != canceled {
			t.Errorf("%s: subscription canceled at %v, want canceled %v", id, sub.CanceledAt, canceled)
		}
	}
	// A stay that ended with its trial costs nothing.
	e.at(date(2026, 6, 1, 0, 5))
	if _, err := e.ledger().CloseMonth(ctx, billing.MonthOf(start)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ctr_stop", "ctr_stop_early"} {
		inv, err := e.store.Invoice(ctx, id, billing.MonthOf(start).Start)
		if err != nil || inv.Invoice.TotalMinor != 0 || len(inv.Invoice.Parts) != 1 || !inv.Invoice.Parts[0].Trial {
			t.Errorf("%s's invoice: %+v, %v; want one free trial part", id, inv, err)
		}
	}
}

// TestTrialCancelAtTheProvider: the buyer's choice to stop with the trial
// sets the subscription's end at the provider, each change with its own
// key; no provider, or no subscription, nothing.
func TestTrialCancelAtTheProvider(t *testing.T) {
	e := newTrialEnv(t)
	ctx := context.Background()
	c := e.trialing(t, "ctr_t", false, true)
	e.prov.take()
	svc := e.service()
	c.CancelAtTrialEnd = true
	if err := svc.ScheduleEnd(ctx, &c); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	c.CancelAtTrialEnd = false
	if err := svc.ScheduleEnd(ctx, &c); err != nil {
		t.Fatal(err)
	}
	n := e.clock.Now().UnixNano()
	wantCalls(t, e.prov.take(),
		"SetCancelAt sub_ctr_t 2026-05-17T10:17:42Z am1/contract/ctr_t/cancel-at/1779013062/"+strconv.FormatInt(n-int64(time.Second), 10),
		"SetCancelAt sub_ctr_t none am1/contract/ctr_t/cancel-at/none/"+strconv.FormatInt(n, 10))
	other := e.trialing(t, "ctr_ledger", false, false)
	if err := svc.ScheduleEnd(ctx, &other); err != nil {
		t.Fatal(err)
	}
	if err := e.ledger().ScheduleEnd(ctx, &c); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, e.prov.take())
}
