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

// UnratableContract is a contract whose month cannot be rated, and why:
// CloseMonth skips it (the scheduler logs it on every sweep) and nothing
// of that month is invoiced until an operator fixes its cause.
type UnratableContract struct {
	Contract contracts.Contract
	Why      string
}

// Unratable returns the contracts active in period, without an invoice of
// it, whose month cannot be rated (an Invalid error from their terms or
// the rating: a plan in a currency AgentMarket cannot rate, a part the
// rules refuse), each with why, in the order ContractsActiveIn gives. A
// period not over is rated up to now, as a preview is.
func (s *Service) Unratable(ctx context.Context, period Period) ([]UnratableContract, error) {
	if err := period.Validate(); err != nil {
		return nil, err
	}
	list, err := s.Contracts.ContractsActiveIn(ctx, period)
	if err != nil {
		return nil, err
	}
	asOf := period.End
	if now := s.Clock.Now().UTC(); now.Before(asOf) {
		asOf = now
	}
	out := []UnratableContract{}
	for i := range list {
		c := &list[i]
		if _, ok := activeIn(c, period); !ok {
			continue
		}
		if _, err := s.Store.Invoice(ctx, c.ID, period.Start); err == nil {
			continue
		} else if agentmarket.KindOf(err) != agentmarket.NotFound {
			return nil, err
		}
		parts, ok, err := s.terms().contractParts(ctx, c, period, asOf)
		if err == nil && ok {
			_, err = RateParts(period, parts)
		}
		switch {
		case agentmarket.KindOf(err) == agentmarket.Invalid:
			out = append(out, UnratableContract{Contract: *c, Why: whyUnratable(err)})
		case err != nil:
			return nil, fmt.Errorf("contract %s: %w", c.ID, err)
		}
	}
	return out, nil
}

// whyUnratable is why a month cannot be rated, in words for a person: the
// error's message and those of its fields.
func whyUnratable(err error) string {
	var ae *agentmarket.Error
	if !errors.As(err, &ae) {
		return err.Error()
	}
	msg := ae.Message
	for _, fe := range ae.Fields {
		msg += "; " + fe.Message
	}
	return msg
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
	if s.Credit != nil {
		unbilled, err := applyCredit(ctx, s.Credit, c.ID, inv)
		if err != nil {
			return false, err
		}
		// Before the invoice is saved: a close that stops between the two
		// gives it back again, recorded once (its ref).
		if unbilled > 0 && s.CreditBack != nil {
			if _, _, err := s.CreditBack.AddCredit(ctx, &contracts.CreditMovement{ID: agentmarket.NewID("crm"), OrgID: c.BuyerOrgID,
				Currency: inv.Currency, Kind: contracts.CreditUnbilled, AmountMicros: unbilled, ContractID: c.ID,
				Ref: UnbilledKey(c.ID, period.Start), Actor: "billing",
				Note: fmt.Sprintf("burned beyond the invoice of %s", period.Start.Format("2006-01")), At: now}); err != nil {
				return false, err
			}
		}
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
