package contracts_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/migrations/relational"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// offersFake is one open offer per id.
type offersFake struct {
	terms    map[string]*contracts.OfferTerms
	accepted map[string]string
}

func (f *offersFake) OfferTerms(_ context.Context, _ agentmarket.Actor, id string) (*contracts.OfferTerms, error) {
	t, ok := f.terms[id]
	if !ok {
		return nil, agentmarket.Errorf(agentmarket.NotFound, "offer_not_found", "no offer %q", id)
	}
	if f.accepted[id] != "" {
		return nil, agentmarket.Errorf(agentmarket.Conflict, "offer_not_open", "offer %q is accepted", id)
	}
	return t, nil
}

func (f *offersFake) AcceptOffer(_ context.Context, id, contractID string) error {
	f.accepted[id] = contractID
	return nil
}

// TestPlanChanges: an active contract moves to the listing's current plan
// from now on, once a month; to a private offer on the same listing (which
// is then accepted; accepting an offer while subscribed changes the plan);
// not while trialing, nor to the plan it has, nor to an old version; billing
// is told first.
func TestPlanChanges(t *testing.T) {
	relationaltest.Each(t, func(t *testing.T, db *relational.DB) {
		ctx := context.Background()
		s := newTrialSetup(t, db)
		terms := s.subs.Listings.(listingsFake)
		terms["lst_2"].TrialDays = 0
		offers := &offersFake{accepted: map[string]string{}, terms: map[string]*contracts.OfferTerms{
			"ofr_2": {ID: "ofr_2", ListingID: "lst_2", SellerOrgID: "org_seller", Published: true, PlanVersion: 5},
			"ofr_1": {ID: "ofr_1", ListingID: "lst_1", SellerOrgID: "org_seller", Published: true, PlanVersion: 6},
		}}
		s.subs.Offers = offers
		c, err := s.subs.Subscribe(ctx, s.buyer, contracts.SubscribeInput{ListingID: "lst_2"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.subs.ChangePlan(ctx, s.buyer, c.ID, contracts.ChangePlanInput{PlanVersion: 1}); agentmarket.CodeOf(err) != "same_plan" {
			t.Errorf("to the plan it has: %v", err)
		}
		terms["lst_2"].PlanVersion = 3 // the seller's new prices
		for _, v := range []int{2, 4} {
			if _, err := s.subs.ChangePlan(ctx, s.buyer, c.ID, contracts.ChangePlanInput{PlanVersion: v}); agentmarket.CodeOf(err) != "invalid_plan_change" {
				t.Errorf("to version %d, not the current one: %v", v, err)
			}
		}
		for _, in := range []contracts.ChangePlanInput{{}, {PlanVersion: 3, OfferID: "ofr_2"}, {OfferID: "ofr_1"}} {
			if _, err := s.subs.ChangePlan(ctx, s.buyer, c.ID, in); agentmarket.CodeOf(err) != "invalid_plan_change" {
				t.Errorf("ChangePlan(%+v): %v, want invalid_plan_change", in, err)
			}
		}
		s.clock.Advance(time.Hour + 1500*time.Millisecond)
		at := s.clock.Now()
		got, err := s.subs.ChangePlan(ctx, s.buyer, c.ID, contracts.ChangePlanInput{PlanVersion: 3})
		if err != nil {
			t.Fatal(err)
		}
		if got.PlanVersion != 3 || !s.may("lst_2") {
			t.Fatalf("after the change: %+v", got)
		}
		if _, err := s.subs.ChangePlan(ctx, s.buyer, c.ID, contracts.ChangePlanInput{OfferID: "ofr_2"}); agentmarket.CodeOf(err) != "plan_changed_this_period" {
			t.Errorf("a second change in the month: %v", err)
		}
		// Next month, the offer: accepting it changes the plan.
		s.clock.Advance(15 * 24 * time.Hour)
		next := s.clock.Now()
		got, created, err := s.subs.AcceptOffer(ctx, s.buyer, "ofr_2", contracts.SubscribeInput{})
		if err != nil || created || got.ID != c.ID || got.PlanVersion != 5 || offers.accepted["ofr_2"] != c.ID {
			t.Fatalf("accept while subscribed: %+v, created %v, %v; offers %v", got, created, err, offers.accepted)
		}
		chs, err := s.subs.Changes.PlanChanges(ctx, c.ID)
		if err != nil || len(chs) != 2 || !chs[0].At.Equal(at.Truncate(time.Millisecond)) || chs[1].OfferID != "ofr_2" || chs[1].FromVersion != 3 {
			t.Errorf("changes %+v, %v", chs, err)
		}
		want := "attach active, change " + c.ID[:4] + " #1 v1→v3 at " + at.Truncate(time.Millisecond).Format(time.RFC3339Nano) +
			", change " + c.ID[:4] + " #2 v3→v5 at " + next.Format(time.RFC3339Nano)
		if got := strings.Join(s.hooks.calls, ", "); got != want {
			t.Errorf("billing was told:\n  %s\nwant\n  %s", got, want)
		}

		// A trialing contract does not change plan.
		tr, err := s.subs.Subscribe(ctx, s.buyer, contracts.SubscribeInput{ListingID: "lst_1"})
		if err != nil || tr.Status != contracts.ContractTrialing {
			t.Fatalf("subscribe: %+v, %v", tr, err)
		}
		terms["lst_1"].PlanVersion = 2
		if _, err := s.subs.ChangePlan(ctx, s.buyer, tr.ID, contracts.ChangePlanInput{PlanVersion: 2}); agentmarket.CodeOf(err) != "plan_change_refused" {
			t.Errorf("a trialing contract changes plan: %v", err)
		}
		if _, err := s.subs.ChangePlan(ctx, agentmarket.Actor{OrgID: "org_seller"}, c.ID, contracts.ChangePlanInput{PlanVersion: 3}); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("another org changes the plan: %v", err)
		}
	})
}

// TestCancelAtPeriodEnd: a buyer schedules the end of its subscription at
// the end of the calendar month (billing told first), takes it back,
// schedules it again; calls go on until then; it is canceled at that
// instant, whether billing's sweep or the provider's word comes first and
// however late.
func TestCancelAtPeriodEnd(t *testing.T) {
	relationaltest.Each(t, func(t *testing.T, db *relational.DB) {
		ctx := context.Background()
		s := newTrialSetup(t, db)
		terms := s.subs.Listings.(listingsFake)
		terms["lst_1"].TrialDays, terms["lst_2"].TrialDays = 0, 0
		a, _ := s.subs.Subscribe(ctx, s.buyer, contracts.SubscribeInput{ListingID: "lst_1"})
		b, _ := s.subs.Subscribe(ctx, s.buyer, contracts.SubscribeInput{ListingID: "lst_2"})
		s.hooks.calls = nil
		end := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		for _, v := range []bool{true, false, true} {
			got, err := s.subs.CancelAtPeriodEnd(ctx, s.buyer, a.ID, v)
			if err != nil || (got.CancelAt != nil) != v || (v && !got.CancelAt.Equal(end)) {
				t.Fatalf("CancelAtPeriodEnd(%v) = %+v, %v", v, got, err)
			}
		}
		if _, err := s.subs.CancelAtPeriodEnd(ctx, s.buyer, b.ID, true); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(s.hooks.calls, ", "); got != "end at 2026-12-01T00:00:00Z, trial cancel false, end at 2026-12-01T00:00:00Z, end at 2026-12-01T00:00:00Z" {
			t.Errorf("billing was told: %s", got)
		}
		if got, _ := s.subs.CancelScheduled(ctx, a.ID); got.Status != contracts.ContractActive || !s.may("lst_1") {
			t.Errorf("canceled before its end: %+v", got)
		}
		s.clock.Advance(12 * 24 * time.Hour) // well past the end
		got, err := s.subs.CancelScheduled(ctx, a.ID)
		if err != nil || got.Status != contracts.ContractCanceled || !got.CanceledAt.Equal(end) || s.may("lst_1") {
			t.Fatalf("the sweep: %+v, %v; want canceled at %v", got, err, end)
		}
		got, err = s.subs.Transition(ctx, b.ID, contracts.ContractCanceled) // the provider's word
		if err != nil || got.Status != contracts.ContractCanceled || !got.CanceledAt.Equal(end) {
			t.Fatalf("the provider's word: %+v, %v; want canceled at %v", got, err, end)
		}
		if _, err := s.subs.CancelAtPeriodEnd(ctx, s.buyer, a.ID, true); agentmarket.CodeOf(err) != "subscription_canceled" {
			t.Errorf("scheduling a canceled contract: %v", err)
		}
	})
}
