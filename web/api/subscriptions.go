package api

import (
	"encoding/csv"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/metering"
)

type subscriptionJSON struct {
	ID                  string            `json:"id"`
	ListingID           string            `json:"listing_id"`
	BuyerOrgID          string            `json:"buyer_org_id"`
	SellerOrgID         string            `json:"seller_org_id"`
	PlanVersion         int               `json:"plan_version"`
	Status              string            `json:"status"`
	MonthlyBudgetMicros *int64            `json:"monthly_budget_micros"`
	Budgets             budgetsJSON       `json:"budgets"`
	ProxiedCardURL      string            `json:"proxied_card_url"`
	Endpoint            string            `json:"endpoint"`
	CreatedAt           time.Time         `json:"created_at"`
	CanceledAt          *time.Time        `json:"canceled_at"`
	TrialEnd            *time.Time        `json:"trial_end"`
	CancelAtTrialEnd    bool              `json:"cancel_at_trial_end"`
	OfferID             string            `json:"offer_id,omitempty"`
	CancelAt            *time.Time        `json:"cancel_at"`
	AlertThresholds     []int             `json:"alert_thresholds"`
	Tags                map[string]string `json:"tags"`
	// RateLimits and SessionCaps: the subscription's (docs/limits.md).
	RateLimits  agentmarket.RateLimits `json:"rate_limits"`
	SessionCaps contracts.SessionCaps  `json:"session_caps"`
	// Fallbacks are the listings a new task goes to, in order, when this
	// one's agent cannot take it (docs/routing.md, Fallback).
	Fallbacks []string `json:"fallbacks"`
}

func (s *Server) subscriptionView(c *contracts.Contract) subscriptionJSON {
	endpoint := strings.TrimRight(s.PublicMeterURL, "/") + "/a2a/" + c.ListingID
	return subscriptionJSON{ID: c.ID, ListingID: c.ListingID, BuyerOrgID: c.BuyerOrgID, SellerOrgID: c.SellerOrgID,
		PlanVersion: c.PlanVersion, Status: string(c.Status), MonthlyBudgetMicros: c.MonthlyBudgetMicros, Budgets: budgetsView(c.Budgets),
		ProxiedCardURL: endpoint + "/.well-known/agent-card.json", Endpoint: endpoint, CreatedAt: c.CreatedAt, CanceledAt: c.CanceledAt,
		TrialEnd: c.TrialEnd, CancelAtTrialEnd: c.CancelAtTrialEnd, OfferID: c.OfferID,
		CancelAt: c.CancelAt, AlertThresholds: c.AlertThresholds, Tags: c.Tags.Map(), RateLimits: c.RateLimits, SessionCaps: c.SessionCaps,
		Fallbacks: nonNil(c.Fallbacks)}
}

// fallbacksJSON is a subscription's fallbacks and the listings it may
// name (those sharing a skill tag with its own first).
type fallbacksJSON struct {
	SubscriptionID string                        `json:"subscription_id"`
	Fallbacks      []string                      `json:"fallbacks"`
	Candidates     []contracts.FallbackCandidate `json:"candidates"`
}

func (s *Server) fallbacksView(c *fiber.Ctx, id string) error {
	ct, err := s.Subscriptions.Get(c.UserContext(), actorOf(c), id)
	if err != nil {
		return err
	}
	cands, err := s.Subscriptions.FallbackCandidates(c.UserContext(), actorOf(c), id)
	if err != nil {
		return err
	}
	return c.JSON(fallbacksJSON{SubscriptionID: ct.ID, Fallbacks: nonNil(ct.Fallbacks), Candidates: nonNil(cands)})
}

func (s *Server) getFallbacks(c *fiber.Ctx) error { return s.fallbacksView(c, c.Params("id")) }

// setFallbacks replaces a subscription's fallbacks.
func (s *Server) setFallbacks(c *fiber.Ctx) error {
	var in struct {
		ListingIDs []string `json:"listing_ids"`
	}
	if err := decode(c, &in); err != nil {
		return err
	}
	if _, err := s.Subscriptions.SetFallbacks(c.UserContext(), actorOf(c), c.Params("id"), in.ListingIDs); err != nil {
		return err
	}
	return s.fallbacksView(c, c.Params("id"))
}

func (s *Server) subscribe(c *fiber.Ctx) error {
	var in contracts.SubscribeInput
	if err := decode(c, &in); err != nil {
		return err
	}
	ct, err := s.Subscriptions.Subscribe(c.UserContext(), actorOf(c), in)
	if err != nil {
		return err
	}
	c.Location("/api/v1/subscriptions/" + ct.ID)
	return c.Status(fiber.StatusCreated).JSON(s.subscriptionView(ct))
}

func (s *Server) listSubscriptions(c *fiber.Ctx) error {
	cs, err := s.Subscriptions.List(c.UserContext(), actorOf(c))
	if err != nil {
		return err
	}
	out := make([]subscriptionJSON, len(cs))
	for i := range cs {
		out[i] = s.subscriptionView(&cs[i])
	}
	return c.JSON(fiber.Map{"items": out})
}

func (s *Server) getSubscription(c *fiber.Ctx) error {
	ct, err := s.Subscriptions.Get(c.UserContext(), actorOf(c), c.Params("id"))
	if err != nil {
		return err
	}
	return c.JSON(s.subscriptionView(ct))
}

// cancelSubscription ends a subscription now, or (at=period_end) at the
// end of the billing period.
func (s *Server) cancelSubscription(c *fiber.Ctx) error {
	switch c.Query("at") {
	case "", "now":
	case "period_end":
		ct, err := s.Subscriptions.CancelAtPeriodEnd(c.UserContext(), actorOf(c), c.Params("id"), true)
		if err != nil {
			return err
		}
		return c.JSON(s.subscriptionView(ct))
	default:
		var fe agentmarket.Fields
		fe.Add("at", "enum", "at must be now or period_end")
		return fe.Err("invalid_cancel", "the cancellation is not valid")
	}
	ct, err := s.Subscriptions.Cancel(c.UserContext(), actorOf(c), c.Params("id"))
	if err != nil {
		return err
	}
	return c.JSON(s.subscriptionView(ct))
}

// changePlan switches a subscription to another plan from now on.
func (s *Server) changePlan(c *fiber.Ctx) error {
	var in contracts.ChangePlanInput
	if err := decode(c, &in); err != nil {
		return err
	}
	ct, err := s.Subscriptions.ChangePlan(c.UserContext(), actorOf(c), c.Params("id"), in)
	if err != nil {
		return err
	}
	return c.JSON(s.subscriptionView(ct))
}

type totalJSON struct {
	Key string `json:"key"`
	// Name is the display name of the key, grouped by listing (its
	// card's name; by task, the task's listing's), seller or buyer (the
	// org's name), when it can be found.
	Name string `json:"name,omitempty"`
	// The task's fields, grouped by task.
	ListingID      string  `json:"listing_id,omitempty"`
	TaskID         *string `json:"task_id,omitempty"`
	ContextID      string  `json:"context_id,omitempty"`
	Calls          int64   `json:"calls"`
	Tasks          int64   `json:"tasks"`
	InputTokens    int64   `json:"input_tokens"`
	OutputTokens   int64   `json:"output_tokens"`
	ComputeMs      int64   `json:"compute_ms"`
	CostMicros     int64   `json:"cost_micros"`
	EstimatedCalls int64   `json:"estimated_calls"`
}

// parseTime accepts RFC 3339 times and plain dates (UTC midnight).
func parseTime(fe *agentmarket.Fields, name, v string) time.Time {
	if v == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		t, err = time.Parse("2006-01-02", v)
	}
	if err != nil || !billing.InRange(t) {
		fe.Add(name, "format", "%s must be an RFC 3339 time (2026-11-30T00:00:00Z) or a date (2026-11-30), from 1970 to 2106", name)
		return time.Time{}
	}
	return t.UTC()
}

func (s *Server) usage(c *fiber.Ctx) error {
	var fe agentmarket.Fields
	in := metering.ReportInput{
		Scope:     metering.Scope(c.Query("scope")),
		GroupBy:   metering.GroupBy(c.Query("group_by", string(metering.ByListing))),
		From:      parseTime(&fe, "from", c.Query("from")),
		To:        parseTime(&fe, "to", c.Query("to")),
		ListingID: c.Query("listing_id"),
		APIKeyID:  c.Query("api_key_id"),
	}
	if err := fe.Err("invalid_usage_query", "the usage query is not valid"); err != nil {
		return err
	}
	q, totals, err := s.Usage.Totals(c.UserContext(), actorOf(c), in)
	if err != nil {
		return err
	}
	items := make([]totalJSON, len(totals))
	names := s.namer(c)
	for i, t := range totals {
		items[i] = totalJSON{Key: t.Key, Calls: t.Calls, Tasks: t.Tasks, InputTokens: t.InputTokens, OutputTokens: t.OutputTokens,
			ComputeMs: t.ComputeMs, CostMicros: t.CostMicros, EstimatedCalls: t.Estimated}
		switch q.GroupBy {
		case metering.ByListing:
			items[i].Name = names.listing(t.Key)
		case metering.BySeller, metering.ByBuyer:
			items[i].Name = names.org(t.Key)
		case metering.ByTask:
			task := t.Task.TaskID
			items[i].ListingID, items[i].TaskID, items[i].ContextID = t.Task.ListingID, &task, t.Task.ContextID
			items[i].Name = names.listing(t.Task.ListingID)
		}
	}
	if strings.Contains(c.Get(fiber.HeaderAccept), "text/csv") {
		c.Set(fiber.HeaderContentType, "text/csv; charset=utf-8")
		c.Set(fiber.HeaderContentDisposition, `attachment; filename="usage-`+string(q.GroupBy)+`.csv"`)
		w := csv.NewWriter(c.Response().BodyWriter())
		w.Write([]string{string(q.GroupBy), "calls", "tasks", "input_tokens", "output_tokens", "compute_ms", "cost_micros", "estimated_calls"})
		for _, t := range items {
			w.Write([]string{agentmarket.CSVCell(t.Key), itoa(t.Calls), itoa(t.Tasks), itoa(t.InputTokens), itoa(t.OutputTokens), itoa(t.ComputeMs), itoa(t.CostMicros), itoa(t.EstimatedCalls)})
		}
		w.Flush()
		return w.Error()
	}
	return c.JSON(fiber.Map{"group_by": q.GroupBy, "from": q.From, "to": q.To, "items": items})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// namer finds display names for one answer, each once.
type namer struct {
	s     *Server
	c     *fiber.Ctx
	names map[string]string
}

func (s *Server) namer(c *fiber.Ctx) *namer { return &namer{s: s, c: c, names: map[string]string{}} }

// listing is the listing's card name as the caller may see the listing;
// "" when it cannot (no longer listed, say).
func (n *namer) listing(id string) string {
	if v, ok := n.names[id]; ok {
		return v
	}
	v := ""
	if l, err := n.s.Listings.Get(n.c.UserContext(), actorOf(n.c), id); err == nil && l.Card != nil {
		v = l.Card.Name
	}
	n.names[id] = v
	return v
}

// org is the org's name.
func (n *namer) org(id string) string {
	if v, ok := n.names[id]; ok {
		return v
	}
	v := ""
	if o, err := n.s.Accounts.Store.GetOrg(n.c.UserContext(), id); err == nil {
		v = o.Name
	}
	n.names[id] = v
	return v
}
