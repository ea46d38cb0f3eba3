package billing

import (
	"context"
	"fmt"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// ChargeCommitments charges, at the provider, every contract that fell
// short of its plan's minimum commitment in a closed period: the shortfall
// is what Rate's commitment lines come to (their share of the invoice's
// one rounding, AmountMinor), added to the subscription's next invoice as
// one invoice item (key CommitmentKey). The charge is recorded before the
// provider is called and marked sent after, so a crash or a second run
// charges it once. Without a Provider (the own ledger's invoices carry the
// commitment line themselves) it does nothing. It returns how many charges
// the provider took.
//
// The period must be over, SettleDelay included, as for CloseMonth.
func (s *Service) ChargeCommitments(ctx context.Context, period Period) (int, error) {
	if s.Provider == nil {
		return 0, nil
	}
	list, now, err := s.closedPeriod(ctx, period)
	if err != nil {
		return 0, err
	}
	return eachContract(list, func(c *contracts.Contract) (bool, error) { return s.chargeCommitment(ctx, c, period, now) })
}

func (s *Service) chargeCommitment(ctx context.Context, c *contracts.Contract, period Period, now time.Time) (bool, error) {
	if ok, err := s.committed(ctx, c, period); err != nil || !ok {
		return false, err
	}
	charge, err := s.Store.CommitmentCharge(ctx, c.ID, period.Start)
	switch {
	case err == nil && charge.SentAt != nil:
		return false, nil
	case err != nil && agentmarket.KindOf(err) != agentmarket.NotFound:
		return false, err
	}
	sub, err := s.Store.Subscription(ctx, c.ID)
	if agentmarket.KindOf(err) == agentmarket.NotFound {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if charge == nil {
		parts, ok, err := s.terms().contractParts(ctx, c, period, period.End)
		if err != nil || !ok {
			return false, err
		}
		inv, err := RateParts(period, parts)
		if err != nil {
			return false, err
		}
		var minor int64
		for _, l := range inv.Lines {
			if l.Kind == LineCommitment {
				minor += l.AmountMinor
			}
		}
		if minor == 0 {
			return false, nil
		}
		charge, err = s.Store.AddCommitmentCharge(ctx, &CommitmentCharge{ContractID: c.ID, PeriodStart: period.Start, Currency: inv.Currency,
			AmountMinor: minor, IdempotencyKey: CommitmentKey(c.ID, period.Start), CreatedAt: now})
		if err != nil {
			return false, err
		}
	}
	err = s.Provider.AddInvoiceItem(ctx, InvoiceItem{CustomerID: sub.CustomerID, SubscriptionID: sub.Refs.ID, Currency: charge.Currency,
		AmountMinor: charge.AmountMinor, IdempotencyKey: charge.IdempotencyKey, Period: period,
		Description: fmt.Sprintf("Minimum commitment shortfall, %s", period.Start.Format("January 2006"))})
	if err != nil {
		return false, err
	}
	return true, s.Store.MarkCommitmentChargeSent(ctx, c.ID, period.Start, now)
}

// committed reports whether a paid part of the contract's stay in the
// period is on a plan with a minimum commitment (plans only: no usage is
// read for the contracts that have none).
func (s *Service) committed(ctx context.Context, c *contracts.Contract, period Period) (bool, error) {
	changes, err := planChanges(ctx, s.History, c)
	if err != nil {
		return false, err
	}
	for _, sp := range spansOf(c, changes, stayEnd(c, period)) {
		if sp.trial || !sp.End.After(period.Start) || !sp.Start.Before(period.End) {
			continue
		}
		plan, err := s.Plans.Plan(ctx, c.ListingID, sp.version)
		if err != nil || plan.MinCommitMicros > 0 {
			return err == nil, err
		}
	}
	return false, nil
}
