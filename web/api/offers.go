package api

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
)

type offerJSON struct {
	ID          string         `json:"id"`
	ListingID   string         `json:"listing_id"`
	SellerOrgID string         `json:"seller_org_id"`
	BuyerOrgID  string         `json:"buyer_org_id"`
	Pricing     map[string]any `json:"pricing"`
	ExpiresAt   time.Time      `json:"expires_at"`
	Status      string         `json:"status"`
	ContractID  string         `json:"subscription_id,omitempty"`
	CreatedAt   time.Time      `json:"created_at"`
	DecidedAt   *time.Time     `json:"decided_at"`
}

func (s *Server) offerView(o *listings.Offer) offerJSON {
	return offerJSON{ID: o.ID, ListingID: o.ListingID, SellerOrgID: o.SellerOrgID, BuyerOrgID: o.BuyerOrgID, Pricing: o.Plan.PricingJSON(),
		ExpiresAt: o.ExpiresAt, Status: string(o.StatusAt(s.Offers.Clock.Now())), ContractID: o.ContractID, CreatedAt: o.CreatedAt, DecidedAt: o.DecidedAt}
}

func (s *Server) offers() error {
	if s.Offers == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "offers_not_available", "this marketplace takes no private offers")
	}
	return nil
}

func (s *Server) createOffer(c *fiber.Ctx) error {
	if err := s.offers(); err != nil {
		return err
	}
	var in listings.OfferInput
	if err := decode(c, &in); err != nil {
		return err
	}
	o, err := s.Offers.Create(c.UserContext(), actorOf(c), c.Params("id"), in)
	if err != nil {
		return err
	}
	c.Location("/api/v1/offers/" + o.ID)
	return c.Status(fiber.StatusCreated).JSON(s.offerView(o))
}

// listOffers lists the offers made to the caller's org, or (made=true)
// those it made.
func (s *Server) listOffers(c *fiber.Ctx) error {
	if err := s.offers(); err != nil {
		return err
	}
	made := false
	switch c.Query("made") {
	case "", "false":
	case "true":
		made = true
	default:
		var fe agentmarket.Fields
		fe.Add("made", "format", "made must be true or false")
		return fe.Err("invalid_offer_query", "the query is not valid")
	}
	list, err := s.Offers.List(c.UserContext(), actorOf(c), made, c.Query("listing_id"))
	if err != nil {
		return err
	}
	out := make([]offerJSON, len(list))
	for i := range list {
		out[i] = s.offerView(&list[i])
	}
	return c.JSON(fiber.Map{"items": out})
}

func (s *Server) getOffer(c *fiber.Ctx) error {
	if err := s.offers(); err != nil {
		return err
	}
	o, err := s.Offers.Get(c.UserContext(), actorOf(c), c.Params("id"))
	if err != nil {
		return err
	}
	return c.JSON(s.offerView(o))
}

func (s *Server) withdrawOffer(c *fiber.Ctx) error {
	if err := s.offers(); err != nil {
		return err
	}
	o, err := s.Offers.Withdraw(c.UserContext(), actorOf(c), c.Params("id"))
	if err != nil {
		return err
	}
	return c.JSON(s.offerView(o))
}

// acceptOffer subscribes the caller's org at the offer's plan.
func (s *Server) acceptOffer(c *fiber.Ctx) error {
	var in contracts.SubscribeInput
	if len(c.Body()) > 0 {
		if err := decode(c, &in); err != nil {
			return err
		}
	}
	ct, created, err := s.Subscriptions.AcceptOffer(c.UserContext(), actorOf(c), c.Params("id"), in)
	if err != nil {
		return err
	}
	if !created { // the org's subscription changed plan
		return c.JSON(s.subscriptionView(ct))
	}
	c.Location("/api/v1/subscriptions/" + ct.ID)
	return c.Status(fiber.StatusCreated).JSON(s.subscriptionView(ct))
}
