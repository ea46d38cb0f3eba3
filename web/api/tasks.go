package api

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

type budgetsJSON struct {
	RequestTimeoutMs int64 `json:"request_timeout_ms"`
	TaskTimeoutMs    int64 `json:"task_timeout_ms"`
	MaxPauseMs       int64 `json:"max_pause_ms"`
}

func budgetsView(b contracts.TimeBudgets) budgetsJSON {
	return budgetsJSON{b.RequestTimeout.Milliseconds(), b.TaskTimeout.Milliseconds(), b.MaxPause.Milliseconds()}
}

func (s *Server) updateSubscription(c *fiber.Ctx) error {
	var in struct {
		Budgets           *contracts.BudgetsInput `json:"budgets"`
		CancelAtTrialEnd  *bool                   `json:"cancel_at_trial_end"`
		CancelAtPeriodEnd *bool                   `json:"cancel_at_period_end"`
		AlertThresholds   *[]int                  `json:"alert_thresholds"`
		Tags              *map[string]string      `json:"tags"`
		contracts.LimitsInput
	}
	if err := decode(c, &in); err != nil {
		return err
	}
	ct, err := s.Subscriptions.SetBudgets(c.UserContext(), actorOf(c), c.Params("id"), in.Budgets)
	if err != nil {
		return err
	}
	if ct, err = s.Subscriptions.SetLimits(c.UserContext(), actorOf(c), ct.ID, in.LimitsInput); err != nil {
		return err
	}
	if in.CancelAtTrialEnd != nil {
		if ct, err = s.Subscriptions.SetCancelAtTrialEnd(c.UserContext(), actorOf(c), ct.ID, *in.CancelAtTrialEnd); err != nil {
			return err
		}
	}
	if in.AlertThresholds != nil && s.Alerts != nil {
		if err := s.Alerts.SetBudgetThresholds(c.UserContext(), actorOf(c), contracts.BudgetSubscription, ct.ID, *in.AlertThresholds); err != nil {
			return err
		}
		if ct, err = s.Subscriptions.Get(c.UserContext(), actorOf(c), ct.ID); err != nil {
			return err
		}
	}
	if in.Tags != nil {
		if ct, err = s.Subscriptions.SetTags(c.UserContext(), actorOf(c), ct.ID, *in.Tags); err != nil {
			return err
		}
	}
	if in.CancelAtPeriodEnd != nil {
		if ct, err = s.Subscriptions.CancelAtPeriodEnd(c.UserContext(), actorOf(c), ct.ID, *in.CancelAtPeriodEnd); err != nil {
			return err
		}
	}
	return c.JSON(s.subscriptionView(ct))
}

type taskEventJSON struct {
	Kind    string    `json:"kind"`
	State   string    `json:"state,omitempty"`
	At      time.Time `json:"at"`
	Actor   string    `json:"actor,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	TraceID string    `json:"trace_id,omitempty"`
}

type taskJSON struct {
	ListingID       string          `json:"listing_id"`
	TaskID          string          `json:"task_id"`
	ContextID       string          `json:"context_id"`
	OrgID           string          `json:"org_id"`
	ContractID      string          `json:"contract_id"`
	ParentListingID string          `json:"parent_listing_id,omitempty"`
	ParentTaskID    string          `json:"parent_task_id,omitempty"`
	CreatedAt       time.Time       `json:"created_at"`
	DeadlineAt      *time.Time      `json:"deadline_at"`
	PausedSince     *time.Time      `json:"paused_since"`
	PauseCancelAt   *time.Time      `json:"pause_cancel_at"`
	EndedAt         *time.Time      `json:"ended_at"`
	StalledSince    *time.Time      `json:"stalled_since"`
	Events          []taskEventJSON `json:"events"`
}

func (s *Server) getTask(c *fiber.Ctx) error {
	r, err := s.Tasks.Task(c.UserContext(), actorOf(c), c.Params("listing"), c.Params("task"))
	if err != nil {
		return err
	}
	out := taskJSON{ListingID: r.ListingID, TaskID: r.TaskID, ContextID: r.ContextID, OrgID: r.OrgID, ContractID: r.ContractID,
		ParentListingID: r.ParentListingID, ParentTaskID: r.ParentTaskID, CreatedAt: r.CreatedAt, DeadlineAt: r.DeadlineAt,
		PausedSince: r.PausedSince, PauseCancelAt: r.PauseCancelAt, EndedAt: r.EndedAt, StalledSince: r.StalledSince, Events: []taskEventJSON{}}
	for _, e := range r.Events {
		out.Events = append(out.Events, taskEventJSON{Kind: string(e.Kind), State: e.State, At: e.At, Actor: e.Actor, Reason: e.Reason, TraceID: e.TraceID})
	}
	return c.JSON(out)
}

type deliveryJSON struct {
	ID            string     `json:"id"`
	ListingID     string     `json:"listing_id"`
	TaskID        string     `json:"task_id"`
	ConfigID      string     `json:"config_id"`
	Status        string     `json:"status"`
	SupersededBy  string     `json:"superseded_by"`
	Covers        int        `json:"covers"`
	Attempts      int        `json:"attempts"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	LastStatus    int        `json:"last_http_status"`
	LastError     string     `json:"last_error"`
	CreatedAt     time.Time  `json:"created_at"`
	DeliveredAt   *time.Time `json:"delivered_at"`
}

func (s *Server) listDeliveries(c *fiber.Ctx) error {
	var fe agentmarket.Fields
	limit := queryInt(c, &fe, "limit")
	if err := fe.Err("invalid_query", "the delivery query is not valid"); err != nil {
		return err
	}
	ds, err := s.Tasks.Deliveries(c.UserContext(), actorOf(c), contracts.DeliveryQuery{
		Status: contracts.DeliveryStatus(c.Query("status")), TaskID: c.Query("task_id"), Limit: int(limit)})
	if err != nil {
		return err
	}
	out := make([]deliveryJSON, len(ds))
	for i, d := range ds {
		out[i] = deliveryJSON{ID: d.ID, ListingID: d.ListingID, TaskID: d.TaskID, ConfigID: d.ConfigID, Status: string(d.Status),
			SupersededBy: d.SupersededBy, Covers: d.Covers, Attempts: d.Attempts, LastStatus: d.LastStatus, LastError: d.LastError, CreatedAt: d.CreatedAt, DeliveredAt: d.DeliveredAt}
		if d.Status == contracts.DeliveryPending {
			at := d.NextAttemptAt
			out[i].NextAttemptAt = &at
		}
	}
	return c.JSON(fiber.Map{"items": out})
}

func (s *Server) retryDelivery(c *fiber.Ctx) error {
	if err := s.Tasks.RetryDelivery(c.UserContext(), actorOf(c), c.Params("id")); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusAccepted)
}
