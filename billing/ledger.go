package billing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// CloseMonth is the own ledger's month end: it rates every contract
// active in the period with its frozen plan and the period's usage from
// the usage store (RateParts: the fee prorated to the part of the period
// the contract was active and paying, the allowance in full, a trial's
// part free) and stores one invoice per contract and period. It returns how many invoices it stored: closing a
// period again stores none, and a contract whose invoice exists is not
// rated again (an invoice, once issued, does not change; usage that
// arrives later is listed by Reconcile).
//
// The period must be over, SettleDelay included, so that its usage is
// complete. A contract that fails (its plan missing, say) does not stop
// the others: their errors are returned joined, after the others are
// closed, and running CloseMonth again closes what is left.
func (s *Service) CloseMonth(ctx context.Context, period Period) (closed int, err error) {
	list, now, err := s.closedPeriod(ctx, period)
	if err != nil {
		return 0, err
	}
	return eachContract(list, func(c *contracts.Contract) (bool, error) { return s.closeContract(ctx, c, period, now) })
}

// closedPeriod returns the contracts active in a period that is over,
// SettleDelay included (a Conflict, period_not_closed, before), and now.
func (s *Service) closedPeriod(ctx context.Context, period Period) ([]contracts.Contract, time.Time, error) {
	if err := period.Validate(); err != nil {
		return nil, time.Time{}, err
	}
	now := s.Clock.Now().UTC()
	if ready := period.End.Add(s.settleDelay()); now.Before(ready) {
		return nil, now, agentmarket.Errorf(agentmarket.Conflict, "period_not_closed",
			"the period ending %s cannot be closed before %s", period.End.UTC().Format(time.RFC3339), ready.Format(time.RFC3339))
	}
	list, err := s.Contracts.ContractsActiveIn(ctx, period)
	return list, now, err
}

// eachContract calls do for every contract, going on past failures, and
// returns how many it did something to and the failures joined, each
// naming its contract.
func eachContract(list []contracts.Contract, do func(c *contracts.Contract) (bool, error)) (int, error) {
	n := 0
	var errs []error
	for i := range list {
		ok, err := do(&list[i])
		if err != nil {
			errs = append(errs, fmt.Errorf("contract %s: %w", list[i].ID, err))
			continue
		}
		if ok {
			n++
		}
	}
	return n, errors.Join(errs...)
}

func (s *Service) closeContract(ctx context.Context, c *contracts.Contract, period Period, now time.Time) (bool, error) {
	if _, err := s.Store.Invoice(ctx, c.ID, period.Start); err == nil {
		return false, nil
	} else if agentmarket.KindOf(err) != agentmarket.NotFound {
		return false, err
	}
	if _, ok := activeIn(c, period); !ok {
		return false, nil
	}
	parts, ok, err := s.terms().contractParts(ctx, c, period, period.End)
	if err != nil || !ok {
		return false, err
	}
	inv, err := RateParts(period, parts)
	if err != nil {
		return false, err
	}
	return s.Store.SaveInvoice(ctx, &LocalInvoice{ContractID: c.ID, Invoice: *inv, CreatedAt: now})
}

// activeIn is the span of the period in which the contract was active, in
// whole seconds, and whether it was active in the period at all: a stay
// shorter than a second counts (zero seconds of fee, its usage rated).
func activeIn(c *contracts.Contract, p Period) (Period, bool) {
	end := p.End
	if c.CanceledAt != nil && c.CanceledAt.Before(end) {
		end = *c.CanceledAt
	}
	stay := Period{Start: c.CreatedAt, End: end}
	if !touches(p, stay) {
		return Period{}, false
	}
	return clip(p, stay), true
}
