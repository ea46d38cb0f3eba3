package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// CreditStore is a store that keeps orgs and their prepaid credit.
type CreditStore = interface {
	contracts.Store
	contracts.CreditStore
}

// RunCredit runs the contract suite of prepaid credit: a movement moves
// the balance and marks the org as holding credit, a purchase's ref
// credits once, burns lower the balance and are found per contract, and
// an account's settings are kept.
func RunCredit(t *testing.T, newStore func(t *testing.T) CreditStore) {
	ctx := context.Background()
	s := newStore(t)
	must(t, s.CreateOrg(ctx, org("org_b", false), nil, key("key_b", "org_b", t0)))
	if o, err := s.GetOrg(ctx, "org_b"); err != nil || o.HasCredit {
		t.Fatalf("a new org: HasCredit %v, %v; want false", o != nil && o.HasCredit, err)
	}
	if _, err := s.CreditAccount(ctx, "org_b", "usd"); agentmarket.KindOf(err) != agentmarket.NotFound {
		t.Fatalf("no account yet: %v, want NotFound", err)
	}
	buy := &contracts.CreditMovement{ID: "crm_1", OrgID: "org_b", Currency: "usd", Kind: contracts.CreditPurchase, AmountMicros: 5_000_000, Ref: "cs:1", Actor: "stripe", At: t0}
	a, added, err := s.AddCredit(ctx, buy)
	if err != nil || !added || a.BalanceMicros != 5_000_000 || a.CreditedMicros != 5_000_000 {
		t.Fatalf("purchase: %+v, added %v, %v; want a balance of 5,000,000", a, added, err)
	}
	again := *buy
	again.ID = "crm_2"
	if a, added, err := s.AddCredit(ctx, &again); err != nil || added || a.BalanceMicros != 5_000_000 {
		t.Fatalf("the same purchase again: %+v, added %v, %v; want nothing added", a, added, err)
	}
	if o, err := s.GetOrg(ctx, "org_b"); err != nil || !o.HasCredit {
		t.Fatalf("after a purchase: HasCredit %v, %v; want true", o != nil && o.HasCredit, err)
	}
	if _, _, err := s.AddCredit(ctx, &contracts.CreditMovement{ID: "crm_3", OrgID: "org_none", Currency: "usd", Kind: contracts.CreditGrant, AmountMicros: 1, Ref: "crm_3", At: t0}); agentmarket.KindOf(err) != agentmarket.NotFound {
		t.Fatalf("a grant to no org: %v, want NotFound", err)
	}
	if _, _, err := s.AddCredit(ctx, &contracts.CreditMovement{ID: "crm_4", OrgID: "org_b", Currency: "eur", Kind: contracts.CreditGrant, AmountMicros: 700, Ref: "crm_4", At: t0}); err != nil {
		t.Fatal(err)
	}
	in := func(d time.Duration) time.Time { return t0.Add(d) }
	must(t, s.RecordBurns(ctx, []contracts.CreditBurn{
		{OrgID: "org_b", Currency: "usd", ContractID: "ctr_1", Micros: 1_200_000, At: in(time.Hour)},
		{OrgID: "org_b", Currency: "usd", ContractID: "ctr_2", Micros: 300_000, At: in(time.Hour)},
		{OrgID: "org_b", Currency: "usd", ContractID: "ctr_1", Micros: 100_000, At: in(48 * time.Hour)},
	}))
	a, err = s.CreditAccount(ctx, "org_b", "usd")
	if err != nil || a.BalanceMicros != 3_400_000 || a.BurnedMicros != 1_600_000 {
		t.Fatalf("after burns: %+v, %v; want 3,400,000 left of 5,000,000", a, err)
	}
	if got, err := s.CreditBurned(ctx, "ctr_1", t0, in(24*time.Hour)); err != nil || got != 1_200_000 {
		t.Errorf("ctr_1's burns on the first day: %d, %v; want 1,200,000", got, err)
	}
	if got, err := s.CreditBurned(ctx, "ctr_3", t0, in(24*time.Hour)); err != nil || got != 0 {
		t.Errorf("a contract that burned nothing: %d, %v; want 0", got, err)
	}
	accts, err := s.CreditAccounts(ctx, "org_b")
	if err != nil || len(accts) != 2 || accts[0].Currency != "eur" || accts[1].Currency != "usd" {
		t.Fatalf("accounts: %+v, %v; want eur then usd", accts, err)
	}
	ms, err := s.CreditMovements(ctx, "org_b", "usd", 10)
	if err != nil || len(ms) != 4 || ms[0].Kind != contracts.CreditBurned || ms[0].AmountMicros != -100_000 || ms[3].Kind != contracts.CreditPurchase || !ms[3].At.Equal(t0) {
		t.Fatalf("usd movements: %+v, %v; want the last burn first and the purchase last", ms, err)
	}
	a, err = s.SetCreditSettings(ctx, "org_b", "usd", true, 1_000_000, in(time.Minute))
	if err != nil || !a.Required || a.LowBalanceMicros != 1_000_000 || a.BalanceMicros != 3_400_000 {
		t.Fatalf("settings: %+v, %v", a, err)
	}
	if _, err := s.SetCreditSettings(ctx, "org_b", "gbp", true, 0, t0); agentmarket.KindOf(err) != agentmarket.NotFound {
		t.Fatalf("settings of no account: %v, want NotFound", err)
	}
}
