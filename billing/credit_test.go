package billing_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/billing"
)

type burns map[string]int64

func (b burns) CreditBurned(_ context.Context, contractID string, _, _ time.Time) (int64, error) {
	return b[contractID], nil
}

// TestApplyCredit: an invoice takes off what the contract's calls burned
// of the org's credit in its period, in minor units rounded half up (the
// invoice's one rule), never more than its total; what is due is the
// rest.
func TestApplyCredit(t *testing.T) {
	for _, tc := range []struct {
		name           string
		digits         int
		total, burned  int64
		applied, owing int64
	}{
		{"nothing burned", 2, 2501, 0, 0, 2501},
		{"less than half a cent", 2, 2501, 4_999, 0, 2501},
		{"half a cent rounds up", 2, 2501, 5_000, 1, 2500},
		{"usage paid from credit", 2, 2501, 12_345_678, 1235, 1266},
		{"more burned than the total", 2, 2501, 25_020_000, 2501, 0},
		{"a currency without minor units", 0, 300, 1_500_000, 2, 298},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := &billing.Invoice{Currency: "usd", MinorUnitDigits: tc.digits, TotalMinor: tc.total, Period: billing.MonthOf(date(2026, 4, 1))}
			unbilled, err := billing.ApplyCredit(context.Background(), burns{"ctr_1": tc.burned}, "ctr_1", inv)
			if err != nil {
				t.Fatal(err)
			}
			if inv.CreditAppliedMinor != tc.applied || inv.AmountDueMinor() != tc.owing {
				t.Errorf("credit applied %d, due %d; want %d, %d", inv.CreditAppliedMinor, inv.AmountDueMinor(), tc.applied, tc.owing)
			}
			perMinor := int64(10_000)
			if tc.digits == 0 {
				perMinor = 1_000_000
			}
			if want := max(0, tc.burned-tc.applied*perMinor); unbilled != want {
				t.Errorf("unbilled %d micros, want %d (burned beyond what the invoice applied)", unbilled, want)
			}
		})
	}
}

// TestCloseMonthAppliesCredit: the invoice CloseMonth issues in the own
// ledger takes off what the contract's calls burned of the org's credit
// in the month (a contract that burned nothing is charged in full), and
// the stored invoice keeps it.
func TestCloseMonthAppliesCredit(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	may := billing.MonthOf(date(2026, 5, 15))
	e.contract("ctr_paid", date(2026, 4, 20))
	e.contract("ctr_other", date(2026, 4, 20))
	e.use(t, "ctr_paid", date(2026, 5, 2), billing.Usage{InputTokens: 1_200_000, Tasks: 150})
	s := e.ledger()
	s.Credit = burns{"ctr_paid": 12_345_678}
	e.at(date(2026, 6, 1, 0, 2))
	if n, err := s.CloseMonth(ctx, may); err != nil || n != 2 {
		t.Fatalf("CloseMonth = %d, %v; want 2", n, err)
	}
	paid, err := e.store.Invoice(ctx, "ctr_paid", may.Start)
	if err != nil {
		t.Fatal(err)
	}
	if paid.Invoice.CreditAppliedMinor != 1235 || paid.Invoice.AmountDueMinor() != paid.Invoice.TotalMinor-1235 {
		t.Errorf("ctr_paid: credit applied %d of %d, due %d; want 1235 off", paid.Invoice.CreditAppliedMinor, paid.Invoice.TotalMinor, paid.Invoice.AmountDueMinor())
	}
	other, err := e.store.Invoice(ctx, "ctr_other", may.Start)
	if err != nil || other.Invoice.CreditAppliedMinor != 0 {
		t.Errorf("ctr_other: %+v, %v; want no credit applied", other, err)
	}
}

// TestApplyCreditsAtProvider: with a provider, what a contract's calls
// burned of the org's credit in a closed month goes on the subscription's
// next invoice once, as a negative invoice item of it in minor units;
// a contract that burned nothing gets none; without a provider nothing is
// sent (the own ledger's invoice applies it, CloseMonth).
func TestApplyCreditsAtProvider(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.attach(t, "ctr_paid")
	e.attach(t, "ctr_other")
	may := billing.MonthOf(t0)
	svc := e.service()
	svc.Credit = burns{"ctr_paid": 12_345_678}
	if _, err := svc.ApplyCredits(ctx, may); err == nil {
		t.Fatal("credited before the month closed")
	}
	e.at(date(2026, 6, 1, 0, 5))
	if n, err := svc.ApplyCredits(ctx, may); err != nil || n != 1 {
		t.Fatalf("ApplyCredits = %d, %v; want 1", n, err)
	}
	wantCalls(t, e.prov.take(), `AddInvoiceItem sub_ctr_paid cus_org_buyer -1235 usd "Prepaid credit applied, May 2026" am1/contract/ctr_paid/credit/1777593600`)
	if n, err := svc.ApplyCredits(ctx, may); err != nil || n != 0 {
		t.Fatalf("again = %d, %v; want 0", n, err)
	}
	wantCalls(t, e.prov.take())
	ledger := e.ledger()
	ledger.Credit = svc.Credit
	if n, err := ledger.ApplyCredits(ctx, may); err != nil || n != 0 {
		t.Errorf("without a provider = %d, %v", n, err)
	}
}

// TestEndedStaysItemsGoToALiveInvoice: a stay canceled before its month
// is closed has a subscription that invoices nothing more, so its item
// goes on the org's live subscription on the listing, or, with none, to
// no subscription (the provider invoices it on its own).
func TestEndedStaysItemsGoToALiveInvoice(t *testing.T) {
	ctx := context.Background()
	may := billing.MonthOf(t0)
	for _, c := range []struct {
		name string
		live bool
		want string
	}{
		{"a live stay", true, `AddInvoiceItem sub_ctr_live cus_org_buyer -1235 usd "Prepaid credit applied, May 2026" am1/contract/ctr_gone/credit/1777593600`},
		{"none", false, `AddInvoiceItem  cus_org_buyer -1235 usd "Prepaid credit applied, May 2026" am1/contract/ctr_gone/credit/1777593600`},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			gone := e.attach(t, "ctr_gone")
			if c.live {
				e.at(t0.Add(time.Hour))
				e.attach(t, "ctr_live")
			}
			e.at(t0.Add(2 * time.Hour))
			if err := e.service().Detach(ctx, gone); err != nil {
				t.Fatal(err)
			}
			end := e.clock.Now()
			e.ctrs.all[0].CanceledAt = &end
			e.at(date(2026, 6, 1, 0, 5))
			e.prov.take()
			svc := e.service()
			svc.Credit = burns{"ctr_gone": 12_345_678}
			if n, err := svc.ApplyCredits(ctx, may); err != nil || n != 1 {
				t.Fatalf("ApplyCredits = %d, %v; want 1", n, err)
			}
			wantCalls(t, e.prov.take(), c.want)
		})
	}
}
