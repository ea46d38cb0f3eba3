package api

import (
	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
)

// stripeWebhook applies one Stripe event. Stripe retries anything but a
// 2xx, so only a forged or stale signature (400) or a failure to record
// the event (5xx) is not 200.
func (s *Server) stripeWebhook(c *fiber.Ctx) error {
	if s.Webhooks == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "stripe_not_configured", "Stripe is not configured on this marketplace")
	}
	// The contract transitions the webhook makes are recorded as made by
	// no one, via Stripe.
	req := agentmarket.RequestFrom(c.UserContext())
	req.Via = "stripe_webhook"
	applied, err := s.Webhooks.Handle(agentmarket.WithRequest(c.UserContext(), req), append([]byte(nil), c.Body()...), c.Get("Stripe-Signature"))
	if err != nil {
		if agentmarket.CodeOf(err) == "webhook_signature" {
			return c.Status(fiber.StatusBadRequest).JSON(ErrorBody{Error: ErrorDetail{Code: "webhook_signature", Message: err.(*agentmarket.Error).Message}})
		}
		return err
	}
	return c.JSON(fiber.Map{"received": true, "applied": applied})
}

type driftJSON struct {
	ContractID  string           `json:"subscription_id"`
	BuyerOrgID  string           `json:"buyer_org_id"`
	SellerOrgID string           `json:"seller_org_id"`
	ListingID   string           `json:"listing_id"`
	Kind        billing.LineKind `json:"kind"`
	Source      string           `json:"source"`
	Metered     int64            `json:"metered"`
	Reported    *int64           `json:"reported"`
	Invoiced    *int64           `json:"invoiced"`
	Difference  int64            `json:"difference"`
}

// monthParam reads period=YYYY-MM (default: the current month).
func (s *Server) monthParam(c *fiber.Ctx, code string) (billing.Period, error) {
	period := billing.MonthOf(s.Billing.Clock.Now())
	if v := c.Query("period"); v != "" {
		p, err := billing.ParseMonth("period", v)
		if err != nil {
			var fe agentmarket.Fields
			fe.Add("period", "format", "period must be a month like 2026-11, from 1970-01 to 2105-12")
			return period, fe.Err(code, "the query is not valid")
		}
		period = p
	}
	return period, nil
}

// issuedInvoices lists the invoices the own ledger issued for a month
// (period=YYYY-MM, default the current one) under contracts the caller's
// org buys or sells; every one for the operator.
func (s *Server) issuedInvoices(c *fiber.Ctx) error {
	period, err := s.monthParam(c, "invalid_invoices_query")
	if err != nil {
		return err
	}
	actor := actorOf(c)
	list, err := s.Billing.Issued(c.UserContext(), period, actor.OrgID, actor.Operator)
	if err != nil {
		return err
	}
	items := make([]fiber.Map, len(list))
	for i, inv := range list {
		items[i] = fiber.Map{
			"subscription_id": inv.ContractID, "listing_id": inv.ListingID, "buyer_org_id": inv.BuyerOrgID, "seller_org_id": inv.SellerOrgID,
			"created_at": inv.CreatedAt, "invoice": invoiceJSON(inv.ContractID, &inv.Invoice),
		}
	}
	return c.JSON(fiber.Map{"period": periodJSON{period.Start, period.End}, "items": items})
}

// reconciliation compares metered, reported and invoiced usage for a
// month (period=YYYY-MM, default the current one). Operators see every
// contract; others the contracts their org buys or sells.
func (s *Server) reconciliation(c *fiber.Ctx) error {
	period, err := s.monthParam(c, "invalid_reconciliation_query")
	if err != nil {
		return err
	}
	drifts, err := s.Billing.Reconcile(c.UserContext(), period)
	if err != nil {
		return err
	}
	actor := actorOf(c)
	out := []driftJSON{}
	for _, d := range drifts {
		if !actor.Operator && d.BuyerOrgID != actor.OrgID && d.SellerOrgID != actor.OrgID {
			continue
		}
		out = append(out, driftJSON{d.ContractID, d.BuyerOrgID, d.SellerOrgID, d.ListingID, d.Kind, string(d.Source), d.Metered, d.Reported, d.Invoiced, d.Difference})
	}
	return c.JSON(fiber.Map{"period": periodJSON{period.Start, period.End}, "drifts": out})
}
