package billing_test

import (
	"context"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/listings"
)

// commitPlan: a $1 fee, 3 micros an input token, no allowance, and a
// minimum commitment of $20 a month.
func commitPlan() listings.Plan {
	return listings.Plan{Version: 5, Currency: "usd", MonthlyFeeMicros: 1_000_000, InputTokensPerMillionMicros: 3_000_000,
		MinCommitMicros: 20_000_000, BuyerOrgID: "org_buyer"}
}

// TestRateCommitment: a month short of the commitment is charged the
// difference; a month above it nothing more; a part of a month its share,
// by the second, like the fee; a trial owes no commitment.
func TestRateCommitment(t *testing.T) {
	may := billing.MonthOf(date(2026, 5, 1))
	plan := commitPlan()
	for _, tc := range []struct {
		name  string
		parts []billing.Part
		want  string
	}{
		{"short: $1 fee + $3 usage, $16 more", []billing.Part{{Plan: plan, Span: may, Usage: billing.Usage{InputTokens: 1_000_000}}},
			"flat_fee=1000000[100] input_tokens=3000000[300] output_tokens=0[0] compute=0[0] tasks=0[0] commitment=16000000[1600] " +
				"subtotal=20000000 total=2000"},
		{"above: nothing more", []billing.Part{{Plan: plan, Span: may, Usage: billing.Usage{InputTokens: 10_000_000}}},
			"flat_fee=1000000[100] input_tokens=30000000[3000] output_tokens=0[0] compute=0[0] tasks=0[0] commitment=0[0] " +
				"subtotal=31000000 total=3100"},
		// 16 of 31 days: commitment 10,322,580 + 20/31, fee 516,129 + 1/31;
		// the total, 1,032 cents, is split by largest remainder (51.6… and
		// 980.6…: the commitment's larger fraction takes the cent).
		{"half a month, no usage", []billing.Part{{Plan: plan, Span: period(date(2026, 5, 16), may.End)}},
			"flat_fee=516129+1/31[51] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] commitment=9806451+19/31[981] " +
				"subtotal=10322580+20/31 total=1032"},
		{"a trial, then committed", []billing.Part{
			{Plan: plan, Span: period(date(2026, 5, 1), date(2026, 5, 16)), Usage: billing.Usage{InputTokens: 9_000_000}, Trial: true},
			{Plan: plan, Span: period(date(2026, 5, 16), may.End)}},
			"flat_fee=0[0] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] " +
				"flat_fee=516129+1/31[51] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] commitment=9806451+19/31[981] " +
				"subtotal=10322580+20/31 total=1032"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv, err := billing.RateParts(may, tc.parts)
			if err != nil {
				t.Fatal(err)
			}
			if got := summary(inv); got != tc.want {
				t.Errorf("invoice\n  %s\nwant\n  %s", got, tc.want)
			}
		})
	}
}

// Property: each paid part with a commitment costs exactly the larger of
// its commitment (prorated by the second) and its other charges; parts
// without one cost their charges.
func TestPropertyCommitment(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 2))
	for range propertyRuns {
		in := randomInput(r)
		in.plan.MinCommitMicros = magnitude(r) / 10
		mid := in.billed.Start.Add(time.Duration(r.Int64N(int64(in.billed.End.Sub(in.billed.Start)))))
		other := in.plan
		other.MinCommitMicros = 0
		parts := []billing.Part{
			{Plan: in.plan, Span: period(in.billed.Start, mid), Usage: in.usage},
			{Plan: other, Span: period(mid, in.billed.End), Usage: billing.Usage{Tasks: magnitude(r) / 1000}},
		}
		inv, err := billing.RateParts(in.billed, parts)
		if err != nil {
			t.Fatalf("%+v: %v", parts, err)
		}
		sums := map[int]*big.Rat{0: new(big.Rat), 1: new(big.Rat)}
		charges := map[int]*big.Rat{0: new(big.Rat), 1: new(big.Rat)}
		for _, l := range inv.Lines {
			sums[l.Part].Add(sums[l.Part], l.ExactMicros())
			if l.Kind != billing.LineCommitment {
				charges[l.Part].Add(charges[l.Part], l.ExactMicros())
			} else if l.Part != 0 {
				t.Fatalf("a commitment line on a part without one: %+v", l)
			}
		}
		on := inv.Parts[0].Active
		commit := big.NewRat(in.plan.MinCommitMicros*(on.End.Unix()-on.Start.Unix()), in.billed.End.Unix()-in.billed.Start.Unix())
		want := charges[0]
		if commit.Cmp(want) > 0 {
			want = commit
		}
		if sums[0].Cmp(want) != 0 || sums[1].Cmp(charges[1]) != 0 {
			t.Fatalf("%+v: part 0 costs %s, want max(%s, %s); part 1 %s, want %s", parts, sums[0], commit, charges[0], sums[1], charges[1])
		}
	}
}

// TestChargeCommitments: with a provider, a month short of the commitment
// is charged once, as an invoice item of what the invoice's commitment
// line comes to; a pending charge (a crash before it was marked) is sent
// again exactly; contracts without a commitment are left alone.
func TestChargeCommitments(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.plans["lst_echo/5"] = commitPlan()
	c := e.contract("ctr_c", t0)
	c.PlanVersion = 5
	e.ctrs.all[len(e.ctrs.all)-1] = *c
	if err := e.service().Attach(ctx, c, buyer, "Echo agent", commitPlan(), ""); err != nil {
		t.Fatal(err)
	}
	e.attach(t, "ctr_plain")
	e.prov.take()
	e.use(t, "ctr_c", t0.Add(time.Hour), billing.Usage{InputTokens: 1_000_000})
	may := billing.MonthOf(t0)
	svc := e.service()
	if _, err := svc.ChargeCommitments(ctx, may); err == nil {
		t.Fatal("charged before the month closed")
	}
	e.at(date(2026, 6, 1, 0, 5))
	if n, err := svc.ChargeCommitments(ctx, may); err != nil || n != 1 {
		t.Fatalf("ChargeCommitments = %d, %v", n, err)
	}
	// From 10:17:42 on 3 May: 2,468,538 of 2,678,400 seconds of $20
	// (18,432,930.1… micros) and of the $1 fee (921,646.5…); the shortfall
	// is the commitment less the fee and $3 of usage: 14,511,283 + 56/93
	// micros, 1,451 cents of the invoice's 1,843.
	inv, err := billing.RateParts(may, []billing.Part{{Plan: commitPlan(), Span: period(t0, may.End), Usage: billing.Usage{InputTokens: 1_000_000}}})
	if err != nil {
		t.Fatal(err)
	}
	short := inv.Lines[5]
	if short.Kind != billing.LineCommitment || short.AmountMinor != 1451 || inv.TotalMinor != 1843 {
		t.Fatalf("the commitment line %+v, total %d; want 1,451 cents of 1,843", short, inv.TotalMinor)
	}
	wantCalls(t, e.prov.take(), `AddInvoiceItem sub_ctr_c cus_org_buyer 1451 usd "Minimum commitment shortfall, May 2026" am1/contract/ctr_c/commitment/1777593600`)
	if n, err := svc.ChargeCommitments(ctx, may); err != nil || n != 0 {
		t.Fatalf("again = %d, %v", n, err)
	}
	wantCalls(t, e.prov.take())

	// A charge recorded but never marked sent goes out again, the same.
	april := billing.MonthOf(date(2026, 4, 1))
	pending := &billing.CommitmentCharge{ContractID: "ctr_c", PeriodStart: april.Start, Currency: "usd", AmountMinor: 777,
		IdempotencyKey: billing.CommitmentKey("ctr_c", april.Start), CreatedAt: t0}
	if _, err := e.store.AddCommitmentCharge(ctx, pending); err != nil {
		t.Fatal(err)
	}
	c.CreatedAt = date(2026, 4, 1)
	e.ctrs.all[0] = *c
	if n, err := svc.ChargeCommitments(ctx, april); err != nil || n != 1 {
		t.Fatalf("April = %d, %v", n, err)
	}
	wantCalls(t, e.prov.take(), `AddInvoiceItem sub_ctr_c cus_org_buyer 777 usd "Minimum commitment shortfall, April 2026" am1/contract/ctr_c/commitment/1775001600`)
	if got, _ := e.store.CommitmentCharge(ctx, "ctr_c", april.Start); got.SentAt == nil {
		t.Errorf("the resent charge is not marked sent")
	}
	if n, err := e.ledger().ChargeCommitments(ctx, may); err != nil || n != 0 {
		t.Errorf("without a provider = %d, %v", n, err)
	}
}
