package billing

import (
	"context"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/metering"
)

// span is a stretch of a contract's stay under one set of terms.
type span struct {
	Period
	version int
	trial   bool
}

// spansOf is how a contract's stay splits by its terms: its free trial
// (until TrialEnd), then paid. stayEnd is when the stay ends (the
// contract's cancellation, or for a preview whatever end is in sight).
func spansOf(c *contracts.Contract, stayEnd time.Time) []span {
	start := c.CreatedAt
	var out []span
	if c.TrialEnd != nil {
		end := *c.TrialEnd
		if stayEnd.Before(end) {
			end = stayEnd
		}
		out = append(out, span{Period: Period{Start: start, End: end}, version: c.PlanVersion, trial: true})
		start = *c.TrialEnd
	}
	if start.Before(stayEnd) {
		out = append(out, span{Period: Period{Start: start, End: stayEnd}, version: c.PlanVersion})
	}
	return out
}

// stayEnd is when a contract's stay ends as far as period can tell: its
// cancellation, the end of its trial when the buyer chose to stop then,
// else the period's end.
func stayEnd(c *contracts.Contract, period Period) time.Time {
	end := period.End
	switch {
	case c.CanceledAt != nil:
		end = *c.CanceledAt
	case c.Status == contracts.ContractTrialing && c.CancelAtTrialEnd && c.TrialEnd != nil:
		end = *c.TrialEnd
	}
	if end.After(period.End) {
		end = period.End
	}
	return end
}

// contractParts are a contract's parts in a period, each with the usage
// metered under its terms: usage is split at the instants the terms
// changed (to the millisecond), the first part's taken from the period's
// start and the last part's up to usageTo (the period's end, or a
// preview's now). ok is false when the contract has no part in the
// period.
func contractParts(ctx context.Context, plans PlanSource, usage metering.Store, c *contracts.Contract, period Period, usageTo time.Time) ([]Part, bool, error) {
	var spans []span
	for _, s := range spansOf(c, stayEnd(c, period)) {
		if s.End.After(period.Start) && s.Start.Before(period.End) && s.End.After(s.Start) {
			spans = append(spans, s)
		}
	}
	if len(spans) == 0 {
		return nil, false, nil
	}
	parts := make([]Part, len(spans))
	for i, s := range spans {
		plan, err := plans.Plan(ctx, c.ListingID, s.version)
		if err != nil {
			return nil, false, err
		}
		from, to := period.Start, usageTo
		if i > 0 {
			from = s.Start
		}
		if i < len(spans)-1 {
			to = spans[i+1].Start
		}
		from, to = clamp(from, period.Start, usageTo), clamp(to, period.Start, usageTo)
		u := Usage{}
		if to.After(from) {
			if u, err = usageIn(ctx, usage, c.ID, Period{Start: from, End: to}); err != nil {
				return nil, false, err
			}
		}
		parts[i] = Part{Plan: *plan, Span: s.Period, Usage: u, Trial: s.trial}
	}
	return parts, true, nil
}

func clamp(t, lo, hi time.Time) time.Time {
	if t.Before(lo) {
		return lo
	}
	if t.After(hi) {
		return hi
	}
	return t
}

// previewContract rates a contract's open period as of now.
func previewContract(ctx context.Context, plans PlanSource, usage metering.Store, c *contracts.Contract, now time.Time) (*Invoice, error) {
	period := MonthOf(now)
	if c.CreatedAt.After(now) {
		var fe agentmarket.Fields
		fe.Add("contract_start", "not_started", "the contract starts after now: there is nothing to preview")
		return nil, fe.Err("invalid_preview_input", "the invoice preview cannot be rated")
	}
	parts, ok, err := contractParts(ctx, plans, usage, c, period, now.Add(time.Millisecond))
	if err != nil {
		return nil, err
	}
	if !ok {
		var fe agentmarket.Fields
		fe.Add("contract_end", "outside_period", "the contract is not active in the period")
		return nil, fe.Err("invalid_preview_input", "the invoice preview cannot be rated")
	}
	return PreviewParts(period, parts, now)
}
