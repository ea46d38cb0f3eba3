package billing

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/metering"
)

// ContractLister lists the contracts billing rates and reconciles
// (contracts/gormstore implements it).
type ContractLister interface {
	// ContractsActiveIn returns the contracts active for at least part of
	// p: created before p.End and not canceled before p.Start, ordered by
	// id.
	ContractsActiveIn(ctx context.Context, p Period) ([]contracts.Contract, error)
}

// ContractsBetween adapts a function listing the contracts active for
// at least part of [from, to) to a ContractLister, so that a contracts
// store can offer one without importing billing.
type ContractsBetween func(ctx context.Context, from, to time.Time) ([]contracts.Contract, error)

// ContractsActiveIn implements ContractLister.
func (f ContractsBetween) ContractsActiveIn(ctx context.Context, p Period) ([]contracts.Contract, error) {
	return f(ctx, p.Start, p.End)
}

// OrgInfo is what the provider's customer of a buyer org is made of.
type OrgInfo struct{ ID, Name, Email string }

// Service ties contracts to the payment provider and keeps the own
// ledger. With a Provider, Attach and Detach create and end a contract's
// subscription there (a Reporter then reports its usage and Webhooks apply
// the provider's verdicts); without one (Stripe off) they do nothing and
// CloseMonth issues the invoices. Reconcile works either way.
type Service struct {
	Store Store
	// Provider is the payment provider; nil runs the own ledger.
	Provider Provider
	Usage    metering.Store
	Clock    agentmarket.Clock
	Plans    PlanSource
	// Contracts lists the contracts of a period, for CloseMonth and
	// Reconcile.
	Contracts ContractLister
	// Trials lists the contracts in trial, for EndTrials.
	Trials TrialLister
	// History is the contracts' plan changes (nil: none), and Scheduled
	// lists their scheduled cancellations, for EndScheduled.
	History   PlanHistory
	Scheduled ScheduledLister
	// Stays lists an org's contracts: a month's allowance is shared by
	// the org's stays on a listing (nil: none is looked for).
	Stays Stays
	// Credit is what contracts' calls burned of their orgs' prepaid
	// credit, which the invoices CloseMonth issues take off (nil: none).
	Credit CreditBurns
	// CreditBack, with Credit and without a Provider, gives back to the
	// org's balance at the month's close what a contract's calls burned
	// beyond what its invoice charged (nil: kept burned).
	CreditBack CreditReturns
	// PlatformFeePercent is the platform's share of a seller's invoices
	// when the seller has a connected account (see SubscribeInput).
	PlatformFeePercent float64
	// SettleDelay is how long after a period ends its usage is taken to
	// be complete (spooled usage has been shipped): CloseMonth refuses to
	// close a period earlier. Zero is DefaultSettleDelay.
	SettleDelay time.Duration
	// Logger receives what is worth knowing but is no error; nil is
	// slog.Default().
	Logger *slog.Logger
}

func (s *Service) terms() terms {
	return terms{plans: s.Plans, history: s.History, usage: s.Usage, stays: s.Stays}
}

// Attach creates the contract's subscription at the provider: the plan
// version's prices and the buyer's customer (each created once and
// stored, then reused), and the subscription with its billing periods
// anchored on calendar months. The seller is paid through its connected
// account, less PlatformFeePercent, when connectedAccountID is set.
// Without a Provider it does nothing.
//
// It is safe to call again after a failure or a crash: what is stored is
// reused, and every creation at the provider carries an idempotency key
// derived from our ids, so a repeated call creates nothing twice. (The
// provider keeps those keys for 24 hours; a retry later than that, across
// a month's end, may be refused as a Conflict and needs a look.)
func (s *Service) Attach(ctx context.Context, c *contracts.Contract, buyer OrgInfo, listingName string, plan listings.Plan, connectedAccountID string) error {
	if s.Provider == nil {
		return nil
	}
	var fe agentmarket.Fields
	if c == nil || c.ID == "" {
		fe.Add("contract", "required", "the contract is required")
	} else {
		if c.ListingID == "" {
			fe.Add("contract.listing_id", "required", "the contract's listing is required")
		}
		if plan.Version != c.PlanVersion {
			fe.Add("plan.version", "frozen", "the plan is version %d but the contract froze version %d", plan.Version, c.PlanVersion)
		}
	}
	if buyer.ID == "" {
		fe.Add("buyer.id", "required", "the buyer org is required")
	}
	if err := fe.Err("invalid_attach", "the contract cannot be billed"); err != nil {
		return err
	}
	if _, err := s.Store.Subscription(ctx, c.ID); err == nil {
		return nil
	} else if agentmarket.KindOf(err) != agentmarket.NotFound {
		return err
	}
	now := s.Clock.Now().UTC()

	prices, err := s.planPrices(ctx, c.ListingID, listingName, plan, now)
	if err != nil {
		return err
	}

	customer, err := s.Store.Customer(ctx, buyer.ID)
	if agentmarket.KindOf(err) == agentmarket.NotFound {
		if customer, err = s.Provider.EnsureCustomer(ctx, buyer.ID, buyer.Name, buyer.Email); err == nil {
			customer, err = s.Store.SaveCustomer(ctx, buyer.ID, customer, now)
		}
	}
	if err != nil {
		return err
	}

	in := SubscribeInput{ContractID: c.ID, CustomerID: customer.ID, Prices: prices, BillingCycleAnchor: MonthOf(now).End}
	var usageFrom time.Time
	if c.Status == contracts.ContractTrialing && c.TrialEnd != nil && c.TrialEnd.After(now) {
		usageFrom = c.TrialEnd.UTC()
		in.TrialEnd, in.CancelAtTrialEnd = usageFrom, c.CancelAtTrialEnd
		in.BillingCycleAnchor = MonthOf(usageFrom).End
	}
	if connectedAccountID != "" {
		in.ConnectedAccountID, in.PlatformFeePercent = connectedAccountID, s.PlatformFeePercent
	}
	refs, err := s.Provider.Subscribe(ctx, in)
	if err != nil {
		return err
	}
	if _, err = s.Store.SaveSubscription(ctx, &Subscription{ContractID: c.ID, CustomerID: customer.ID, Refs: refs, CreatedAt: now,
		UsageFrom: usageFrom}); err != nil {
		// The provider has a subscription we could not record: the
		// contract will be canceled (Subscriptions undoes it), so the
		// subscription must go too, or the buyer would be charged for
		// nothing. With the contract's own cancel key, a later Detach of
		// the same contract is the same call.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if cerr := s.Provider.CancelSubscription(cctx, refs.ID, CancelKey(c.ID)); cerr != nil {
			s.logger().Error("a provider subscription was created but neither recorded nor canceled: cancel it by hand",
				"contract_id", c.ID, "subscription_id", refs.ID, "save_err", err, "cancel_err", cerr)
			return errors.Join(err, cerr)
		}
		s.logger().Warn("a provider subscription that could not be recorded was canceled", "contract_id", c.ID, "subscription_id", refs.ID, "err", err)
		return err
	}
	return nil
}

// Detach ends the contract's subscription at the provider, once the
// contract is canceled: it first reports the usage metered since the last
// closed window (through now, so the provider's final invoice carries it),
// then cancels with CancelKey (the provider invoices what is not invoiced
// yet and credits the unused part of the flat fee), then records the
// subscription as canceled so the Reporter stops. Without a Provider, or
// without a subscription, it does nothing; calling it again is harmless.
// Usage that reaches the usage store after Detach is not reported;
// Reconcile lists it.
func (s *Service) Detach(ctx context.Context, c *contracts.Contract) error {
	if s.Provider == nil || c == nil {
		return nil
	}
	sub, err := s.Store.Subscription(ctx, c.ID)
	if agentmarket.KindOf(err) == agentmarket.NotFound {
		return nil
	}
	if err != nil {
		return err
	}
	if sub.CanceledAt != nil {
		return nil
	}
	now := s.Clock.Now().UTC()
	if _, err := s.reporter().flush(ctx, sub, now.Truncate(time.Second), now); err != nil {
		return err
	}
	if err := s.Provider.CancelSubscription(ctx, sub.Refs.ID, CancelKey(c.ID)); err != nil && agentmarket.KindOf(err) != agentmarket.NotFound {
		return err
	}
	return s.Store.SetSubscriptionCanceled(ctx, c.ID, now)
}

// ScheduleEnd tells the provider when a contract's subscription ends by
// itself (c.EndsAt: the trial's end when the buyer chose to stop then, or
// the end of the billing period it asked for), or that it no longer does.
// Without a Provider, or without a live subscription, it does nothing.
func (s *Service) ScheduleEnd(ctx context.Context, c *contracts.Contract) error {
	sub, err := s.liveSubscription(ctx, c)
	if err != nil || sub == nil {
		return err
	}
	var end time.Time
	if e := c.EndsAt(); e != nil {
		end = e.UTC()
	}
	return s.Provider.SetCancelAt(ctx, sub.Refs.ID, end, ScheduleEndKey(c.ID, end, s.Clock.Now()))
}

// ChangePlan moves a contract's subscription to plan version ch.ToVersion
// from ch.At. The new plan must be in the contract's currency. With a
// Provider: the usage metered until ch.At is reported to the old items
// first (so the old prices bill it), the new version's prices are made
// (once, as Attach makes them), and the subscription's items are replaced
// (PlanChangeKey), the fee prorated by the provider; the reporter then
// reports to the new items.
func (s *Service) ChangePlan(ctx context.Context, c *contracts.Contract, ch contracts.PlanChange, listingName string) error {
	_, to, err := s.planChange(ctx, c.ListingID, ch.FromVersion, ch.ToVersion)
	if err != nil {
		return err
	}
	sub, err := s.liveSubscription(ctx, c)
	if err != nil || sub == nil {
		return err
	}
	now := s.Clock.Now().UTC()
	if _, err := s.reporter().flush(ctx, sub, ch.At, now); err != nil {
		return err
	}
	prices, err := s.planPrices(ctx, c.ListingID, listingName, *to, now)
	if err != nil {
		return err
	}
	refs, err := s.Provider.ChangePlan(ctx, PlanChangeInput{SubscriptionID: sub.Refs.ID, Old: sub.Refs, Prices: prices, At: ch.At,
		IdempotencyKey: PlanChangeKey(c.ID, ch.Seq)})
	if err != nil {
		return err
	}
	return s.Store.SetSubscriptionItems(ctx, c.ID, refs)
}

// liveSubscription is the contract's subscription at the provider when
// there is a provider and it is not canceled; nil otherwise.
// CanChangePlan says why contract c cannot move to plan version to (a plan
// in another currency: an Invalid error on plan_version), nil when it can:
// the check ChangePlan makes first, for the pages to show before the
// change is asked for.
func (s *Service) CanChangePlan(ctx context.Context, c *contracts.Contract, to int) error {
	_, _, err := s.planChange(ctx, c.ListingID, c.PlanVersion, to)
	return err
}

// planChange reads both plans of a change and refuses one to another
// currency.
func (s *Service) planChange(ctx context.Context, listingID string, fromVersion, toVersion int) (from, to *listings.Plan, err error) {
	if from, err = s.Plans.Plan(ctx, listingID, fromVersion); err != nil {
		return nil, nil, err
	}
	if to, err = s.Plans.Plan(ctx, listingID, toVersion); err != nil {
		return nil, nil, err
	}
	if to.Currency != from.Currency {
		var fe agentmarket.Fields
		fe.Add("plan_version", "same_currency", "the subscription is billed in %s; plan version %d is in %s", from.Currency, to.Version, to.Currency)
		return nil, nil, fe.Err("invalid_plan_change", "the plan change is not valid")
	}
	return from, to, nil
}

func (s *Service) liveSubscription(ctx context.Context, c *contracts.Contract) (*Subscription, error) {
	if s.Provider == nil || c == nil {
		return nil, nil
	}
	sub, err := s.Store.Subscription(ctx, c.ID)
	if agentmarket.KindOf(err) == agentmarket.NotFound || err == nil && sub.CanceledAt != nil {
		return nil, nil
	}
	return sub, err
}

// reporter is a Reporter over the service's stores and provider, for the
// reports that must go out before a subscription changes.
func (s *Service) reporter() *Reporter {
	return &Reporter{Store: s.Store, Provider: s.Provider, Usage: s.Usage, Clock: s.Clock, Logger: s.Logger}
}

// planPrices returns a plan version's prices at the provider, made (and
// stored) the first time.
func (s *Service) planPrices(ctx context.Context, listingID, listingName string, plan listings.Plan, now time.Time) (PlanPrices, error) {
	prices, err := s.Store.PlanPrices(ctx, listingID, plan.Version)
	if agentmarket.KindOf(err) == agentmarket.NotFound {
		if prices, err = s.Provider.EnsurePlan(ctx, listingID, listingName, plan); err == nil {
			prices, err = s.Store.SavePlanPrices(ctx, listingID, plan.Version, prices, now)
		}
	}
	return prices, err
}

// Hooks attaches and detaches contracts as they are made and canceled
// (the shape of contracts' billing hooks): it looks up what Attach needs
// and calls the Service.
type Hooks struct {
	Service *Service
	// Buyer returns the buyer org's name and billing e-mail.
	Buyer func(ctx context.Context, orgID string) (OrgInfo, error)
	// Listing returns a listing's name and its seller's connected account
	// ("" while sellers have none).
	Listing func(ctx context.Context, listingID string) (name, connectedAccountID string, err error)
}

// Attach attaches a new contract at its frozen plan version (from
// Service.Plans). Without a Provider it does nothing.
func (h *Hooks) Attach(ctx context.Context, c *contracts.Contract) error {
	if h.Service.Provider == nil {
		return nil
	}
	buyer, err := h.Buyer(ctx, c.BuyerOrgID)
	if err != nil {
		return err
	}
	name, account, err := h.Listing(ctx, c.ListingID)
	if err != nil {
		return err
	}
	plan, err := h.Service.Plans.Plan(ctx, c.ListingID, c.PlanVersion)
	if err != nil {
		return err
	}
	return h.Service.Attach(ctx, c, buyer, name, *plan, account)
}

// Detach is Service.Detach.
func (h *Hooks) Detach(ctx context.Context, c *contracts.Contract) error {
	return h.Service.Detach(ctx, c)
}

// ScheduleEnd is Service.ScheduleEnd.
func (h *Hooks) ScheduleEnd(ctx context.Context, c *contracts.Contract) error {
	return h.Service.ScheduleEnd(ctx, c)
}

// ChangePlan is Service.ChangePlan, with the listing's name (for the new
// version's product prices).
// CanChangePlan implements contracts.PlanChangeChecker.
func (h *Hooks) CanChangePlan(ctx context.Context, c *contracts.Contract, to int) error {
	return h.Service.CanChangePlan(ctx, c, to)
}

func (h *Hooks) ChangePlan(ctx context.Context, c *contracts.Contract, ch contracts.PlanChange) error {
	name := c.ListingID
	if h.Service.Provider != nil {
		var err error
		if name, _, err = h.Listing(ctx, c.ListingID); err != nil {
			return err
		}
	}
	return h.Service.ChangePlan(ctx, c, ch, name)
}

func (s *Service) settleDelay() time.Duration {
	if s.SettleDelay > 0 {
		return s.SettleDelay
	}
	return DefaultSettleDelay
}

// usageIn sums a contract's usage in p from the usage store. A sum past
// the int64 range saturates (metering.Sum), so it reads, and rating it
// says the amount is too large to bill instead of wrapping.
func usageIn(ctx context.Context, store metering.Store, contractID string, p Period) (Usage, error) {
	totals, err := store.Totals(ctx, metering.Query{GroupBy: metering.ByListing, From: p.Start, To: p.End, ContractID: contractID})
	if err != nil {
		return Usage{}, err
	}
	t := metering.Sum(totals)
	return Usage{InputTokens: t.InputTokens, OutputTokens: t.OutputTokens, ComputeMs: t.ComputeMs, Tasks: t.Tasks}, nil
}

// Of returns the usage counter of a metered line kind (0 for the flat fee).
func (u Usage) Of(kind LineKind) int64 {
	switch kind {
	case LineInputTokens:
		return u.InputTokens
	case LineOutputTokens:
		return u.OutputTokens
	case LineCompute:
		return u.ComputeMs
	case LineTasks:
		return u.Tasks
	}
	return 0
}

func (s *Service) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}
