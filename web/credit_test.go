package web_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/agentmarket/agentmarket/contracts"
)

// TestCreditPage: the finance page links to the credit page; it shows an
// org's balance and its movements (a grant, a burn with its
// subscription); the org's admin makes the credit required with a
// low-balance alert; another org sees none of it.
func TestCreditPage(t *testing.T) {
	s := newSite(t, siteOptions{autoApprove: true})
	seller, buyer, _, buyerActor := s.sellerAndBuyer(t)
	ctx := context.Background()
	mustContain(t, buyer.get("/finance"), `href="/credit"`)
	mustContain(t, buyer.get("/credit"), `Your organisation holds no credit.`)
	if _, _, err := s.store.AddCredit(ctx, &contracts.CreditMovement{ID: "crm_g", OrgID: buyerActor.OrgID, Currency: "usd", Kind: contracts.CreditGrant,
		AmountMicros: 25_000_000, Ref: "crm_g", Actor: "key:operator", Note: "pilot", At: s.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := s.store.RecordBurns(ctx, []contracts.CreditBurn{{OrgID: buyerActor.OrgID, Currency: "usd", ContractID: "ctr_x", Micros: 1_250_000, At: s.clock.Now()}}); err != nil {
		t.Fatal(err)
	}
	p := buyer.get("/credit")
	mustContain(t, p, `data-credit="usd"`, `$23.75`, `data-movement="grant"`, `data-movement="burn"`, `ctr_x`, `pilot`, `action="/credit/settings"`)
	mustNotContain(t, p, `action="/credit/grants"`) // the operator's form
	if r := buyer.post("/credit/settings", url.Values{"currency": {"usd"}, "required": {"on"}, "low_balance_micros": {"5000000"}}); r.Status != http.StatusSeeOther {
		t.Fatalf("settings: %d %s", r.Status, r.Body)
	}
	a, err := s.store.CreditAccount(ctx, buyerActor.OrgID, "usd")
	if err != nil || !a.Required || a.LowBalanceMicros != 5_000_000 {
		t.Fatalf("the account after the settings: %+v, %v", a, err)
	}
	mustContain(t, buyer.get("/credit"), `below $5.00`)
	mustNotContain(t, seller.get("/credit"), `ctr_x`)
}

// TestCreditGrantRefused: the operator's grant form sent empty comes back
// as the page with what to correct (422), not as an error page.
func TestCreditGrantRefused(t *testing.T) {
	s := newSite(t, siteOptions{autoApprove: true})
	op := s.browser(t)
	op.signinKey(s.operatorKey)
	p := op.post("/credit/grants", url.Values{"org_id": {""}, "currency": {"usd"}, "amount_micros": {""}})
	if p.Status != http.StatusUnprocessableEntity {
		t.Fatalf("an empty grant: %d, want 422: %s", p.Status, p.Body)
	}
	mustContain(t, p, `id="error-summary"`, `href="#grant-`)
	mustNotContain(t, p, `That did not work`)
}
