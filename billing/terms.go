package billing

import (
	"context"
	"math/big"
	"slices"
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

// PlanHistory lists a contract's plan changes in order
// (contracts/gormstore implements it).
type PlanHistory interface {
	PlanChanges(ctx context.Context, contractID string) ([]contracts.PlanChange, error)
}

// spansOf is how a contract's stay splits by its terms: by plan version
// (each change starts the next one's span), and the first span's start by
// the free trial (until TrialEnd), then paid. stayEnd is when the stay
// ends (the contract's cancellation, or for a preview whatever end is in
// sight).
func spansOf(c *contracts.Contract, changes []contracts.PlanChange, stayEnd time.Time) []span {
	version := c.PlanVersion
	if len(changes) > 0 {
		version = changes[0].FromVersion
	}
	plans := []span{{Period: Period{Start: c.CreatedAt}, version: version}}
	for _, ch := range changes {
		plans[len(plans)-1].End = ch.At
		plans = append(plans, span{Period: Period{Start: ch.At}, version: ch.ToVersion})
	}
	plans[len(plans)-1].End = stayEnd
	var out []span
	for _, p := range plans {
		if p.End.After(stayEnd) {
			p.End = stayEnd
		}
		if !p.End.After(p.Start) {
			continue
		}
		if te := c.TrialEnd; te != nil && te.After(p.Start) {
			trial := p
			trial.trial = true
			if te.Before(p.End) {
				trial.End, p.Start = *te, *te
				out = append(out, trial)
			} else {
				out = append(out, trial)
				continue
			}
		}
		out = append(out, p)
	}
	// A paid stay's last partial second counts as a whole one (spans'
	// starts are truncated to the second for the fee): a paid stay shorter
	// than a second pays one second, so that stays cycled within seconds
	// cannot avoid the fee. A stay that ends with its trial pays nothing.
	if n := len(out); n > 0 && !out[n-1].trial {
		if t := out[n-1].End.Truncate(time.Second); !t.Equal(out[n-1].End) {
			out[n-1].End = t.Add(time.Second)
		}
	}
	return out
}

// planChanges are the contract's plan changes (none without a history).
func planChanges(ctx context.Context, history PlanHistory, c *contracts.Contract) ([]contracts.PlanChange, error) {
	if history == nil {
		return nil, nil
	}
	return history.PlanChanges(ctx, c.ID)
}

// stayEnd is when a contract's stay ends as far as period can tell: its
// cancellation, the end it is scheduled to have (its trial's, when the
// buyer chose to stop then; the end of a period), else the period's end.
func stayEnd(c *contracts.Contract, period Period) time.Time {
	end := period.End
	switch {
	case c.CanceledAt != nil:
		end = *c.CanceledAt
	case c.EndsAt() != nil:
		end = *c.EndsAt()
	}
	if end.After(period.End) {
		end = period.End
	}
	return end
}

// Stays lists a buyer org's contracts, every stay on every listing
// (contracts.Store's ListContracts): the month's allowance of a listing is
// shared by the org's stays on it.
type Stays interface {
	ListContracts(ctx context.Context, buyerOrgID string) ([]contracts.Contract, error)
}

// terms are what rating a contract's month reads: its plans, its plan
// changes, its usage, and the org's other stays.
type terms struct {
	plans   PlanSource
	history PlanHistory
	usage   metering.Store
	stays   Stays // nil: no other stay is looked for
}

// priorAllowance is how much of the month's allowance the org's stays on
// c's listing that began before c used in period (see the allowance rule
// in rate.go), each rated in turn from what the ones before it used.
//
// It also returns the month's rounding carry: what the earlier stays'
// invoices rounded away (their exact amounts less what they charged, in
// micros), for this stay's total to take over, so that the stays of a
// month are charged the month's exact amount rounded once, however many
// there are (Part.RoundingCarry).
func (t terms) priorAllowance(ctx context.Context, c *contracts.Contract, period Period) (Usage, *big.Rat, error) {
	if t.stays == nil {
		return Usage{}, nil, nil
	}
	list, err := t.stays.ListContracts(ctx, c.BuyerOrgID)
	if err != nil {
		return Usage{}, nil, err
	}
	var earlier []contracts.Contract
	for _, x := range list {
		if x.ListingID != c.ListingID || x.ID == c.ID || !startsBefore(&x, c) {
			continue
		}
		if _, ok := activeIn(&x, period); ok {
			earlier = append(earlier, x)
		}
	}
	slices.SortFunc(earlier, func(a, b contracts.Contract) int {
		if startsBefore(&a, &b) {
			return -1
		}
		return 1
	})
	used := Usage{}
	var carry *big.Rat
	currency := ""
	for i := range earlier {
		parts, _, err := t.partsFrom(ctx, &earlier[i], period, period.End, used, carry)
		if err != nil {
			return Usage{}, nil, err
		}
		if len(parts) == 0 {
			continue
		}
		used = AllowanceUsed(parts)
		if currency != "" && parts[0].Plan.Currency != currency {
			carry = nil // a carry is in one currency
		}
		currency = parts[0].Plan.Currency
		inv, err := RateParts(period, parts)
		if err != nil {
			continue // that stay is refused on its own; it carries nothing
		}
		carry = inv.roundedAway()
	}
	return used, carry, nil
}

// startsBefore orders stays: by start, then by id.
func startsBefore(a, b *contracts.Contract) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.Before(b.CreatedAt)
	}
	return a.ID < b.ID
}

// contractParts are a contract's parts in a period, each with the usage
// metered under its terms (in the window contractWindows gives it). ok is
// false when the contract has no part in the period.
func (t terms) contractParts(ctx context.Context, c *contracts.Contract, period Period, usageTo time.Time) ([]Part, bool, error) {
	parts, _, err := t.partsIn(ctx, c, period, usageTo)
	return parts, len(parts) > 0, err
}

// partsIn are contractParts with the usage window of each part (none
// when the contract has no part in the period); the first part carries
// the allowance the org's earlier stays on the listing used.
func (t terms) partsIn(ctx context.Context, c *contracts.Contract, period Period, usageTo time.Time) ([]Part, []Period, error) {
	prior, carry, err := t.priorAllowance(ctx, c, period)
	if err != nil {
		return nil, nil, err
	}
	return t.partsFrom(ctx, c, period, usageTo, prior, carry)
}

func (t terms) partsFrom(ctx context.Context, c *contracts.Contract, period Period, usageTo time.Time, prior Usage, carry *big.Rat) ([]Part, []Period, error) {
	spans, windows, err := contractWindows(ctx, t.history, c, period, usageTo)
	if err != nil || len(spans) == 0 {
		return nil, nil, err
	}
	parts := make([]Part, len(spans))
	for i, s := range spans {
		plan, err := t.plans.Plan(ctx, c.ListingID, s.version)
		if err != nil {
			return nil, nil, err
		}
		u := Usage{}
		if w := windows[i]; w.End.After(w.Start) {
			if u, err = usageIn(ctx, t.usage, c.ID, w); err != nil {
				return nil, nil, err
			}
		}
		parts[i] = Part{Plan: *plan, Span: s.Period, Usage: u, Trial: s.trial}
	}
	parts[0].AllowanceUsed = prior
	if carry != nil && carry.Sign() != 0 && parts[0].Plan.Currency != "" {
		parts[0].RoundingCarry = carry
	}
	return parts, windows, nil
}

// contractWindows are the spans of a contract's terms in a period and,
// for each, the window of usage rated under it: usage is split at the
// instants the terms changed (to the millisecond), the first span's taken
// from the period's start and the last one's up to usageTo (the period's
// end, or a preview's now). A window may be empty (Start = End).
func contractWindows(ctx context.Context, history PlanHistory, c *contracts.Contract, period Period, usageTo time.Time) ([]span, []Period, error) {
	changes, err := planChanges(ctx, history, c)
	if err != nil {
		return nil, nil, err
	}
	var spans []span
	for _, s := range spansOf(c, changes, stayEnd(c, period)) {
		if s.End.After(period.Start) && s.Start.Before(period.End) && s.End.After(s.Start) {
			spans = append(spans, s)
		}
	}
	windows := make([]Period, len(spans))
	for i, s := range spans {
		from, to := period.Start, usageTo
		if i > 0 {
			from = s.Start
		}
		if i < len(spans)-1 {
			to = spans[i+1].Start
		}
		from, to = clamp(from, period.Start, usageTo), clamp(to, period.Start, usageTo)
		if to.Before(from) {
			to = from
		}
		windows[i] = Period{Start: from, End: to}
	}
	return spans, windows, nil
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
func (t terms) previewContract(ctx context.Context, c *contracts.Contract, now time.Time) (*Invoice, error) {
	period := MonthOf(now)
	if c.CreatedAt.After(now) {
		var fe agentmarket.Fields
		fe.Add("contract_start", "not_started", "the contract starts after now: there is nothing to preview")
		return nil, fe.Err("invalid_preview_input", "the invoice preview cannot be rated")
	}
	parts, ok, err := t.contractParts(ctx, c, period, now.Add(time.Millisecond))
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
