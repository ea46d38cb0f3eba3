package billing

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentmarket/agentmarket"
)

// SweepEvery is how often billing's background work runs for a grace
// period: every minute, or often enough that a short grace (tests, strict
// operators) is honoured within a fraction of itself, but not more than
// every 100 ms.
func SweepEvery(grace time.Duration) time.Duration {
	return min(time.Minute, max(grace/4, 100*time.Millisecond))
}

// SweptStates are the contract moves the scheduler makes on time
// (contracts.Subscriptions implements them): trials that are over,
// cancellations scheduled for a period's end, and suspensions of
// contracts past due beyond the grace period.
type SweptStates interface {
	TrialStates
	ScheduledStates
	SuspendOverdue(ctx context.Context, grace time.Duration) (int, error)
}

// Scheduler runs billing's background work.
type Scheduler struct {
	Service *Service
	// Reporter reports usage to the provider; nil without one, when the
	// months close on the own ledger.
	Reporter *Reporter
	States   SweptStates
	// Grace is how long a contract stays past due before it is suspended.
	Grace time.Duration
	// Clock says which month was the last to end.
	Clock  agentmarket.Clock
	Logger *slog.Logger
}

// Run runs billing's background work until ctx ends: the usage reporter
// (with a provider), ending trials that are over, canceling contracts whose
// scheduled end has come, suspending contracts past due beyond the grace
// period, and closing each month: on the own ledger (without a provider),
// or charging the month's minimum commitments (with one).
func (s *Scheduler) Run(ctx context.Context) {
	if s.Reporter != nil {
		go func() {
			if err := s.Reporter.Run(ctx, time.Minute); err != nil && ctx.Err() == nil {
				s.Logger.Error("usage reporter stopped", "err", err)
			}
		}()
	}
	t := time.NewTicker(SweepEvery(s.Grace))
	defer t.Stop()
	for {
		s.sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep does the background work once; what fails is logged and retried
// at the next sweep.
func (s *Scheduler) sweep(ctx context.Context) {
	if n, err := s.Service.EndTrials(ctx, s.States); err != nil && ctx.Err() == nil {
		s.Logger.Warn("ending trials failed", "err", err)
	} else if n > 0 {
		s.Logger.Info("ended trials", "count", n)
	}
	if n, err := s.Service.EndScheduled(ctx, s.States); err != nil && ctx.Err() == nil {
		s.Logger.Warn("ending scheduled cancellations failed", "err", err)
	} else if n > 0 {
		s.Logger.Info("canceled subscriptions at their period's end", "count", n)
	}
	if n, err := s.States.SuspendOverdue(ctx, s.Grace); err != nil && ctx.Err() == nil {
		s.Logger.Warn("suspending overdue contracts failed", "err", err)
	} else if n > 0 {
		s.Logger.Info("suspended overdue contracts", "count", n)
	}
	prev := MonthOf(MonthOf(s.Clock.Now()).Start.Add(-time.Second))
	if s.Reporter == nil {
		// Every contract the close could not rate is said, each with why
		// (an unratable month is never skipped silently: it is retried
		// every sweep and logged every time until it is fixed).
		if _, err := s.Service.CloseMonth(ctx, prev); err != nil && ctx.Err() == nil && agentmarket.CodeOf(err) != "period_not_closed" {
			s.Logger.Error("closing the month failed for some contracts; they are not invoiced until it succeeds", "period", prev.Start, "err", err)
			s.logUnratable(ctx, prev)
		}
	} else {
		if _, err := s.Service.ChargeCommitments(ctx, prev); err != nil && ctx.Err() == nil && agentmarket.CodeOf(err) != "period_not_closed" {
			s.Logger.Warn("charging minimum commitments failed", "period", prev.Start, "err", err)
		}
		if _, err := s.Service.ApplyCredits(ctx, prev); err != nil && ctx.Err() == nil && agentmarket.CodeOf(err) != "period_not_closed" {
			s.Logger.Warn("giving back prepaid credit at the provider failed", "period", prev.Start, "err", err)
		}
	}
}

// logUnratable logs each contract whose month cannot be rated, with why
// and where operators see them all (the console's /operator/unratable).
func (s *Scheduler) logUnratable(ctx context.Context, period Period) {
	list, err := s.Service.Unratable(ctx, period)
	if err != nil {
		if ctx.Err() == nil {
			s.Logger.Warn("listing the contracts that cannot be rated failed", "period", period.Start, "err", err)
		}
		return
	}
	for _, u := range list {
		s.Logger.Error("a contract's month cannot be rated: it is not invoiced until its cause is fixed (the console lists them at /operator/unratable)",
			"period", period.Start.Format("2006-01"), "contract", u.Contract.ID, "buyer_org", u.Contract.BuyerOrgID, "listing", u.Contract.ListingID,
			"plan_version", u.Contract.PlanVersion, "why", u.Why)
	}
}
