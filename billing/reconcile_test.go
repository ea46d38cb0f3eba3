package billing_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
)

func driftString(d billing.Drift) string {
	opt := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("%s (%s→%s, %s) %s %s metered=%d reported=%s invoiced=%s diff=%d",
		d.ContractID, d.BuyerOrgID, d.SellerOrgID, d.ListingID, d.Kind, d.Source, d.Metered, opt(d.Reported), opt(d.Invoiced), d.Difference)
}

func TestReconcileListsEveryDrift(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	may := billing.MonthOf(t0)
	e.attach(t, "ctr_1")    // billed through the provider
	e.contract("ctr_2", t0) // the own ledger
	e.contract("ctr_3", t0) // no usage at all
	e.use(t, "ctr_1", date(2026, 5, 3, 10, 30), billing.Usage{InputTokens: 1000, Tasks: 1})
	e.use(t, "ctr_2", date(2026, 5, 3, 10, 30), billing.Usage{OutputTokens: 500})
	e.at(date(2026, 5, 3, 11, 2))
	runOnce(t, e.reporter(), 2)

	// Nothing drifts yet.
	if d, err := e.service().Reconcile(ctx, may); err != nil || len(d) != 0 {
		t.Fatalf("Reconcile = %+v, %v; want no drift", d, err)
	}

	// Drift 1: usage that reached the store after its window was
	// reported, and never reported (the month ends before the next run).
	e.use(t, "ctr_1", date(2026, 5, 3, 10, 45), billing.Usage{InputTokens: 50})
	// Drift 2: a report of compute nobody used.
	w, err := e.store.Watermark(ctx, "ctr_1", billing.LineCompute, may.Start)
	if err != nil {
		t.Fatal(err)
	}
	win := period(date(2026, 5, 3, 11), date(2026, 5, 3, 12))
	bogus := &billing.UsageReport{ContractID: "ctr_1", Kind: billing.LineCompute, Window: win, PeriodStart: may.Start,
		ItemID: itemID("ctr_1", billing.LineCompute), Quantity: 99, IdempotencyKey: "injected", Status: billing.ReportPending, CreatedAt: t0}
	if err := e.store.AddReport(ctx, bogus, w); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.MarkReportSent(ctx, bogus.Key(), t0); err != nil {
		t.Fatal(err)
	}
	// Drift 3: usage that arrived after the month was closed.
	e.at(date(2026, 6, 1, 0, 5))
	if n, err := e.ledger().CloseMonth(ctx, may); err != nil || n != 3 {
		t.Fatalf("CloseMonth = %d, %v", n, err)
	}
	e.use(t, "ctr_2", date(2026, 5, 31, 23), billing.Usage{OutputTokens: 7})

	drifts, err := e.service().Reconcile(ctx, may)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range drifts {
		got = append(got, driftString(d))
	}
	want := []string{
		"ctr_1 (org_buyer→org_seller, lst_echo) input_tokens reported metered=1050 reported=1000 invoiced=1050 diff=-50",
		"ctr_1 (org_buyer→org_seller, lst_echo) compute reported metered=0 reported=99 invoiced=0 diff=99",
		"ctr_2 (org_buyer→org_seller, lst_echo) output_tokens invoiced metered=507 reported=- invoiced=500 diff=-7",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("drifts:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}

	// Another month has none.
	if d, err := e.service().Reconcile(ctx, billing.MonthOf(date(2026, 4, 1))); err != nil || len(d) != 0 {
		t.Errorf("April: %+v, %v", d, err)
	}
}

// TestSaturatedUsageSparesOtherContracts (issue 11): a contract whose
// metered usage sums past int64 (rows stored before reports were bounded)
// is reconciled like any other, and only its own invoice is refused as
// too large to bill: the month still closes for every other contract.
func TestSaturatedUsageSparesOtherContracts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	may := billing.MonthOf(t0)
	e.contract("ctr_big", t0)
	e.contract("ctr_ok", t0)
	e.use(t, "ctr_big", date(2026, 5, 3, 10, 30), billing.Usage{InputTokens: math.MaxInt64, Tasks: 1})
	e.use(t, "ctr_big", date(2026, 5, 3, 10, 31), billing.Usage{InputTokens: math.MaxInt64, Tasks: 1})
	e.use(t, "ctr_ok", date(2026, 5, 3, 10, 30), billing.Usage{InputTokens: 100, Tasks: 1})
	if d, err := e.service().Reconcile(ctx, may); err != nil || len(d) != 0 {
		t.Fatalf("Reconcile = %+v, %v; want no drift, no error", d, err)
	}
	e.at(date(2026, 6, 1, 0, 5))
	n, err := e.ledger().CloseMonth(ctx, may)
	if n != 1 || agentmarket.CodeOf(err) != "amount_out_of_range" || !strings.Contains(err.Error(), "ctr_big") {
		t.Fatalf("CloseMonth = %d, %v; want ctr_ok closed and ctr_big refused as amount_out_of_range", n, err)
	}
	if inv, err := e.store.Invoice(ctx, "ctr_ok", may.Start); err != nil || inv.Invoice.Lines[1].Used != 100 {
		t.Fatalf("ctr_ok's invoice: %+v, %v", inv, err)
	}
	drifts, err := e.service().Reconcile(ctx, may)
	if err != nil || len(drifts) != 0 {
		t.Fatalf("Reconcile after the close = %+v, %v", drifts, err)
	}
}
