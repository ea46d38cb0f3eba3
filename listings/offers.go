package listings

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agentmarket/agentmarket"
)

// OfferStatus is where a private offer is in its life. An open offer
// whose ExpiresAt has passed is expired (Offer.StatusAt).
type OfferStatus string

const (
	OfferOpen      OfferStatus = "open"
	OfferAccepted  OfferStatus = "accepted"
	OfferWithdrawn OfferStatus = "withdrawn"
	OfferExpired   OfferStatus = "expired"
)

// Offer is a seller's private offer to one buyer org on one listing: its
// own plan (any plan fields, a minimum monthly commitment included),
// stored as a private plan version of the listing that only that org sees
// and that a contract freezes when the org accepts the offer.
type Offer struct {
	ID          string
	ListingID   string
	SellerOrgID string
	BuyerOrgID  string
	// Plan is the offer's plan version (Plan.BuyerOrgID is BuyerOrgID).
	Plan      Plan
	ExpiresAt time.Time
	Status    OfferStatus
	// ContractID is the contract that accepted the offer.
	ContractID string
	CreatedAt  time.Time
	// DecidedAt is when it was accepted or withdrawn.
	DecidedAt *time.Time
}

// StatusAt is the offer's status at now: open offers past their expiry
// are expired.
func (o *Offer) StatusAt(now time.Time) OfferStatus {
	if o.Status == OfferOpen && !now.Before(o.ExpiresAt) {
		return OfferExpired
	}
	return o.Status
}

// OfferQuery selects offers: those a seller made, or those made to a
// buyer (exactly one of the two), optionally of one listing.
type OfferQuery struct {
	SellerOrgID string
	BuyerOrgID  string
	ListingID   string
}

// OfferStore persists private offers (listings/gormstore); every
// implementation passes listings/storetest.
type OfferStore interface {
	// CreateOffer stores the offer and its plan version in one
	// transaction; a plan version already taken is a Conflict.
	CreateOffer(ctx context.Context, o *Offer) error
	GetOffer(ctx context.Context, id string) (*Offer, error)
	// ListOffers lists the offers of q, newest first.
	ListOffers(ctx context.Context, q OfferQuery) ([]Offer, error)
	// DecideOffer moves an open offer to status (accepted, with the
	// contract, or withdrawn) at at; an offer no longer open is a Conflict
	// (code offer_not_open) and is left as it is.
	DecideOffer(ctx context.Context, id string, status OfferStatus, contractID string, at time.Time) (*Offer, error)
}

// OrgChecker tells whether an org exists (contracts' store, wired in
// cmd/), so an offer names a real buyer.
type OrgChecker interface {
	OrgExists(ctx context.Context, orgID string) (bool, error)
}

// Bounds of an offer.
const (
	// MaxOfferDays is how far ahead an offer may expire.
	MaxOfferDays = 365
)

// OfferInput is a seller's private offer.
type OfferInput struct {
	BuyerOrgID string          `json:"buyer_org_id"`
	Pricing    json.RawMessage `json:"pricing"`
	ExpiresAt  time.Time       `json:"expires_at"`
}

// validate adds every broken rule of the input to fe (the plan's are
// ParsePricing's) and returns the plan; now is when it is made.
func (in *OfferInput) validate(fe *agentmarket.Fields, now time.Time) Plan {
	if in.BuyerOrgID == "" {
		fe.Add("buyer_org_id", "required", "buyer_org_id is required: the org the offer is for")
	} else {
		fe.Text("buyer_org_id", in.BuyerOrgID, 64)
	}
	switch {
	case in.ExpiresAt.IsZero():
		fe.Add("expires_at", "required", "expires_at is required (an RFC 3339 time)")
	case !in.ExpiresAt.After(now):
		fe.Add("expires_at", "future", "expires_at must be in the future")
	case in.ExpiresAt.After(now.AddDate(0, 0, MaxOfferDays)):
		fe.Add("expires_at", "max", "an offer expires within %d days", MaxOfferDays)
	}
	plan, err := ParsePricing(in.Pricing)
	if err != nil {
		var ae *agentmarket.Error
		if errors.As(err, &ae) {
			*fe = append(*fe, ae.Fields...)
		}
	}
	return plan
}

// Offers is the sellers' side and the buyers' view of private offers.
type Offers struct {
	Store    OfferStore
	Listings Store
	Orgs     OrgChecker
	Clock    agentmarket.Clock
	// Audit records every offer made and withdrawn (nil: none is).
	Audit agentmarket.ChangeRecorder
}

func offerNotFound(id string) error {
	return agentmarket.Errorf(agentmarket.NotFound, "offer_not_found", "no offer %q", id)
}

// Create makes a private offer on the actor's org's listing to another
// org.
func (s *Offers) Create(ctx context.Context, actor agentmarket.Actor, listingID string, in OfferInput) (*Offer, error) {
	l, err := s.Listings.GetListing(ctx, listingID)
	if err != nil || (!visible(actor, l)) {
		if err == nil || agentmarket.KindOf(err) == agentmarket.NotFound {
			return nil, notFound(listingID)
		}
		return nil, err
	}
	if l.SellerOrgID != actor.OrgID {
		return nil, agentmarket.Errorf(agentmarket.Forbidden, "not_listing_owner", "listing %q belongs to another organisation", listingID)
	}
	now := s.Clock.Now()
	var fe agentmarket.Fields
	plan := in.validate(&fe, now)
	if in.BuyerOrgID == actor.OrgID {
		fe.Add("buyer_org_id", "not_self", "an offer is for another organisation")
	}
	if len(fe) == 0 && s.Orgs != nil {
		ok, err := s.Orgs.OrgExists(ctx, in.BuyerOrgID)
		if err != nil {
			return nil, err
		}
		if !ok {
			fe.Add("buyer_org_id", "unknown", "no organisation %q", in.BuyerOrgID)
		}
	}
	if err := fe.Err("invalid_offer", "the offer is not valid"); err != nil {
		return nil, err
	}
	v, err := s.Listings.NextPlanVersion(ctx, listingID)
	if err != nil {
		return nil, err
	}
	plan.Version, plan.BuyerOrgID, plan.CreatedAt = v, in.BuyerOrgID, now
	o := &Offer{ID: agentmarket.NewID("ofr"), ListingID: listingID, SellerOrgID: actor.OrgID, BuyerOrgID: in.BuyerOrgID, Plan: plan,
		ExpiresAt: in.ExpiresAt.UTC(), Status: OfferOpen, CreatedAt: now}
	if err := s.Store.CreateOffer(ctx, o); err != nil {
		return nil, err
	}
	return o, agentmarket.RecordChange(ctx, s.Audit, offerChange(actor, "offer.create", nil, o))
}

// Get returns an offer to its seller or its buyer; to anyone else it does
// not exist.
func (s *Offers) Get(ctx context.Context, actor agentmarket.Actor, id string) (*Offer, error) {
	o, err := s.Store.GetOffer(ctx, id)
	if agentmarket.KindOf(err) == agentmarket.NotFound {
		return nil, offerNotFound(id)
	}
	if err != nil {
		return nil, err
	}
	if o.SellerOrgID != actor.OrgID && o.BuyerOrgID != actor.OrgID {
		return nil, offerNotFound(id)
	}
	return o, nil
}

// Acceptable returns the offer id that the actor's org may accept now,
// and its listing: an offer made to another org is Forbidden, one that is
// no longer open (expired, withdrawn, accepted) a Conflict.
func (s *Offers) Acceptable(ctx context.Context, actor agentmarket.Actor, id string) (*Offer, *Listing, error) {
	o, err := s.Get(ctx, actor, id)
	if err != nil {
		return nil, nil, err
	}
	if o.BuyerOrgID != actor.OrgID {
		return nil, nil, agentmarket.Errorf(agentmarket.Forbidden, "not_offer_buyer", "offer %q is made to another organisation", id)
	}
	switch o.StatusAt(s.Clock.Now()) {
	case OfferOpen:
	case OfferExpired:
		return nil, nil, agentmarket.Errorf(agentmarket.Conflict, "offer_expired", "offer %q expired at %s", id, o.ExpiresAt.Format(time.RFC3339))
	default:
		return nil, nil, agentmarket.Errorf(agentmarket.Conflict, "offer_not_open", "offer %q is %s", id, o.Status)
	}
	l, err := s.Listings.GetListing(ctx, o.ListingID)
	if err != nil {
		return nil, nil, err
	}
	return o, l, nil
}

// List returns the offers the actor's org made (made: true) or was made.
func (s *Offers) List(ctx context.Context, actor agentmarket.Actor, made bool, listingID string) ([]Offer, error) {
	q := OfferQuery{BuyerOrgID: actor.OrgID, ListingID: listingID}
	if made {
		q = OfferQuery{SellerOrgID: actor.OrgID, ListingID: listingID}
	}
	return s.Store.ListOffers(ctx, q)
}

// Withdraw takes back an open offer of the actor's org.
func (s *Offers) Withdraw(ctx context.Context, actor agentmarket.Actor, id string) (*Offer, error) {
	o, err := s.Get(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	if o.SellerOrgID != actor.OrgID {
		return nil, agentmarket.Errorf(agentmarket.Forbidden, "not_offer_seller", "only the seller withdraws an offer")
	}
	after, err := s.Store.DecideOffer(ctx, id, OfferWithdrawn, "", s.Clock.Now())
	if err != nil {
		return nil, err
	}
	return after, agentmarket.RecordChange(ctx, s.Audit, offerChange(actor, "offer.withdraw", o, after))
}

// Accepted records that the offer was accepted by a contract (contracts'
// Subscriptions calls it once the contract exists).
//
// The audit entry names no actor: the subscription's entry, in the same
// request (its request id), says who accepted.
func (s *Offers) Accepted(ctx context.Context, id, contractID string) error {
	before, err := s.Store.GetOffer(ctx, id)
	if err != nil {
		return err
	}
	after, err := s.Store.DecideOffer(ctx, id, OfferAccepted, contractID, s.Clock.Now())
	if err != nil {
		return err
	}
	return agentmarket.RecordChange(ctx, s.Audit, offerChange(agentmarket.Actor{}, "offer.accept", before, after))
}
