package billing

import (
	"context"

	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
)

// OrgReader reads an org (contracts' store implements it).
type OrgReader interface {
	GetOrg(ctx context.Context, id string) (*contracts.Org, error)
}

// ListingReader reads a listing (listings' store implements it).
type ListingReader interface {
	GetListing(ctx context.Context, id string) (*listings.Listing, error)
}

// Directory names the parties of billing's documents from the accounts
// and the catalog: its methods are Focus's OrgName and ListingName and
// Hooks' Buyer and Listing.
type Directory struct {
	Orgs     OrgReader
	Listings ListingReader
}

// OrgName returns an org's name.
func (d Directory) OrgName(ctx context.Context, orgID string) (string, error) {
	o, err := d.Orgs.GetOrg(ctx, orgID)
	if err != nil {
		return "", err
	}
	return o.Name, nil
}

// ListingName returns a listing's name: its card's, or its id when the
// card cannot be read.
func (d Directory) ListingName(ctx context.Context, listingID string) (string, error) {
	l, err := d.Listings.GetListing(ctx, listingID)
	if err != nil {
		return "", err
	}
	return listingName(l), nil
}

// Buyer returns a buyer org's id and name.
func (d Directory) Buyer(ctx context.Context, orgID string) (OrgInfo, error) {
	o, err := d.Orgs.GetOrg(ctx, orgID)
	if err != nil {
		return OrgInfo{}, err
	}
	return OrgInfo{ID: o.ID, Name: o.Name}, nil
}

// Listing returns a listing's name and its seller's connected account.
func (d Directory) Listing(ctx context.Context, listingID string) (name, connectedAccountID string, err error) {
	l, err := d.Listings.GetListing(ctx, listingID)
	if err != nil {
		return "", "", err
	}
	seller, err := d.Orgs.GetOrg(ctx, l.SellerOrgID)
	if err != nil {
		return "", "", err
	}
	return listingName(l), seller.ConnectAccountID, nil
}

func listingName(l *listings.Listing) string {
	if l.Card != nil {
		return l.Card.Name
	}
	return l.ID
}
