package web

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
)

// offerView is a private offer as the pages show it.
type offerView struct {
	listings.Offer
	Listing string
	Buyer   string
	Seller  string
	Status  listings.OfferStatus
	Terms   []priceRow
	// NoAccept says why accepting cannot be done now (the subscription
	// it would change cannot change plan: PlanChangeRefused); the button
	// is then shown disabled with it.
	NoAccept string
}

func (u *UI) offerViews(r *req, list []listings.Offer) []offerView {
	lb := u.newLabeler(r)
	now := u.d.Clock.Now()
	out := make([]offerView, len(list))
	for i, o := range list {
		out[i] = offerView{Offer: o, Listing: lb.listing(o.ListingID).name, Buyer: u.orgName(r.ctx, o.BuyerOrgID),
			Seller: u.orgName(r.ctx, o.SellerOrgID), Status: o.StatusAt(now), Terms: planRows(o.Plan)}
		if o.Plan.MinCommitMicros > 0 {
			out[i].Terms = append(out[i].Terms, priceRow{"Minimum per month", formatMicros(o.Plan.MinCommitMicros, o.Plan.Currency)})
		}
	}
	return out
}

type offersData struct {
	newListingData
	Offers   []offerView
	Listings []listingCard
}

var offerFormNames = []string{"listing_id", "buyer_org_id", "currency", "expires_days", "trial_days"}

// sellerOffers lists the private offers the org made, with a form to make
// one.
func (u *UI) sellerOffers(r *req) error {
	return u.sellerOffersPage(r, &form{Values: map[string]string{"currency": "usd", "expires_days": "30"}})
}

func (u *UI) sellerOffersPage(r *req, f *form) error {
	if err := u.require(r, contracts.ObjListings, contracts.ActWrite); err != nil {
		return err
	}
	if u.d.Offers == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "offers_not_available", "this marketplace takes no private offers")
	}
	list, err := u.d.Offers.List(r.ctx, r.actor, true, "")
	if err != nil {
		return err
	}
	d := &offersData{newListingData: *u.listingFormData(f), Offers: u.offerViews(r, list)}
	d.Amounts = append(d.Amounts, input(f, commitInput.input, commitInput.label, "text", "mode=decimal", "hint="+commitInput.hint))
	res, err := u.d.Listings.Search(r.ctx, r.actor, listings.Query{SellerOrgID: r.actor.OrgID, Sort: "-created", PageSize: listings.MaxPageSize})
	if err != nil {
		return err
	}
	for _, l := range res.Items {
		d.Listings = append(d.Listings, u.card(r, l))
	}
	return u.render(r, "offers", "Private offers", d)
}

// createOffer makes a private offer from the form.
func (u *UI) createOffer(r *req) error {
	if err := u.require(r, contracts.ObjListings, contracts.ActWrite); err != nil {
		return err
	}
	f := &form{Values: map[string]string{}}
	for _, n := range offerFormNames {
		f.Values[n] = strings.TrimSpace(r.c.FormValue(n))
	}
	for _, a := range append(amountInputs[:len(amountInputs):len(amountInputs)], commitInput) {
		f.Values[a.input] = r.c.FormValue(a.input)
	}
	in := listings.OfferInput{BuyerOrgID: f.V("buyer_org_id")}
	if f.V("listing_id") == "" {
		f.add("listing_id", "Choose the agent the offer is for.")
	}
	days, err := strconv.Atoi(f.V("expires_days"))
	if err != nil || days < 1 {
		f.add("expires_days", "The offer's life must be a whole number of days, 1 or more.")
	}
	in.ExpiresAt = u.d.Clock.Now().Add(time.Duration(days) * 24 * time.Hour)
	pricing := formPricing(f)
	if v := f.V("trial_days"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			f.add("trial_days", "Free trial (days) must be a whole number.")
		}
		pricing["trial_days"] = n
	}
	in.Pricing, _ = json.Marshal(pricing)
	if len(f.Errors) == 0 {
		o, err := u.d.Offers.Create(r.ctx, r.actor, f.V("listing_id"), in)
		if err == nil {
			return redirect(r, "/seller/offers?notice=offered#offer-"+o.ID)
		}
		f.Labels = map[string]string{"buyer_org_id": "the buyer organisation id", "expires_at": "the end of the offer", "listing_id": "the listing"}
		if !f.absorb(err, func(field string) string {
			if in, ok := listingFieldInputs[field]; ok {
				return in
			}
			if field == "expires_at" {
				return "expires_days"
			}
			return field
		}) {
			return err
		}
	}
	r.c.Status(fiber.StatusUnprocessableEntity)
	return u.sellerOffersPage(r, f)
}

func (u *UI) withdrawOffer(r *req) error {
	if err := u.require(r, contracts.ObjListings, contracts.ActWrite); err != nil {
		return err
	}
	if u.d.Offers == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "offer_not_found", "no such offer")
	}
	if _, err := u.d.Offers.Withdraw(r.ctx, r.actor, strings.Clone(r.c.Params("id"))); err != nil {
		return err
	}
	return redirect(r, "/seller/offers?notice=withdrawn")
}

// acceptOffer subscribes the buyer's org at an offer's plan.
func (u *UI) acceptOffer(r *req) error {
	if err := u.require(r, contracts.ObjSubscriptions, contracts.ActWrite); err != nil {
		return err
	}
	c, _, err := u.d.Subscriptions.AcceptOffer(r.ctx, r.actor, strings.Clone(r.c.Params("id")), contracts.SubscribeInput{})
	if err != nil {
		return err
	}
	return redirect(r, "/buyer?notice=accepted#sub-"+c.ID)
}
