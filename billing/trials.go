package billing

import (
	"context"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/metering"
)

// TrialLister lists the contracts in trial (contracts/gormstore
// implements it).
type TrialLister interface {
	TrialingContracts(ctx context.Context) ([]contracts.Contract, error)
}

// TrialStates ends trials (contracts.Subscriptions implements it).
type TrialStates interface {
	EndTrial(ctx context.Context, contractID string, end time.Time) (*contracts.Contract, error)
}

// ScheduledLister lists the contracts whose scheduled cancellation has
// come (contracts/gormstore implements it).
type ScheduledLister interface {
	DueCancellations(ctx context.Context, now time.Time) ([]contracts.Contract, error)
}

// ScheduledStates cancels contracts at their scheduled end
// (contracts.Subscriptions implements it).
type ScheduledStates interface {
	CancelScheduled(ctx context.Context, contractID string) (*contracts.Contract, error)
}

// EndScheduled cancels every contract whose scheduled cancellation (the end
// of the billing period its buyer asked for) has come, at that instant, and
// returns how many. With a Provider, the usage metered until then is
// reported first and the subscription recorded as canceled then: the
// provider ended it by itself (cancel_at) and invoices that period in
// full. Usage reaching the usage store later is not reported; Reconcile
// lists it.
func (s *Service) EndScheduled(ctx context.Context, states ScheduledStates) (int, error) {
	if s.Scheduled == nil {
		return 0, nil
	}
	now := s.Clock.Now().UTC()
	list, err := s.Scheduled.DueCancellations(ctx, now)
	if err != nil {
		return 0, err
	}
	return eachContract(list, func(c *contracts.Contract) (bool, error) {
		sub, err := s.liveSubscription(ctx, c)
		if err != nil {
			return false, err
		}
		if sub != nil {
			if _, err := s.reporter().flush(ctx, sub, *c.CancelAt, now); err != nil {
				return false, err
			}
			if err := s.Store.SetSubscriptionCanceled(ctx, c.ID, *c.CancelAt); err != nil {
				return false, err
			}
		}
		_, err = states.CancelScheduled(ctx, c.ID)
		return err == nil, err
	})
}

// EndTrials ends every trial that is over and returns how many it ended.
// A trial is over when its days are (it ends at its scheduled end), or
// when its usage reached the plan's trial allowance (TrialTokens input
// and output tokens together, or TrialCapMicros of list price): it then
// ends right after the call that reached it, to the millisecond
// (trialUsedUp), so every call until then is free and every later one is
// paid, whenever EndTrials runs.
//
// With a Provider, a trial ended early is ended there too (EndTrialNow,
// or the subscription canceled when the buyer chose to stop with the
// trial) and the subscription's usage is reported from the trial's end; a
// trial whose days are over needs no call, the provider ended it at the
// same instant (trial_end, and cancel_at for a buyer who chose to stop).
// The contract then becomes active, billed from the trial's end, or is
// canceled then (TrialStates.EndTrial). A contract that fails does not stop
// the others; running EndTrials again retries it (each call to the
// provider carries its key).
func (s *Service) EndTrials(ctx context.Context, states TrialStates) (int, error) {
	if s.Trials == nil {
		return 0, nil
	}
	list, err := s.Trials.TrialingContracts(ctx)
	if err != nil {
		return 0, err
	}
	now := s.Clock.Now().UTC()
	return eachContract(list, func(c *contracts.Contract) (bool, error) { return s.endTrial(ctx, c, states, now) })
}

func (s *Service) endTrial(ctx context.Context, c *contracts.Contract, states TrialStates, now time.Time) (bool, error) {
	if c.TrialEnd == nil {
		return false, nil
	}
	due := c.TrialEnd.UTC()
	end := due
	if now.Before(due) {
		plan, err := s.Plans.Plan(ctx, c.ListingID, c.PlanVersion)
		if err != nil {
			return false, err
		}
		at, over, err := trialUsedUp(ctx, s.Usage, c, *plan, now)
		if err != nil || !over {
			return false, err
		}
		end = at
	}
	sub, err := s.liveSubscription(ctx, c)
	if err != nil {
		return false, err
	}
	if sub != nil {
		switch {
		case end.Before(due) && c.CancelAtTrialEnd:
			if err := s.Provider.CancelSubscription(ctx, sub.Refs.ID, CancelKey(c.ID)); err != nil && agentmarket.KindOf(err) != agentmarket.NotFound {
				return false, err
			}
			if err := s.Store.SetSubscriptionCanceled(ctx, c.ID, end); err != nil {
				return false, err
			}
		case end.Before(due):
			if err := s.Provider.EndTrialNow(ctx, sub.Refs.ID, TrialEndKey(c.ID)); err != nil {
				return false, err
			}
			if err := s.Store.SetSubscriptionUsageFrom(ctx, c.ID, end); err != nil {
				return false, err
			}
		case c.CancelAtTrialEnd:
			// The provider canceled it at the trial's end (cancel_at).
			if err := s.Store.SetSubscriptionCanceled(ctx, c.ID, end); err != nil {
				return false, err
			}
		}
	}
	if _, err := states.EndTrial(ctx, c.ID, end); err != nil {
		return false, err
	}
	s.logger().Info("trial ended", "contract", c.ID, "end", end, "early", end.Before(due), "canceled", c.CancelAtTrialEnd)
	return true, nil
}

// trialUsedUp reports whether a trialing contract's usage from its start
// through now reached the plan's trial allowance and, if so, when the
// trial ends: the millisecond after the usage row that reached it (usage
// rows are stamped to the millisecond, and usage is read [from, to)), so
// the rows before are the trial's, that row included, and every later one
// is paid. It is found by bisection over the usage store's totals, about
// 31 queries for a 14-day trial, once per trial. A row that reaches the
// store after the trial was ended does not move its end.
func trialUsedUp(ctx context.Context, store metering.Store, c *contracts.Contract, plan listings.Plan, now time.Time) (time.Time, bool, error) {
	if plan.TrialTokens == 0 && plan.TrialCapMicros == 0 {
		return time.Time{}, false, nil
	}
	const ms = time.Millisecond
	usedUp := func(to time.Time) (bool, error) {
		totals, err := store.Totals(ctx, metering.Query{GroupBy: metering.ByListing, From: c.CreatedAt.Truncate(ms), To: to, ContractID: c.ID})
		if err != nil {
			return false, err
		}
		t := metering.Sum(totals)
		return plan.TrialTokens > 0 && agentmarket.AddSat(t.InputTokens, t.OutputTokens) >= plan.TrialTokens ||
			plan.TrialCapMicros > 0 && t.CostMicros >= plan.TrialCapMicros, nil
	}
	hi := now.Truncate(ms).Add(ms)
	if over, err := usedUp(hi); err != nil || !over {
		return time.Time{}, false, err
	}
	lo := c.CreatedAt.Truncate(ms) // [start, lo) is empty: not used up
	for hi.Sub(lo) > ms {
		mid := lo.Add(hi.Sub(lo) / 2).Truncate(ms)
		if !mid.After(lo) {
			mid = lo.Add(ms)
		}
		over, err := usedUp(mid)
		if err != nil {
			return time.Time{}, false, err
		}
		if over {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, true, nil
}
