package billing_test

import (
	"context"
	"testing"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/agentcard"
)

type orgsByID map[string]*contracts.Org

func (m orgsByID) GetOrg(_ context.Context, id string) (*contracts.Org, error) {
	if o, ok := m[id]; ok {
		return o, nil
	}
	return nil, agentmarket.Errorf(agentmarket.NotFound, "org_not_found", "no org %q", id)
}

type listingsByID map[string]*listings.Listing

func (m listingsByID) GetListing(_ context.Context, id string) (*listings.Listing, error) {
	if l, ok := m[id]; ok {
		return l, nil
	}
	return nil, agentmarket.Errorf(agentmarket.NotFound, "listing_not_found", "no listing %q", id)
}

// TestDirectory: a listing is named by its card, or by its id without
// one; the seller's connected account comes with it.
func TestDirectory(t *testing.T) {
	ctx := context.Background()
	d := billing.Directory{
		Orgs: orgsByID{"buyer": {ID: "buyer", Name: "Buyer Ltd"}, "seller": {ID: "seller", Name: "Seller Inc", ConnectAccountID: "acct_1"}},
		Listings: listingsByID{"carded": {ID: "carded", SellerOrgID: "seller", Card: &agentcard.Card{Name: "Summariser"}},
			"bare": {ID: "bare", SellerOrgID: "seller"}},
	}
	if got, err := d.OrgName(ctx, "buyer"); err != nil || got != "Buyer Ltd" {
		t.Errorf("OrgName = %q, %v", got, err)
	}
	if got, err := d.Buyer(ctx, "buyer"); err != nil || got != (billing.OrgInfo{ID: "buyer", Name: "Buyer Ltd"}) {
		t.Errorf("Buyer = %+v, %v", got, err)
	}
	for id, want := range map[string]string{"carded": "Summariser", "bare": "bare"} {
		if got, err := d.ListingName(ctx, id); err != nil || got != want {
			t.Errorf("ListingName(%s) = %q, %v; want %q", id, got, err, want)
		}
		name, account, err := d.Listing(ctx, id)
		if err != nil || name != want || account != "acct_1" {
			t.Errorf("Listing(%s) = %q, %q, %v; want %q, acct_1", id, name, account, err, want)
		}
	}
	if _, _, err := d.Listing(ctx, "gone"); agentmarket.KindOf(err) != agentmarket.NotFound {
		t.Errorf("Listing(gone): %v, want not found", err)
	}
}
