package listings_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings"
)

type orgsFake map[string]bool

func (o orgsFake) OrgExists(_ context.Context, id string) (bool, error) { return o[id], nil }

// TestPrivateOffers: a seller offers another org its own plan on its
// listing; the plan is a private version numbered after every other and
// the listing's public plan is untouched (a later public change takes the
// next version); only the seller and that buyer see the offer; bad offers
// are refused field by field; a withdrawn offer cannot be accepted.
func TestPrivateOffers(t *testing.T) {
	e := newEnv(t, true)
	ctx := context.Background()
	l := e.mustCreate(t, seller, listings.CreateInput{Card: card(t, "summarizer-v0.3.json")})
	offers := &listings.Offers{Store: e.store, Listings: e.store, Clock: e.clock,
		Orgs: orgsFake{seller.OrgID: true, other.OrgID: true, third.OrgID: true}}
	in := listings.OfferInput{BuyerOrgID: third.OrgID, ExpiresAt: t0.Add(30 * 24 * time.Hour),
		Pricing: json.RawMessage(`{"currency": "usd", "monthly_fee_micros": 1000000, "min_commit_micros": 20000000, "trial_days": 7}`)}
	o, err := offers.Create(ctx, seller, l.ID, in)
	if err != nil {
		t.Fatal(err)
	}
	want := listings.Plan{Version: 2, Currency: "usd", MonthlyFeeMicros: 1_000_000, MinCommitMicros: 20_000_000, TrialDays: 7,
		BuyerOrgID: third.OrgID, CreatedAt: t0}
	if o.Status != listings.OfferOpen || o.Plan != want || o.BuyerOrgID != third.OrgID || o.SellerOrgID != seller.OrgID {
		t.Fatalf("offer = %+v, want open with plan %+v", o, want)
	}
	if got, _ := e.svc.Get(ctx, third, l.ID); got.Plan.Version != 1 || got.Plan.MonthlyFeeMicros != 5_000_000 {
		t.Fatalf("the listing's public plan changed: %+v", got.Plan)
	}
	// A public price change after the offer takes version 3.
	up, err := e.svc.Update(ctx, seller, l.ID, listings.UpdateInput{Pricing: json.RawMessage(`{"currency": "usd", "monthly_fee_micros": 6000000}`)})
	if err != nil || up.Plan.Version != 3 || up.Plan.BuyerOrgID != "" {
		t.Fatalf("public change after an offer: %+v, %v", up.Plan, err)
	}

	// Visibility: seller and buyer, nobody else.
	for _, a := range []agentmarket.Actor{seller, third} {
		if _, err := offers.Get(ctx, a, o.ID); err != nil {
			t.Errorf("%s cannot see its offer: %v", a.OrgID, err)
		}
	}
	if _, err := offers.Get(ctx, other, o.ID); agentmarket.KindOf(err) != agentmarket.NotFound {
		t.Errorf("another org sees the offer: %v", err)
	}
	if list, _ := offers.List(ctx, other, false, ""); len(list) != 0 {
		t.Errorf("another org lists %d offers", len(list))
	}
	if list, _ := offers.List(ctx, third, false, ""); len(list) != 1 || list[0].ID != o.ID {
		t.Errorf("the buyer lists %+v", list)
	}
	if list, _ := offers.List(ctx, seller, true, l.ID); len(list) != 1 {
		t.Errorf("the seller lists %+v", list)
	}

	// Refusals.
	for _, tc := range []struct {
		name  string
		actor agentmarket.Actor
		in    listings.OfferInput
		code  string
		rules string
	}{
		{"not the seller", other, in, "not_listing_owner", ""},
		{"to itself", seller, listings.OfferInput{BuyerOrgID: seller.OrgID, ExpiresAt: in.ExpiresAt, Pricing: in.Pricing}, "invalid_offer", "buyer_org_id:not_self"},
		{"to nobody known", seller, listings.OfferInput{BuyerOrgID: "org_nope", ExpiresAt: in.ExpiresAt, Pricing: in.Pricing}, "invalid_offer", "buyer_org_id:unknown"},
		{"everything wrong", seller, listings.OfferInput{ExpiresAt: t0.Add(-time.Hour), Pricing: json.RawMessage(`{"currency": "usd", "min_commit_micros": -1}`)},
			"invalid_offer", "buyer_org_id:required expires_at:future pricing.min_commit_micros:non_negative"},
		{"too far ahead", seller, listings.OfferInput{BuyerOrgID: third.OrgID, ExpiresAt: t0.AddDate(1, 0, 1), Pricing: in.Pricing}, "invalid_offer", "expires_at:max"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := offers.Create(ctx, tc.actor, l.ID, tc.in)
			if agentmarket.CodeOf(err) != tc.code {
				t.Fatalf("err = %v, want code %s", err, tc.code)
			}
			if tc.rules != "" {
				if got := fieldRules(t, err); got != tc.rules {
					t.Errorf("fields %q, want %q", got, tc.rules)
				}
			}
		})
	}

	// Withdrawn: by the seller only, once.
	if _, err := offers.Withdraw(ctx, third, o.ID); agentmarket.KindOf(err) != agentmarket.Forbidden {
		t.Errorf("the buyer withdrew the offer: %v", err)
	}
	w, err := offers.Withdraw(ctx, seller, o.ID)
	if err != nil || w.Status != listings.OfferWithdrawn || w.DecidedAt == nil {
		t.Fatalf("Withdraw = %+v, %v", w, err)
	}
	if err := offers.Accepted(ctx, o.ID, "ctr_1"); agentmarket.CodeOf(err) != "offer_not_open" {
		t.Errorf("accepting a withdrawn offer: %v", err)
	}
}
