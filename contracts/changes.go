package contracts

import (
	"context"
	"errors"
	"time"

	"github.com/agentmarket/agentmarket"
)

// PlanChange is a contract's move from one plan version to another at an
// instant: the old plan rates what happened before At, the new one what
// happens from At (to the millisecond).
type PlanChange struct {
	ContractID  string
	Seq         int // 1 for the contract's first change
	At          time.Time
	FromVersion int
	ToVersion   int
	// OfferID is the private offer the change accepted ("" for none).
	OfferID string
}

// PlanChangeStore persists plan changes and scheduled cancellations
// (contracts/gormstore).
type PlanChangeStore interface {
	// ChangePlan records ch and moves the contract to ch.ToVersion in one
	// transaction, provided the contract is still at ch.FromVersion and has
	// ch.Seq−1 changes; otherwise a Conflict (plan_changed), nothing done.
	ChangePlan(ctx context.Context, ch PlanChange) (*Contract, error)
	// PlanChanges lists a contract's changes in order.
	PlanChanges(ctx context.Context, contractID string) ([]PlanChange, error)
	// SetCancelAt records (at set) or clears (nil) a contract's scheduled
	// cancellation.
	SetCancelAt(ctx context.Context, id string, cancelAt *time.Time, at time.Time) (*Contract, error)
	// DueCancellations lists the contracts not canceled whose scheduled
	// cancellation is at or before now, by id.
	DueCancellations(ctx context.Context, now time.Time) ([]Contract, error)
	// SetContractTags replaces a contract's cost allocation tags.
	SetContractTags(ctx context.Context, id string, tags agentmarket.Tags, at time.Time) (*Contract, error)
	// SetContractFallbacks replaces a contract's fallback listings, in
	// order (nil: none).
	SetContractFallbacks(ctx context.Context, id string, listingIDs []string, at time.Time) (*Contract, error)
}

// ChangePlanInput is the plan a buyer switches a contract to: the
// listing's current public plan version, or a private offer made to the
// buyer's org on the same listing.
type ChangePlanInput struct {
	PlanVersion int    `json:"plan_version"`
	OfferID     string `json:"offer_id"`
}

// Validate reports every broken rule.
func (in ChangePlanInput) Validate() error {
	var fe agentmarket.Fields
	switch {
	case in.PlanVersion == 0 && in.OfferID == "":
		fe.Add("plan_version", "required", "give plan_version (the listing's current plan) or offer_id (a private offer to your org)")
	case in.PlanVersion != 0 && in.OfferID != "":
		fe.Add("offer_id", "exclusive", "give plan_version or offer_id, not both")
	case in.PlanVersion < 0:
		fe.Add("plan_version", "positive", "plan_version must be 1 or more")
	}
	return fe.Err("invalid_plan_change", "the plan change is not valid")
}

// ChangePlan switches the actor's contract to another plan from now on:
// the fee of each plan is charged for its part of the billing period, by
// the second; usage is rated by the plan in force when it happened; the
// month has one invoice. The target is the listing's current public plan
// version or a private offer made to the org on the same listing (which is
// then accepted). Only an active or past-due contract changes plan (not in
// a trial: a trial ends first), to a plan in the same currency, at most
// once per calendar month (PlanChangeRefused: the rule the pages show).
func (s *Subscriptions) ChangePlan(ctx context.Context, actor agentmarket.Actor, id string, in ChangePlanInput) (*Contract, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	c, err := s.Get(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	if err := planChangeStatus(c); err != nil {
		return nil, err
	}
	to := in.PlanVersion
	if in.OfferID != "" {
		if s.Offers == nil {
			return nil, agentmarket.Errorf(agentmarket.NotFound, "offer_not_found", "no offer %q", in.OfferID)
		}
		o, err := s.Offers.OfferTerms(ctx, actor, in.OfferID)
		if err != nil {
			return nil, err
		}
		if o.ListingID != c.ListingID {
			var fe agentmarket.Fields
			fe.Add("offer_id", "other_listing", "offer %q is for another listing", in.OfferID)
			return nil, fe.Err("invalid_plan_change", "the plan change is not valid")
		}
		to = o.PlanVersion
	} else {
		terms, err := s.Listings.ListingTerms(ctx, actor, c.ListingID)
		if err != nil {
			return nil, err
		}
		if to != terms.PlanVersion {
			var fe agentmarket.Fields
			fe.Add("plan_version", "not_current", "plan_version must be the listing's current plan, %d", terms.PlanVersion)
			return nil, fe.Err("invalid_plan_change", "the plan change is not valid")
		}
	}
	if err := s.PlanChangeRefused(ctx, c, to); err != nil {
		return nil, err
	}
	changes, err := s.Changes.PlanChanges(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	now := s.Clock.Now()
	ch := PlanChange{ContractID: c.ID, Seq: len(changes) + 1, At: now.UTC().Truncate(time.Millisecond), FromVersion: c.PlanVersion,
		ToVersion: to, OfferID: in.OfferID}
	if s.Billing != nil {
		if err := s.Billing.ChangePlan(ctx, c, ch); err != nil {
			return nil, err
		}
	}
	before := c
	if c, err = s.Changes.ChangePlan(ctx, ch); err != nil {
		return nil, err
	}
	audited := s.auditContract(ctx, actor, "subscription.plan_change", before, c)
	if in.OfferID != "" {
		if err := s.Offers.AcceptOffer(ctx, in.OfferID, c.ID); err != nil {
			return nil, errors.Join(err, audited)
		}
	}
	if audited != nil {
		return nil, audited
	}
	return c, nil
}

// PlanChangeRefused says why contract c cannot change to plan version to
// now, as ChangePlan would refuse it (a Conflict naming the rule), or nil
// when it can: the pages offer a change only when this is nil, and show
// its message otherwise.
func (s *Subscriptions) PlanChangeRefused(ctx context.Context, c *Contract, to int) error {
	if err := planChangeStatus(c); err != nil {
		return err
	}
	if to == c.PlanVersion {
		return agentmarket.Errorf(agentmarket.Conflict, "same_plan", "the subscription is on plan version %d already", to)
	}
	changes, err := s.Changes.PlanChanges(ctx, c.ID)
	if err != nil {
		return err
	}
	now := s.Clock.Now().UTC()
	if n := len(changes); n > 0 && sameMonth(changes[n-1].At, now) {
		next := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		return agentmarket.Errorf(agentmarket.Conflict, "plan_changed_this_period",
			"the subscription changed plan on %s already: one change per calendar month, the next from %s",
			changes[n-1].At.Format("2006-01-02"), next.Format("2006-01-02"))
	}
	if pc, ok := s.Billing.(PlanChangeChecker); ok {
		return pc.CanChangePlan(ctx, c, to)
	}
	return nil
}

// PlanChangeChecker is billing's own rule on a plan change (the same
// currency): PlanChangeRefused asks it, when the billing hooks have one,
// so that the pages refuse what the change would.
type PlanChangeChecker interface {
	CanChangePlan(ctx context.Context, c *Contract, to int) error
}

func planChangeStatus(c *Contract) error {
	if c.Status != ContractActive && c.Status != ContractPastDue {
		return agentmarket.Errorf(agentmarket.Conflict, "plan_change_refused", "a %s subscription cannot change plan", c.Status)
	}
	return nil
}

func sameMonth(a, b time.Time) bool {
	a, b = a.UTC(), b.UTC()
	return a.Year() == b.Year() && a.Month() == b.Month()
}

// CancelAtPeriodEnd schedules the actor's contract to end at the end of
// the current billing period (the calendar month, UTC), or (cancel false)
// takes that back. Calls go on until then; billing charges the period in
// full. A contract in trial stops with its trial instead
// (SetCancelAtTrialEnd).
func (s *Subscriptions) CancelAtPeriodEnd(ctx context.Context, actor agentmarket.Actor, id string, cancel bool) (*Contract, error) {
	c, err := s.Get(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	switch c.Status {
	case ContractCanceled:
		return nil, agentmarket.Errorf(agentmarket.Conflict, "subscription_canceled", "subscription %q is canceled", id)
	case ContractTrialing:
		return nil, agentmarket.Errorf(agentmarket.Conflict, "in_trial", "subscription %q is in a trial: choose to stop when it ends (cancel_at_trial_end)", id)
	}
	now := s.Clock.Now()
	var at *time.Time
	if cancel {
		end := time.Date(now.UTC().Year(), now.UTC().Month()+1, 1, 0, 0, 0, 0, time.UTC)
		at = &end
	}
	if (at == nil) == (c.CancelAt == nil) && (at == nil || at.Equal(*c.CancelAt)) {
		return c, nil
	}
	if s.Billing != nil {
		next := *c
		next.CancelAt = at
		if err := s.Billing.ScheduleEnd(ctx, &next); err != nil {
			return nil, err
		}
	}
	after, err := s.Changes.SetCancelAt(ctx, id, at, now)
	return s.recordContract(ctx, actor, "subscription.cancel_at_period_end", c, after, err)
}

// CancelScheduled cancels a contract whose scheduled cancellation has come,
// at that instant (not when this runs), and revokes the invoke right;
// billing calls it (and takes care of the provider). A contract canceled
// already, or not due, is returned as it is.
func (s *Subscriptions) CancelScheduled(ctx context.Context, id string) (*Contract, error) {
	c, err := s.Store.GetContract(ctx, id)
	if err != nil || c.Status == ContractCanceled || c.CancelAt == nil || s.Clock.Now().Before(*c.CancelAt) {
		return c, err
	}
	before := c
	if c, err = s.Store.SetContractStatus(ctx, id, ContractCanceled, *c.CancelAt, nil, []Rule{InvokeRule(c.BuyerOrgID, c.ListingID)}); err != nil {
		return nil, err
	}
	audited := s.auditContract(ctx, agentmarket.Actor{}, "subscription.cancel", before, c)
	if err := errors.Join(s.Policies.Reload(ctx), audited); err != nil {
		return nil, err
	}
	return c, nil
}
