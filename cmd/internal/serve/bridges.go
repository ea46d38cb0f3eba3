package serve

import (
	"context"
	"net/netip"
	"net/url"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/httpfetch"
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

// AccountOrgs tells the catalog which orgs exist (a private offer names
// its buyer).
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
type CatalogOffers struct {
	Offers *listings.Offers
}

var _ contracts.OfferSource = CatalogOffers{}

// OfferTerms implements contracts.OfferSource.
func (c CatalogOffers) OfferTerms(ctx context.Context, actor agentmarket.Actor, id string) (*contracts.OfferTerms, error) {
	o, err := c.Offers.Get(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	if o.BuyerOrgID != actor.OrgID {
		return nil, agentmarket.Errorf(agentmarket.Forbidden, "not_offer_buyer", "offer %q is made to another organisation", id)
	}
	switch o.StatusAt(c.Offers.Clock.Now()) {
	case listings.OfferOpen:
	case listings.OfferExpired:
		return nil, agentmarket.Errorf(agentmarket.Conflict, "offer_expired", "offer %q expired at %s", id, o.ExpiresAt.Format(time.RFC3339))
	default:
		return nil, agentmarket.Errorf(agentmarket.Conflict, "offer_not_open", "offer %q is %s", id, o.Status)
	}
	l, err := c.Offers.Listings.GetListing(ctx, o.ListingID)
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

// WebhookGuard judges an org's alert webhook as the meter judges push
// webhooks: https to a public address; plain http, and private
// addresses, only in AGENTMARKET_FETCH_ALLOW_CIDRS.
type WebhookGuard struct{ Guard httpfetch.Guard }

var _ contracts.URLChecker = WebhookGuard{}

// CheckWebhook implements contracts.URLChecker.
func (w WebhookGuard) CheckWebhook(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return agentmarket.Errorf(agentmarket.Invalid, "webhook_refused", "%q is not an absolute URL", raw)
	}
	if u.Scheme != "https" {
		ip, err := netip.ParseAddr(u.Hostname())
		allowed := false
		for _, p := range w.Guard.Allow {
			allowed = allowed || err == nil && p.Contains(ip)
		}
		if !allowed {
			return agentmarket.Errorf(agentmarket.Invalid, "webhook_refused", "the webhook must use https")
		}
	}
	return w.Guard.CheckHost(ctx, u.Hostname())
}
