package serve

import (
	"context"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
)

// CatalogTerms lets subscriptions read listings from the catalog.
type CatalogTerms struct{ Catalog *listings.Service }

var _ contracts.ListingSource = CatalogTerms{}

// ListingTerms implements contracts.ListingSource.
func (t CatalogTerms) ListingTerms(ctx context.Context, actor agentmarket.Actor, id string) (*contracts.ListingTerms, error) {
	l, err := t.Catalog.Get(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	return &contracts.ListingTerms{ID: l.ID, SellerOrgID: l.SellerOrgID, Published: l.Status == listings.StatusPublished, PlanVersion: l.Plan.Version,
		TrialDays: l.Plan.TrialDays}, nil
}

// MeterTargets resolves listings for the meter, opening the sealed seller
// credentials.
type MeterTargets struct {
	Store   listings.Store
	Catalog *listings.Service
}

var _ a2aproxy.Resolver = MeterTargets{}

// Resolve implements a2aproxy.Resolver.
func (m MeterTargets) Resolve(ctx context.Context, id string) (*a2aproxy.Target, error) {
	l, err := m.Store.GetListing(ctx, id)
	if err != nil {
		return nil, err
	}
	auth, err := m.Catalog.OpenUpstreamAuth(l)
	if err != nil {
		return nil, err
	}
	if l.Card == nil {
		return nil, agentmarket.Errorf(agentmarket.NotFound, "listing_not_found", "listing %q has no readable card", id)
	}
	return &a2aproxy.Target{ListingID: l.ID, SellerOrgID: l.SellerOrgID, Published: l.Status == listings.StatusPublished,
		Card: l.Card, CardJSON: l.CardJSON, CardHash: l.CardHash, UpstreamAuth: auth, Limits: l.Limits}, nil
}
