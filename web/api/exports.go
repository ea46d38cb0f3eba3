package api

import (
	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
)

// focusExport answers the caller's org's cost and usage rows of a month
// (period=YYYY-MM, default the current one) as a FOCUS 1.2 CSV: one row
// per invoice line, or per task and tags of a usage line, adding up to
// the org's invoices to the micro.
func (s *Server) focusExport(c *fiber.Ctx) error {
	if s.Focus == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "route_not_found", "no route %s %s", c.Method(), c.Path())
	}
	if f := c.Query("format", "csv"); f != "csv" {
		var fe agentmarket.Fields
		fe.Add("format", "one_of", "format must be csv")
		return fe.Err("invalid_focus_export", "the FOCUS export request is not valid")
	}
	period, err := s.monthParam(c, "invalid_focus_export")
	if err != nil {
		return err
	}
	actor := actorOf(c)
	rows, err := s.Focus.Rows(c.UserContext(), billing.FocusInput{OrgID: actor.OrgID, Period: period})
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, "text/csv; charset=utf-8")
	c.Set(fiber.HeaderContentDisposition, `attachment; filename="focus-`+period.Start.Format("2006-01")+`.csv"`)
	return billing.WriteFocusCSV(c.Response().BodyWriter(), rows)
}
