package billing_test

import (
	"context"
	"math/big"
	"reflect"
	"testing"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
)

func TestCloseMonthIssuesOneInvoicePerContract(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	may := billing.MonthOf(date(2026, 5, 15))
	e.contract("ctr_full", date(2026, 4, 20))
	e.contract("ctr_late", date(2026, 5, 21))
	gone := e.contract("ctr_gone", date(2026, 4, 1))
	gone.CanceledAt = at(date(2026, 5, 11))
	e.ctrs.all[2] = *gone
	april := e.contract("ctr_april", date(2026, 3, 1))
	april.CanceledAt = at(date(2026, 4, 30))
	e.ctrs.all[3] = *april
	e.contract("ctr_june", date(2026, 6, 2))

	e.use(t, "ctr_full", date(2026, 4, 30, 23, 59, 59), billing.Usage{InputTokens: 9_999_999}) // April
	e.use(t, "ctr_full", date(2026, 5, 1), billing.Usage{InputTokens: 1_200_000, Tasks: 150})
	e.use(t, "ctr_full", date(2026, 5, 31, 23, 59, 59), billing.Usage{OutputTokens: 300_000, ComputeMs: 3_600_001})
	e.use(t, "ctr_full", date(2026, 6, 1), billing.Usage{InputTokens: 9_999_999}) // June
	e.use(t, "ctr_late", date(2026, 5, 22), billing.Usage{Tasks: 101})
	e.use(t, "ctr_gone", date(2026, 5, 10), billing.Usage{OutputTokens: 1})

	s := e.ledger()
	e.at(date(2026, 6, 1, 0, 1))
	if _, err := s.CloseMonth(ctx, may); agentmarket.KindOf(err) != agentmarket.Conflict || agentmarket.CodeOf(err) != "period_not_closed" {
		t.Fatalf("CloseMonth before the usage settled = %v, want Conflict period_not_closed", err)
	}
	e.at(date(2026, 6, 1, 0, 2))
	n, err := s.CloseMonth(ctx, may)
	if err != nil || n != 3 {
		t.Fatalf("CloseMonth = %d, %v; want 3", n, err)
	}

	plan := e.plans["lst_echo/3"]
	// The three stays are one org's on one listing: they share May's
	// allowance in the order they began (ctr_gone, ctr_full, ctr_late), so
	// ctr_full has 199,999 output tokens left of it, and ctr_late no task.
	// And each takes over what the ones before it rounded away (the
	// rounding carry), so that together they are rounded once.
	var carry *big.Rat
	for _, tc := range []struct {
		id     string
		usage  billing.Usage
		active billing.Period
		prior  billing.Usage
	}{
		{"ctr_gone", billing.Usage{OutputTokens: 1}, period(date(2026, 5, 1), date(2026, 5, 11)), billing.Usage{}},
		{"ctr_full", billing.Usage{InputTokens: 1_200_000, OutputTokens: 300_000, ComputeMs: 3_600_001, Tasks: 150}, period(date(2026, 5, 1), date(2026, 6, 1)),
			billing.Usage{OutputTokens: 1}},
		{"ctr_late", billing.Usage{Tasks: 101}, period(date(2026, 5, 21), date(2026, 6, 1)),
			billing.Usage{InputTokens: 1_000_000, OutputTokens: 200_000, ComputeMs: 3_600_000, Tasks: 100}},
	} {
		want, err := billing.RateParts(may, []billing.Part{{Plan: plan, Span: tc.active, Usage: tc.usage, AllowanceUsed: tc.prior, RoundingCarry: carry}})
		if err != nil {
			t.Fatal(err)
		}
		next := want.ExactMicros()
		if carry != nil {
			next.Add(next, carry)
		}
		carry = next.Sub(next, big.NewRat(want.TotalMinor*10_000, 1))
		got, err := e.store.Invoice(ctx, tc.id, may.Start)
		if err != nil {
			t.Fatalf("%s: %v", tc.id, err)
		}
		if !reflect.DeepEqual(got.Invoice, *want) || !got.CreatedAt.Equal(date(2026, 6, 1, 0, 2)) {
			t.Errorf("%s: invoice\n  %s\nwant\n  %s", tc.id, summary(&got.Invoice), summary(want))
		}
	}
	if _, err := e.store.Invoice(ctx, "ctr_april", may.Start); agentmarket.KindOf(err) != agentmarket.NotFound {
		t.Errorf("a contract canceled before May has a May invoice: %v", err)
	}

	// Closing again stores nothing, and changes nothing.
	e.use(t, "ctr_late", date(2026, 5, 30), billing.Usage{Tasks: 1000})
	before, _ := e.store.Invoices(ctx, may.Start)
	if n, err := s.CloseMonth(ctx, may); err != nil || n != 0 {
		t.Fatalf("CloseMonth again = %d, %v; want 0", n, err)
	}
	after, _ := e.store.Invoices(ctx, may.Start)
	if len(after) != 3 || !reflect.DeepEqual(before, after) {
		t.Errorf("invoices changed on closing again:\n%+v\n%+v", before, after)
	}

	// The issued invoices, as their buyer, their seller, another org and
	// the operator see them.
	for _, tc := range []struct {
		org  string
		all  bool
		want []string
	}{
		{"org_buyer", false, []string{"ctr_full", "ctr_gone", "ctr_late"}},
		{"org_seller", false, []string{"ctr_full", "ctr_gone", "ctr_late"}},
		{"org_other", false, nil},
		{"org_other", true, []string{"ctr_full", "ctr_gone", "ctr_late"}},
	} {
		got, err := s.Issued(ctx, may, tc.org, tc.all)
		var ids []string
		for _, inv := range got {
			ids = append(ids, inv.ContractID)
			if inv.BuyerOrgID != "org_buyer" || inv.SellerOrgID != "org_seller" || inv.ListingID != "lst_echo" {
				t.Errorf("issued invoice %s: parties %+v", inv.ContractID, inv)
			}
		}
		if err != nil || !reflect.DeepEqual(ids, tc.want) {
			t.Errorf("Issued(%s, all=%t) = %v, %v; want %v", tc.org, tc.all, ids, err, tc.want)
		}
	}
	if got, err := s.Issued(ctx, billing.MonthOf(date(2026, 4, 15)), "org_buyer", false); err != nil || len(got) != 0 {
		t.Errorf("Issued for April = %d invoices, %v; want none (April was not closed)", len(got), err)
	}
}

func TestCloseMonthGoesOnPastAFailure(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	may := billing.MonthOf(date(2026, 5, 15))
	e.contract("ctr_1", date(2026, 4, 1))
	other := e.contract("ctr_2", date(2026, 4, 1))
	other.ListingID = "lst_gone"
	e.ctrs.all[1] = *other
	e.at(date(2026, 6, 2))
	n, err := e.ledger().CloseMonth(ctx, may)
	if n != 1 || agentmarket.KindOf(err) != agentmarket.NotFound {
		t.Fatalf("CloseMonth = %d, %v; want 1 and the missing plan", n, err)
	}
	e.plans["lst_gone/3"] = basePlan(1_000_000)
	if n, err := e.ledger().CloseMonth(ctx, may); err != nil || n != 1 {
		t.Fatalf("CloseMonth again = %d, %v; want the one left", n, err)
	}
	if _, err := e.ledger().CloseMonth(ctx, billing.Period{}); agentmarket.KindOf(err) != agentmarket.Invalid {
		t.Fatalf("CloseMonth of no period = %v, want Invalid", err)
	}
}
