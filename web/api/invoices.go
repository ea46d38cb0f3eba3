package api

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket/billing"
)

type invoiceLineJSON struct {
	Kind            billing.LineKind `json:"kind"`
	Description     string           `json:"description"`
	Used            int64            `json:"used"`
	Included        int64            `json:"included"`
	Quantity        int64            `json:"quantity"`
	UnitPriceMicros int64            `json:"unit_price_micros"`
	PerUnits        int64            `json:"per_units"`
	AmountMicros    int64            `json:"amount_micros"`
	AmountMinor     int64            `json:"amount_minor"`
	Part            int              `json:"part"`
}

type partJSON struct {
	PlanVersion int        `json:"plan_version"`
	Active      periodJSON `json:"active"`
	Trial       bool       `json:"trial"`
}

type periodJSON struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

func (s *Server) invoicePreview(c *fiber.Ctx) error {
	id := c.Query("subscription_id")
	inv, err := s.Invoices.Preview(c.UserContext(), actorOf(c), id)
	if err != nil {
		return err
	}
	return c.JSON(invoiceJSON(id, inv))
}

// invoiceJSON is an invoice (issued or previewed) as the API shows it.
func invoiceJSON(id string, inv *billing.Invoice) fiber.Map {
	lines := make([]invoiceLineJSON, len(inv.Lines))
	for i, l := range inv.Lines {
		lines[i] = invoiceLineJSON{Kind: l.Kind, Description: l.Description, Used: l.Used, Included: l.Included, Quantity: l.Quantity,
			UnitPriceMicros: l.UnitPriceMicros, PerUnits: l.PerUnits, AmountMicros: l.AmountMicros, AmountMinor: l.AmountMinor, Part: l.Part}
	}
	parts := make([]partJSON, len(inv.Parts))
	for i, p := range inv.Parts {
		parts[i] = partJSON{PlanVersion: p.PlanVersion, Active: periodJSON{p.Active.Start, p.Active.End}, Trial: p.Trial}
	}
	if len(parts) == 0 { // issued before invoices had parts: one, the active span
		parts = []partJSON{{PlanVersion: inv.PlanVersion, Active: periodJSON{inv.Active.Start, inv.Active.End}}}
	}
	return fiber.Map{
		"subscription_id":   id,
		"currency":          inv.Currency,
		"plan_version":      inv.PlanVersion,
		"period":            periodJSON{inv.Period.Start, inv.Period.End},
		"active":            periodJSON{inv.Active.Start, inv.Active.End},
		"parts":             parts,
		"lines":             lines,
		"subtotal_micros":   inv.SubtotalMicros,
		"minor_unit_digits": inv.MinorUnitDigits,
		"total_minor":       inv.TotalMinor,
		// Prepaid credit the period's calls burned, taken off the total.
		"credit_applied_minor": inv.CreditAppliedMinor,
		"amount_due_minor":     inv.AmountDueMinor(),
		"preview":              inv.Preview,
		"as_of":                inv.AsOf,
	}
}
