package api

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

type alertJSON struct {
	ID           string               `json:"id"`
	BudgetKind   contracts.BudgetKind `json:"budget_kind"`
	BudgetID     string               `json:"budget_id"`
	Percent      int                  `json:"threshold_percent"`
	BudgetMicros int64                `json:"monthly_budget_micros"`
	SpentMicros  int64                `json:"spent_micros"`
	CreatedAt    time.Time            `json:"created_at"`
}

func (s *Server) alerts() error {
	if s.Alerts == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "alerts_not_available", "this marketplace keeps no spend alerts")
	}
	return nil
}

// listAlerts lists the org's spend alerts of a month (period=YYYY-MM,
// default the current one).
func (s *Server) listAlerts(c *fiber.Ctx) error {
	if err := s.alerts(); err != nil {
		return err
	}
	period, err := s.monthParam(c, "invalid_alerts_query")
	if err != nil {
		return err
	}
	list, err := s.Alerts.List(c.UserContext(), actorOf(c), period.Start)
	if err != nil {
		return err
	}
	out := make([]alertJSON, len(list))
	for i, a := range list {
		out[i] = alertJSON{ID: a.ID, BudgetKind: a.Kind, BudgetID: a.Subject, Percent: a.Percent, BudgetMicros: a.BudgetMicros,
			SpentMicros: a.SpentMicros, CreatedAt: a.CreatedAt}
	}
	return c.JSON(fiber.Map{"period": periodJSON{period.Start, period.End}, "items": out})
}

type alertSettingsJSON struct {
	Thresholds        []int  `json:"thresholds"`
	DefaultThresholds bool   `json:"default_thresholds"`
	WebhookURL        string `json:"webhook_url,omitempty"`
}

func alertSettingsView(st contracts.AlertSettings) alertSettingsJSON {
	if st.Thresholds == nil {
		return alertSettingsJSON{Thresholds: contracts.DefaultAlertThresholds, DefaultThresholds: true, WebhookURL: st.WebhookURL}
	}
	return alertSettingsJSON{Thresholds: st.Thresholds, WebhookURL: st.WebhookURL}
}

func (s *Server) alertSettings(c *fiber.Ctx) error {
	if err := s.alerts(); err != nil {
		return err
	}
	st, err := s.Alerts.Settings(c.UserContext(), actorOf(c))
	if err != nil {
		return err
	}
	return c.JSON(alertSettingsView(st))
}

func (s *Server) setAlertSettings(c *fiber.Ctx) error {
	if err := s.alerts(); err != nil {
		return err
	}
	var in contracts.AlertSettingsInput
	if err := decode(c, &in); err != nil {
		return err
	}
	st, err := s.Alerts.SetSettings(c.UserContext(), actorOf(c), in)
	if err != nil {
		return err
	}
	return c.JSON(alertSettingsView(st))
}
