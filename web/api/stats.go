package api

import (
	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
)

type listingStatsJSON struct {
	Calls                int64  `json:"calls"`
	CompletedTasks       int64  `json:"completed_tasks"`
	Failures             int64  `json:"failures"`
	SendCalls            int64  `json:"send_calls"`
	LatencyP50Ms         int64  `json:"latency_p50_ms"`
	LatencyP95Ms         int64  `json:"latency_p95_ms"`
	Tasks                int64  `json:"tasks"`
	MedianTaskCostMicros int64  `json:"median_task_cost_micros"`
	Currency             string `json:"currency"`
	EstimatedCalls       int64  `json:"estimated_calls"`
}

// listingStats answers what the meter measured on a listing over the last
// 30 days; stats is null below the minimums of buyer orgs and tasks.
func (s *Server) listingStats(c *fiber.Ctx) error {
	if s.Verified == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "route_not_found", "no route %s %s", c.Method(), c.Path())
	}
	l, err := s.Listings.Get(c.UserContext(), actorOf(c), c.Params("id"))
	if err != nil {
		return err
	}
	st, ok, window, err := s.Verified.Listing(c.UserContext(), l.ID)
	if err != nil {
		return err
	}
	var stats *listingStatsJSON
	if ok {
		stats = &listingStatsJSON{Calls: st.Calls, CompletedTasks: st.Completed, Failures: st.Failed, SendCalls: st.Sends,
			LatencyP50Ms: st.LatencyP50Ms, LatencyP95Ms: st.LatencyP95Ms, Tasks: st.Tasks, MedianTaskCostMicros: st.MedianTaskCostMicros,
			Currency: st.Currency, EstimatedCalls: st.EstimatedCalls}
	}
	orgs, tasks := s.Verified.Minimums()
	return c.JSON(fiber.Map{"listing_id": l.ID, "window": periodJSON{window.Start, window.End}, "min_buyer_orgs": orgs, "min_tasks": tasks,
		"stats": stats})
}
