package contracts

import (
	"context"
	"errors"
	"time"

	"github.com/agentmarket/agentmarket"
)

// ContractStatus is where a contract is in its life. Billing drives it
// (paid → active; payment failed → past due, then suspended; subscription
// deleted → canceled); without Stripe a contract is active from the start,
// or in trial when its plan offers one and the buyer org never had one on
// the listing.
type ContractStatus string

const (
	// ContractTrialing: in its free trial (TrialEnd says until when).
	ContractTrialing  ContractStatus = "trialing"
	ContractActive    ContractStatus = "active"
	ContractPastDue   ContractStatus = "past_due"
	ContractSuspended ContractStatus = "suspended"
	ContractCanceled  ContractStatus = "canceled"
)

// Invocable reports whether calls may go through under this status: a past
// due contract is in its grace period and still works.
func (s ContractStatus) Invocable() bool {
	return s == ContractActive || s == ContractPastDue || s == ContractTrialing
}

// Contract is a buyer org's subscription to a listing, at the plan version
// in force when it subscribed (frozen: later price changes do not touch it).
type Contract struct {
	ID          string
	BuyerOrgID  string
	ListingID   string
	SellerOrgID string
	PlanVersion int
	Status      ContractStatus
	// MonthlyBudgetMicros caps what the contract may cost per month; nil
	// means no cap.
	MonthlyBudgetMicros *int64
	CreatedAt           time.Time
	UpdatedAt           time.Time
	CanceledAt          *time.Time
	// PastDueAt is when the contract went past due; the grace period runs
	// from here. Nil unless past due.
	PastDueAt *time.Time
	// Budgets are the buyer's own time limits for this contract's calls
	// and tasks (zero fields: the listing's).
	Budgets TimeBudgets
	// TrialEnd is when the contract's free trial ends: the scheduled end
	// while it is trialing, the actual end (which its usage may have
	// brought forward) once the trial is over. Nil: no trial. Usage before
	// TrialEnd is free; the flat fee runs from it.
	TrialEnd *time.Time
	// CancelAtTrialEnd: the buyer asked to stop when the trial ends
	// instead of converting to paid.
	CancelAtTrialEnd bool
	// OfferID is the private offer the contract accepted ("" for none):
	// PlanVersion is then the offer's private plan.
	OfferID string
	// CancelAt is when the buyer asked the contract to end (the end of the
	// billing period it asked in); nil: not scheduled.
	CancelAt *time.Time
	// AlertThresholds are the budget's own spend alert thresholds, in
	// percent (nil: the org's).
	AlertThresholds []int
	// Tags are the contract's cost allocation tags: the usage rows of its
	// calls carry them, under the calling key's own (which win).
	Tags agentmarket.Tags
	// RateLimits are the subscription's rate limits through the meter,
	// over all the buyer's keys (zero: none).
	RateLimits agentmarket.RateLimits
	// SessionCaps cap each conversation (contextId) under the
	// subscription (zero: none).
	SessionCaps SessionCaps
	// Fallbacks are the listings, in order, the meter sends a new task to
	// when the contract's own agent cannot take it (fallback.go); each is
	// one the buyer org also subscribes to. Nil: none.
	Fallbacks []string
}

// EndsAt is when the contract will end as things stand: its trial's end
// when the buyer chose to stop then, its scheduled cancellation, or nil.
func (c *Contract) EndsAt() *time.Time {
	if c.Status == ContractTrialing && c.CancelAtTrialEnd {
		return c.TrialEnd
	}
	return c.CancelAt
}

// InTrialAt reports whether t falls in the contract's trial.
func (c *Contract) InTrialAt(t time.Time) bool {
	return c.TrialEnd != nil && !t.Before(c.CreatedAt) && t.Before(*c.TrialEnd)
}

// ListingTerms is what a subscription needs to know of a listing.
type ListingTerms struct {
	ID          string
	SellerOrgID string
	Published   bool
	PlanVersion int
	// TrialDays is the trial the plan version offers (0: none).
	TrialDays int64
	// Name is the listing's display name; SkillTags its card's skills'
	// tags, sorted: what a buyer choosing fallbacks is shown.
	Name      string
	SkillTags []string
}

// ListingSource looks listings up for subscriptions (the catalog, wired
// in cmd/).
type ListingSource interface {
	ListingTerms(ctx context.Context, actor agentmarket.Actor, listingID string) (*ListingTerms, error)
}

// ContractStore persists contracts; grants and revocations of invoke
// rights are written in the same transaction as the contract change.
type ContractStore interface {
	CreateContract(ctx context.Context, c *Contract, grant []Rule) error
	GetContract(ctx context.Context, id string) (*Contract, error)
	// OpenContract returns the buyer's contract for a listing that is not
	// canceled, or NotFound.
	OpenContract(ctx context.Context, buyerOrgID, listingID string) (*Contract, error)
	ListContracts(ctx context.Context, buyerOrgID string) ([]Contract, error)
	// SetContractStatus changes the status at time at, granting and
	// revoking rules in the same transaction (nil: none).
	SetContractStatus(ctx context.Context, id string, status ContractStatus, at time.Time, grant, revoke []Rule) (*Contract, error)
	// OverdueContracts returns the past-due contracts that went past due
	// at or before cutoff.
	OverdueContracts(ctx context.Context, cutoff time.Time) ([]Contract, error)
	// SetContractBudgets replaces the contract's time budgets.
	SetContractBudgets(ctx context.Context, id string, b TimeBudgets, at time.Time) (*Contract, error)
	// SetContractLimits replaces the contract's rate limits and session
	// caps.
	SetContractLimits(ctx context.Context, id string, l agentmarket.RateLimits, caps SessionCaps, at time.Time) (*Contract, error)

	// HadTrial reports whether the buyer org ever had a contract to the
	// listing with a trial (canceled ones included).
	HadTrial(ctx context.Context, buyerOrgID, listingID string) (bool, error)
	// TrialingContracts lists the contracts in trial, by id.
	TrialingContracts(ctx context.Context) ([]Contract, error)
	// EndTrial ends a trialing contract's trial at end (TrialEnd becomes
	// end) and moves it to status (active, or canceled at end), revoking
	// rules in the same transaction; at is the time of the change. A
	// contract no longer trialing is a Conflict (code trial_over) and is
	// left as it is, so two sweepers end a trial once.
	EndTrial(ctx context.Context, id string, end time.Time, status ContractStatus, at time.Time, revoke []Rule) (*Contract, error)
	// SetCancelAtTrialEnd records the buyer's choice; a contract not
	// trialing is a Conflict (code trial_over).
	SetCancelAtTrialEnd(ctx context.Context, id string, cancel bool, at time.Time) (*Contract, error)
}

// PolicyReloader makes a policy change visible at once in this process
// (other processes see it within their reload interval).
type PolicyReloader interface {
	Reload(ctx context.Context) error
}

// InvokeRule is the casbin rule that lets an org invoke a listing.
func InvokeRule(orgID, listingID string) Rule {
	return Rule{PType: "p", V: [6]string{OrgSubject(orgID), "*", ListingObject(listingID), ActInvoke}}
}

// OrgSubject is the casbin subject of an org's invoke rights.
func OrgSubject(orgID string) string { return "org:" + orgID }

// ListingObject is the casbin object of a listing.
func ListingObject(listingID string) string { return "listing:" + listingID }

// ActInvoke is the action of calling a listing's agent through the meter.
const ActInvoke = "invoke"

// BillingHooks tell billing (the payment provider) of subscriptions made,
// changed and canceled. Each is called before the change is stored, so a
// failure leaves the contract as it was.
type BillingHooks interface {
	Attach(ctx context.Context, c *Contract) error
	Detach(ctx context.Context, c *Contract) error
	// ScheduleEnd tells the provider when the subscription ends by itself
	// (c.EndsAt: the trial's end, a cancellation at the period's end), or
	// that it no longer does.
	ScheduleEnd(ctx context.Context, c *Contract) error
	// ChangePlan moves the subscription to another plan version at ch.At
	// (the provider prorates the fee by the second, and the usage until
	// then is billed at the old plan); it refuses a plan it cannot bill in
	// the contract's currency.
	ChangePlan(ctx context.Context, c *Contract, ch PlanChange) error
}

// Subscriptions is the subscription service.
type Subscriptions struct {
	Store    ContractStore
	Listings ListingSource
	Policies PolicyReloader
	Clock    agentmarket.Clock
	// Billing, when set, attaches every new contract to the payment
	// provider; a contract it cannot attach is canceled at once.
	Billing BillingHooks
	// Offers are the private offers buyers accept (nil: none).
	Offers OfferSource
	// Changes keeps plan changes and scheduled cancellations.
	Changes PlanChangeStore
	// Audit records every change of a contract (nil: none is).
	Audit agentmarket.ChangeRecorder
}

// SubscribeInput is a buyer's request to subscribe.
type SubscribeInput struct {
	ListingID           string `json:"listing_id"`
	MonthlyBudgetMicros *int64 `json:"monthly_budget_micros"`
	// Budgets are the contract's own time limits (optional).
	Budgets *BudgetsInput `json:"budgets"`
	// CancelAtTrialEnd stops the contract when its trial ends instead of
	// converting it to paid; it is refused when the subscription gets no
	// trial.
	CancelAtTrialEnd bool `json:"cancel_at_trial_end"`
	// AlertThresholds are the budget's own spend alert thresholds (nil:
	// the org's).
	AlertThresholds []int `json:"alert_thresholds"`
	// Tags are the contract's cost allocation tags.
	Tags map[string]string `json:"tags"`
	tags agentmarket.Tags
}

// checkMonthlyBudget reports a monthly budget (of a key or a contract)
// that is negative or above agentmarket.MaxBudgetMicros; nil is no budget.
func checkMonthlyBudget(fe *agentmarket.Fields, b *int64) {
	switch {
	case b == nil:
	case *b < 0:
		fe.Add("monthly_budget_micros", "non_negative", "monthly_budget_micros must not be negative")
	case *b > agentmarket.MaxBudgetMicros:
		fe.Add("monthly_budget_micros", "max", "monthly_budget_micros must be at most %d (omit it for no budget)", agentmarket.MaxBudgetMicros)
	}
}

// Subscribe creates an active contract for the actor's org at the
// listing's current plan version and grants the org the right to invoke
// the listing. When the plan offers a trial and the org never had one on
// the listing, the contract starts trialing, for the plan's trial days.
func (s *Subscriptions) Subscribe(ctx context.Context, actor agentmarket.Actor, in SubscribeInput) (*Contract, error) {
	var fe agentmarket.Fields
	if in.ListingID == "" {
		fe.Add("listing_id", "required", "listing_id is required")
	}
	budgets := in.check(&fe)
	if err := fe.Err("invalid_subscription", "the subscription request is not valid"); err != nil {
		return nil, err
	}
	terms, err := s.Listings.ListingTerms(ctx, actor, in.ListingID)
	if err != nil {
		return nil, err
	}
	return s.create(ctx, actor, terms, "", in, budgets)
}

// check checks the input's budgets and returns its time budgets.
func (in *SubscribeInput) check(fe *agentmarket.Fields) TimeBudgets {
	checkMonthlyBudget(fe, in.MonthlyBudgetMicros)
	in.AlertThresholds = checkBudgetThresholds(fe, in.AlertThresholds, in.MonthlyBudgetMicros)
	in.tags = agentmarket.ParseTags(fe, "tags", in.Tags)
	return in.Budgets.parse(fe)
}

// OfferTerms is what accepting a private offer needs to know of it.
type OfferTerms struct {
	ID          string
	ListingID   string
	SellerOrgID string
	// Published is the listing's state.
	Published bool
	// PlanVersion is the offer's private plan version, and TrialDays the
	// trial it offers.
	PlanVersion int
	TrialDays   int64
}

// OfferSource finds the private offers made to an org and records their
// acceptance (the catalog's offers, wired in cmd/).
type OfferSource interface {
	// OfferTerms returns an offer made to the actor's org that is open:
	// NotFound for any other org's, a Conflict (offer_not_open,
	// offer_expired) when it can no longer be accepted.
	OfferTerms(ctx context.Context, actor agentmarket.Actor, offerID string) (*OfferTerms, error)
	// AcceptOffer records that a contract accepted the offer; a Conflict
	// (offer_not_open) when it is no longer open.
	AcceptOffer(ctx context.Context, offerID, contractID string) error
}

// AcceptOffer subscribes the actor's org to a listing at a private
// offer's plan (in.ListingID is ignored): the contract freezes the offer's
// plan version, starts in the offer's trial when it has one (and the org
// never had one on the listing), and the offer is accepted, once. When the
// org already subscribes to the listing, the offer changes that
// contract's plan instead (ChangePlan); created says which.
func (s *Subscriptions) AcceptOffer(ctx context.Context, actor agentmarket.Actor, offerID string, in SubscribeInput) (c *Contract, created bool, err error) {
	var fe agentmarket.Fields
	budgets := in.check(&fe)
	if err := fe.Err("invalid_subscription", "the subscription request is not valid"); err != nil {
		return nil, false, err
	}
	if s.Offers == nil {
		return nil, false, agentmarket.Errorf(agentmarket.NotFound, "offer_not_found", "no offer %q", offerID)
	}
	o, err := s.Offers.OfferTerms(ctx, actor, offerID)
	if err != nil {
		return nil, false, err
	}
	if open, err := s.Store.OpenContract(ctx, actor.OrgID, o.ListingID); err == nil {
		c, err := s.ChangePlan(ctx, actor, open.ID, ChangePlanInput{OfferID: offerID})
		return c, false, err
	} else if agentmarket.KindOf(err) != agentmarket.NotFound {
		return nil, false, err
	}
	terms := &ListingTerms{ID: o.ListingID, SellerOrgID: o.SellerOrgID, Published: o.Published, PlanVersion: o.PlanVersion, TrialDays: o.TrialDays}
	c, err = s.create(ctx, actor, terms, offerID, in, budgets)
	return c, err == nil, err
}

// create makes the actor's org's contract on terms (and the offer's, when
// offerID is set), grants the invoke right and attaches it to billing;
// whatever fails after the contract is stored undoes it.
func (s *Subscriptions) create(ctx context.Context, actor agentmarket.Actor, terms *ListingTerms, offerID string, in SubscribeInput, budgets TimeBudgets) (*Contract, error) {
	if !terms.Published {
		return nil, agentmarket.Errorf(agentmarket.Conflict, "listing_not_published", "listing %q is not published", terms.ID)
	}
	if _, err := s.Store.OpenContract(ctx, actor.OrgID, terms.ID); err == nil {
		return nil, agentmarket.Errorf(agentmarket.Conflict, "already_subscribed", "your organisation already subscribes to listing %q", terms.ID)
	} else if agentmarket.KindOf(err) != agentmarket.NotFound {
		return nil, err
	}
	now := s.Clock.Now()
	c := &Contract{
		ID: agentmarket.NewID("ctr"), BuyerOrgID: actor.OrgID, ListingID: terms.ID, SellerOrgID: terms.SellerOrgID,
		PlanVersion: terms.PlanVersion, Status: ContractActive, MonthlyBudgetMicros: in.MonthlyBudgetMicros,
		CreatedAt: now, UpdatedAt: now, Budgets: budgets, OfferID: offerID, AlertThresholds: in.AlertThresholds,
		Tags: in.tags,
	}
	if terms.TrialDays > 0 {
		had, err := s.Store.HadTrial(ctx, actor.OrgID, terms.ID)
		if err != nil {
			return nil, err
		}
		if !had {
			// On a whole second, as the provider counts it.
			end := now.Add(time.Duration(terms.TrialDays)*24*time.Hour + time.Second - 1).Truncate(time.Second)
			c.Status, c.TrialEnd, c.CancelAtTrialEnd = ContractTrialing, &end, in.CancelAtTrialEnd
		}
	}
	if in.CancelAtTrialEnd && c.TrialEnd == nil {
		var fe agentmarket.Fields
		fe.Add("cancel_at_trial_end", "no_trial", "this subscription gets no trial (the plan offers none, or your organisation had its trial)")
		return nil, fe.Err("invalid_subscription", "the subscription request is not valid")
	}
	if err := s.Store.CreateContract(ctx, c, []Rule{InvokeRule(c.BuyerOrgID, c.ListingID)}); err != nil {
		if agentmarket.KindOf(err) == agentmarket.Conflict {
			return nil, agentmarket.Errorf(agentmarket.Conflict, "already_subscribed", "your organisation already subscribes to listing %q", terms.ID)
		}
		return nil, err
	}
	undo := func(err error) (*Contract, error) {
		if _, cerr := s.Store.SetContractStatus(context.WithoutCancel(ctx), c.ID, ContractCanceled, s.Clock.Now(), nil,
			[]Rule{InvokeRule(c.BuyerOrgID, c.ListingID)}); cerr != nil {
			return nil, errors.Join(err, cerr)
		}
		return nil, err
	}
	if offerID != "" {
		if err := s.Offers.AcceptOffer(ctx, offerID, c.ID); err != nil {
			return undo(err) // accepted by another contract meanwhile
		}
	}
	if s.Billing != nil {
		if err := s.Billing.Attach(ctx, c); err != nil {
			// No subscription at the provider, no contract: undo it.
			return undo(err)
		}
	}
	if err := s.Policies.Reload(ctx); err != nil {
		return nil, err
	}
	return s.recordContract(ctx, actor, "subscription.create", nil, c, nil)
}

// SetTags replaces the cost allocation tags of the actor's contract; calls
// carry them from then on (within the meter's cache interval).
func (s *Subscriptions) SetTags(ctx context.Context, actor agentmarket.Actor, id string, tags map[string]string) (*Contract, error) {
	var fe agentmarket.Fields
	t := agentmarket.ParseTags(&fe, "tags", tags)
	if err := fe.Err("invalid_subscription", "the tags are not valid"); err != nil {
		return nil, err
	}
	before, err := s.Get(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	after, err := s.Changes.SetContractTags(ctx, id, t, s.Clock.Now())
	return s.recordContract(ctx, actor, "subscription.tags", before, after, err)
}

// HadTrial reports whether the actor's org had its free trial on the
// listing (a subscription to it starts no trial then).
func (s *Subscriptions) HadTrial(ctx context.Context, actor agentmarket.Actor, listingID string) (bool, error) {
	return s.Store.HadTrial(ctx, actor.OrgID, listingID)
}

// List returns the actor's org's contracts.
func (s *Subscriptions) List(ctx context.Context, actor agentmarket.Actor) ([]Contract, error) {
	return s.Store.ListContracts(ctx, actor.OrgID)
}

// Get returns one of the actor's org's contracts; others' do not exist.
func (s *Subscriptions) Get(ctx context.Context, actor agentmarket.Actor, id string) (*Contract, error) {
	c, err := s.Store.GetContract(ctx, id)
	if err != nil {
		return nil, err
	}
	if c.BuyerOrgID != actor.OrgID {
		return nil, agentmarket.Errorf(agentmarket.NotFound, "subscription_not_found", "no subscription %q", id)
	}
	return c, nil
}

// SetBudgets replaces a contract's time budgets; meters apply them within
// their cache interval.
//
// Fields left out keep their value; 0 returns to the listing's.
func (s *Subscriptions) SetBudgets(ctx context.Context, actor agentmarket.Actor, id string, in *BudgetsInput) (*Contract, error) {
	var fe agentmarket.Fields
	b := in.parse(&fe)
	if err := fe.Err("invalid_subscription", "the budgets are not valid"); err != nil {
		return nil, err
	}
	c, err := s.Get(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	if in == nil {
		return c, nil
	}
	keep := func(given *int64, cur time.Duration, dst *time.Duration) {
		if given == nil {
			*dst = cur
		}
	}
	keep(in.RequestTimeoutMs, c.Budgets.RequestTimeout, &b.RequestTimeout)
	keep(in.TaskTimeoutMs, c.Budgets.TaskTimeout, &b.TaskTimeout)
	keep(in.MaxPauseMs, c.Budgets.MaxPause, &b.MaxPause)
	after, err := s.Store.SetContractBudgets(ctx, id, b, s.Clock.Now())
	return s.recordContract(ctx, actor, "subscription.budgets", c, after, err)
}

// Cancel ends a contract at once and revokes the invoke right; calls stop
// on every meter within the policy reload interval.
func (s *Subscriptions) Cancel(ctx context.Context, actor agentmarket.Actor, id string) (*Contract, error) {
	c, err := s.Get(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	var audited error
	if c.Status != ContractCanceled {
		before := c
		if c, err = s.Store.SetContractStatus(ctx, id, ContractCanceled, s.Clock.Now(), nil, []Rule{InvokeRule(c.BuyerOrgID, c.ListingID)}); err != nil {
			return nil, err
		}
		audited = s.auditContract(ctx, actor, "subscription.cancel", before, c)
	}
	if s.Billing != nil {
		// The contract is canceled whatever the provider says. If the
		// provider fails, the caller gets the error and may cancel again:
		// the cancellation there is idempotent and is retried.
		if err := s.Billing.Detach(ctx, c); err != nil {
			return nil, errors.Join(err, audited)
		}
	}
	if err := s.Policies.Reload(ctx); err != nil {
		return nil, errors.Join(err, audited)
	}
	if audited != nil {
		return nil, audited
	}
	return c, nil
}

// TaskOwners binds each task id the meter sees to the buyer org that
// created it, so no other org can reach it. Persisted, so the binding holds
// after restarts and across meter instances.
type TaskOwners interface {
	// BindTask records org as the owner of the listing's task unless the
	// task is already bound, and returns the owner now recorded.
	BindTask(ctx context.Context, t TaskBinding) (ownerOrgID string, err error)
	// TaskOwner returns the owner, or a NotFound error for an unseen task.
	TaskOwner(ctx context.Context, listingID, taskID string) (*TaskBinding, error)
	// MarkTaskReused records that the agent answered another org with this
	// bound task's id; a NotFound error for an unseen task. The first mark
	// stays.
	MarkTaskReused(ctx context.Context, listingID, taskID string, at time.Time) error
}

// BatchTaskOwners binds many tasks at once (one commit for the batch);
// owners[i] or errs[i] answers bindings[i].
type BatchTaskOwners interface {
	TaskOwners
	BindTasks(ctx context.Context, bindings []TaskBinding) (owners []string, errs []error)
	// RaiseBilled raises bound tasks' billed counters to those given: each
	// counter becomes the larger of the two, and a task never billed is
	// billed from bills[i].Billed.At. Idempotent, and commutative: the
	// meter's projections write each batch's last bill per task, maybe
	// more than once, in any order. A task not bound is left alone.
	RaiseBilled(ctx context.Context, bills []TaskBill) error
}

// TaskBilled is what a task has been billed so far: the ledger's
// cumulative counters (metering.Counters), and when the task was first
// billed.
type TaskBilled struct {
	InputTokens  int64
	OutputTokens int64
	ComputeMs    int64
	At           time.Time
}

// TaskBill is a task's billed counters, for RaiseBilled.
type TaskBill struct {
	ListingID, TaskID string
	Billed            TaskBilled
}

// TaskBinding is one task's owner.
type TaskBinding struct {
	ListingID  string
	TaskID     string
	OrgID      string
	ContractID string
	ContextID  string
	CreatedAt  time.Time
	// ParentListingID and ParentTaskID name the task this one was
	// delegated from (the caller named it in metadata); "" when none.
	// ParentListingID is "" too when the meter had not bound the parent
	// yet (an orchestrator delegates while its own task runs). Canceling
	// the parent cancels this task.
	ParentListingID string
	ParentTaskID    string
	// DeadlineAt is when the task's end-to-end time budget runs out (the
	// meter then cancels it at the agent); nil when none applies.
	DeadlineAt *time.Time
	// ReusedAt is when the agent first answered another org with this
	// task's id (MarkTaskReused): the agent then holds two orgs' data under
	// one id, and the meter relays the task to no one, its owner included.
	// nil when it never happened.
	ReusedAt *time.Time
	// Ended, given to BindTasks, is the end the binding call saw (a task
	// created and ended in one call): the task is stored ended, with this
	// event, when the binding is new. Never read back.
	Ended *TaskEvent
	// Endpoint is the agent endpoint the task was created at, when its
	// listing has several (a2aproxy/balance.go): the task's later calls
	// go there. "" for a listing with one.
	Endpoint string
	// KeyID is the API key whose call created the task ("" for a task
	// bound before keys were recorded): a kill switch of the key cancels
	// the key's open tasks (RequestSwitchCancels).
	KeyID string
	// Billed is what the task has been billed so far; nil when it never
	// was. Given to BindTasks, it is stored with a new binding, and raises
	// the stored one (as RaiseBilled) of a binding of the same org.
	Billed *TaskBilled
}

// transitions are the moves billing may make: payment failed (past due),
// grace over (suspended), paid (active again), subscription deleted
// (canceled). Canceled is final.
var transitions = map[ContractStatus][]ContractStatus{
	ContractTrialing:  {ContractPastDue, ContractSuspended, ContractCanceled},
	ContractActive:    {ContractPastDue, ContractSuspended, ContractCanceled},
	ContractPastDue:   {ContractActive, ContractSuspended, ContractCanceled},
	ContractSuspended: {ContractActive, ContractCanceled},
}

// Transition moves a contract to status on billing's word (a webhook, the
// grace sweeper); it is not a user action. The invoke right follows the
// status on every meter within the policy reload interval. Moving to the
// status it has is a no-op; a move the life cycle does not allow is a
// Conflict.
//
// A trialing contract is not made active by a payment (the provider's
// invoice of a trial is one, of nothing) while its trial runs: once the
// trial is due, active (or canceled, when the buyer chose to stop then)
// ends the trial at its scheduled end (EndTrial), so it is billed from
// there, not from when the provider's word arrived.
func (s *Subscriptions) Transition(ctx context.Context, id string, to ContractStatus) (*Contract, error) {
	c, err := s.Store.GetContract(ctx, id)
	if err != nil {
		return nil, err
	}
	if c.Status == to {
		return c, nil
	}
	if to == ContractCanceled && c.CancelAt != nil && !s.Clock.Now().Before(*c.CancelAt) {
		return s.CancelScheduled(ctx, id) // the provider ended it as asked: at the period's end
	}
	if c.Status == ContractTrialing && c.TrialEnd != nil && (to == ContractActive || to == ContractCanceled && c.CancelAtTrialEnd) {
		if s.Clock.Now().Before(*c.TrialEnd) {
			if to == ContractActive {
				return c, nil
			}
		} else {
			return s.EndTrial(ctx, id, *c.TrialEnd)
		}
	}
	allowed := false
	for _, t := range transitions[c.Status] {
		allowed = allowed || t == to
	}
	if !allowed {
		return nil, agentmarket.Errorf(agentmarket.Conflict, "invalid_transition", "a %s contract cannot become %s", c.Status, to)
	}
	rule := []Rule{InvokeRule(c.BuyerOrgID, c.ListingID)}
	var grant, revoke []Rule
	if to.Invocable() {
		grant = rule
	} else {
		revoke = rule
	}
	before := c
	if c, err = s.Store.SetContractStatus(ctx, id, to, s.Clock.Now(), grant, revoke); err != nil {
		return nil, err
	}
	audited := s.auditContract(ctx, agentmarket.Actor{}, "subscription.transition", before, c)
	if err := errors.Join(s.Policies.Reload(ctx), audited); err != nil {
		return nil, err
	}
	return c, nil
}

// EndTrial ends a trialing contract's trial at end (never later than its
// scheduled end, never before the contract began): the contract becomes
// active, billed from end, or canceled at end when the buyer chose to stop
// with the trial (the invoke right is revoked). Billing calls it when a
// trial's days are over or its usage allowance is used up (billing takes
// care of the provider). A contract no longer trialing is returned as it
// is: the trial was ended already.
func (s *Subscriptions) EndTrial(ctx context.Context, id string, end time.Time) (*Contract, error) {
	c, err := s.Store.GetContract(ctx, id)
	if err != nil {
		return nil, err
	}
	if c.Status != ContractTrialing || c.TrialEnd == nil {
		return c, nil
	}
	if end.After(*c.TrialEnd) {
		end = *c.TrialEnd
	}
	if end.Before(c.CreatedAt) {
		end = c.CreatedAt
	}
	to, revoke := ContractActive, []Rule(nil)
	if c.CancelAtTrialEnd {
		to, revoke = ContractCanceled, []Rule{InvokeRule(c.BuyerOrgID, c.ListingID)}
	}
	before := c
	c, err = s.Store.EndTrial(ctx, id, end, to, s.Clock.Now(), revoke)
	if agentmarket.CodeOf(err) == "trial_over" {
		return s.Store.GetContract(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	audited := s.auditContract(ctx, agentmarket.Actor{}, "subscription.trial_end", before, c)
	if err := errors.Join(s.Policies.Reload(ctx), audited); err != nil {
		return nil, err
	}
	return c, nil
}

// SetCancelAtTrialEnd records whether the actor's trialing contract stops
// when its trial ends (true) or converts to paid (false); the provider is
// told first. A contract not in trial is a Conflict (code trial_over).
func (s *Subscriptions) SetCancelAtTrialEnd(ctx context.Context, actor agentmarket.Actor, id string, cancel bool) (*Contract, error) {
	c, err := s.Get(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	if c.Status != ContractTrialing {
		return nil, agentmarket.Errorf(agentmarket.Conflict, "trial_over", "subscription %q is not in a trial", id)
	}
	if c.CancelAtTrialEnd == cancel {
		return c, nil
	}
	if s.Billing != nil {
		next := *c
		next.CancelAtTrialEnd = cancel
		if err := s.Billing.ScheduleEnd(ctx, &next); err != nil {
			return nil, err
		}
	}
	after, err := s.Store.SetCancelAtTrialEnd(ctx, id, cancel, s.Clock.Now())
	return s.recordContract(ctx, actor, "subscription.cancel_at_trial_end", c, after, err)
}

// SuspendOverdue suspends every contract past due for longer than grace,
// and returns how many it suspended.
func (s *Subscriptions) SuspendOverdue(ctx context.Context, grace time.Duration) (int, error) {
	overdue, err := s.Store.OverdueContracts(ctx, s.Clock.Now().Add(-grace))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range overdue {
		if _, err := s.Transition(ctx, c.ID, ContractSuspended); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
