package serve

import (
	"context"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/metering"
)

// CatalogTerms lets subscriptions read listings from the catalog. Wiring
// only: one call of the catalog, its listing mapped onto contracts' terms.
type CatalogTerms struct{ Catalog *listings.Service }

var _ contracts.ListingSource = CatalogTerms{}

// ListingTerms implements contracts.ListingSource.
func (t CatalogTerms) ListingTerms(ctx context.Context, actor agentmarket.Actor, id string) (*contracts.ListingTerms, error) {
	l, err := t.Catalog.Get(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	terms := &contracts.ListingTerms{ID: l.ID, SellerOrgID: l.SellerOrgID, Published: l.Status == listings.StatusPublished, PlanVersion: l.Plan.Version,
		TrialDays: l.Plan.TrialDays}
	if l.Card != nil {
		terms.Name, terms.SkillTags = l.Card.Name, l.Card.Tags()
	}
	return terms, nil
}

// MeterTargets resolves listings for the meter, opening the sealed seller
// credentials. It holds one rule (a listing without a readable card is
// not found) that belongs with a2aproxy.Resolver, its consumer; it stays
// here until a2aproxy takes it.
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
		Card: l.Card, CardJSON: l.CardJSON, CardHash: l.CardHash, UpstreamAuth: auth, Limits: l.Limits,
		Endpoints: l.AgentEndpoints}, nil
}

// SellerAlerts tells sellers their agents are down through contracts'
// alerts. Wiring only: the listing mapped onto the alert's terms.
type SellerAlerts struct{ Alerts *contracts.Alerts }

var _ listings.DownAlerter = SellerAlerts{}

// AgentDown implements listings.DownAlerter.
func (s SellerAlerts) AgentDown(ctx context.Context, l *listings.Listing, h listings.AgentHealth) error {
	name := l.ID
	if l.Card != nil && l.Card.Name != "" {
		name = l.Card.Name
	}
	_, err := s.Alerts.AgentDown(ctx, l.SellerOrgID, l.ID, name, h.Since, h.Cause)
	return err
}

// AccountOrgs tells the catalog which orgs exist (a private offer names
// its buyer). Wiring only: contracts' store answers, not found meaning no.
type AccountOrgs struct{ Store contracts.Store }

var _ listings.OrgChecker = AccountOrgs{}

// OrgExists implements listings.OrgChecker.
func (a AccountOrgs) OrgExists(ctx context.Context, orgID string) (bool, error) {
	_, err := a.Store.GetOrg(ctx, orgID)
	if agentmarket.KindOf(err) == agentmarket.NotFound {
		return false, nil
	}
	return err == nil, err
}

// CatalogOffers lets subscriptions accept the catalog's private offers.
// Wiring only: listings.Offers.Acceptable holds the rules, and this maps
// its answer onto contracts' terms.
type CatalogOffers struct {
	Offers *listings.Offers
}

var _ contracts.OfferSource = CatalogOffers{}

// OfferTerms implements contracts.OfferSource.
func (c CatalogOffers) OfferTerms(ctx context.Context, actor agentmarket.Actor, id string) (*contracts.OfferTerms, error) {
	o, l, err := c.Offers.Acceptable(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	return &contracts.OfferTerms{ID: o.ID, ListingID: o.ListingID, SellerOrgID: o.SellerOrgID, Published: l.Status == listings.StatusPublished,
		PlanVersion: o.Plan.Version, TrialDays: o.Plan.TrialDays}, nil
}

// AcceptOffer implements contracts.OfferSource.
func (c CatalogOffers) AcceptOffer(ctx context.Context, offerID, contractID string) error {
	return c.Offers.Accepted(ctx, offerID, contractID)
}

// OrgSpend is a buyer org's spend for its monthly budget
// (a2aproxy.OrgSpend): the list price of the usage of all its keys and
// contracts, as metering.Spend sums a key's or a contract's.
type OrgSpend struct {
	Store metering.Store
	Clock agentmarket.Clock
}

// OrgSpent implements a2aproxy.OrgSpend.
func (s OrgSpend) OrgSpent(ctx context.Context, orgID string, from time.Time) (int64, error) {
	totals, err := s.Store.Totals(ctx, metering.Query{GroupBy: metering.ByBuyer, From: from, To: metering.SpendUntil(s.Clock.Now()), BuyerOrgID: orgID})
	if err != nil {
		return 0, err
	}
	return metering.Sum(totals).CostMicros, nil
}
