package contracts_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/casbin"
	contractsgorm "github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/migrations/gormdb"
	"github.com/agentmarket/agentmarket/migrations/gormdb/gormdbtest"
)

type listingsFake map[string]*contracts.ListingTerms

func (f listingsFake) ListingTerms(_ context.Context, _ agentmarket.Actor, id string) (*contracts.ListingTerms, error) {
	if t, ok := f[id]; ok {
		return t, nil
	}
	return nil, agentmarket.Errorf(agentmarket.NotFound, "listing_not_found", "no listing %q", id)
}

// TestContractLifeCycle: billing moves a contract through past due,
// suspended, active again and canceled; the invoke right follows.
func TestContractLifeCycle(t *testing.T) {
	gormdbtest.Each(t, func(t *testing.T, db *gormdb.DB) {
		ctx := context.Background()
		store := contractsgorm.New(db.DB)
		authz, err := casbin.New(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		clock := agentmarket.NewManualClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
		for _, o := range []string{"org_buyer", "org_seller"} {
			if err := store.CreateOrg(ctx, &contracts.Org{ID: o, Name: o, CreatedAt: clock.Now()}, nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		// Contracts reference listings: create one row the simplest way.
		if err := db.Exec(`INSERT INTO listings (id, seller_org_id, status, health, name, description, card_json, card_hash, card_fetched_at,
			protocol_versions, streaming, push_notifications, search_text, plan_version, currency, monthly_fee_micros, refresh_seconds, created_at, updated_at)
			VALUES ('lst_1', 'org_seller', 'published', 'healthy', 'x', 'x', '{}', 'h', ?, '0.3', false, false, '', 1, 'usd', 0, 0, ?, ?)`,
			clock.Now(), clock.Now(), clock.Now()).Error; err != nil {
			t.Fatal(err)
		}
		subs := &contracts.Subscriptions{Store: store, Policies: authz, Clock: clock,
			Listings: listingsFake{"lst_1": {ID: "lst_1", SellerOrgID: "org_seller", Published: true, PlanVersion: 1}}}
		buyer := agentmarket.Actor{OrgID: "org_buyer", Role: agentmarket.RoleBuyer}
		c, err := subs.Subscribe(ctx, buyer, contracts.SubscribeInput{ListingID: "lst_1"})
		if err != nil {
			t.Fatal(err)
		}
		may := func() bool {
			ok, err := authz.Allowed(contracts.OrgSubject("org_buyer"), "*", contracts.ListingObject("lst_1"), contracts.ActInvoke)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		step := func(to contracts.ContractStatus, wantInvoke bool) *contracts.Contract {
			t.Helper()
			got, err := subs.Transition(ctx, c.ID, to)
			if err != nil {
				t.Fatalf("→ %s: %v", to, err)
			}
			if got.Status != to || may() != wantInvoke {
				t.Fatalf("→ %s: status %s, may invoke %v", to, got.Status, may())
			}
			return got
		}
		first := step(contracts.ContractPastDue, true)
		if first.PastDueAt == nil || !first.PastDueAt.Equal(clock.Now()) {
			t.Fatalf("past_due_at = %v", first.PastDueAt)
		}
		clock.Advance(time.Hour)
		if again := step(contracts.ContractPastDue, true); !again.PastDueAt.Equal(*first.PastDueAt) {
			t.Errorf("a second failure moved the grace start to %v", again.PastDueAt)
		}
		if n, err := subs.SuspendOverdue(ctx, 72*time.Hour); err != nil || n != 0 {
			t.Fatalf("within grace: suspended %d, %v", n, err)
		}
		clock.Advance(72 * time.Hour)
		if n, err := subs.SuspendOverdue(ctx, 72*time.Hour); err != nil || n != 1 {
			t.Fatalf("after grace: suspended %d, %v", n, err)
		}
		if got, _ := subs.Get(ctx, buyer, c.ID); got.Status != contracts.ContractSuspended || may() {
			t.Fatalf("after grace: %s, may invoke %v", got.Status, may())
		}
		if paid := step(contracts.ContractActive, true); paid.PastDueAt != nil {
			t.Errorf("paid contract keeps past_due_at %v", paid.PastDueAt)
		}
		step(contracts.ContractCanceled, false)
		if _, err := subs.Transition(ctx, c.ID, contracts.ContractActive); agentmarket.CodeOf(err) != "invalid_transition" {
			t.Fatalf("canceled → active: %v, want invalid_transition", err)
		}
	})
}
