package billing

import (
	"context"
	"math/big"
	"slices"
	"strings"
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
	committed, err := s.committed(ctx, c, period)
	if err != nil {
		return false, err
	}
	shares, err := s.sharesAllowance(ctx, c, period)
	if err != nil || (!committed && !shares) {
		return false, err
	}
	charge, sub, skip, err := s.pendingItem(ctx, c.ID, period, s.Store.CommitmentCharge)
	if skip {
		return false, err
	}
	resend := charge != nil
	if charge == nil {
		parts, ok, err := s.terms().contractParts(ctx, c, period, period.End)
		if err != nil || !ok {
			return false, err
		}
		own, err := RateParts(period, parts)
		if err != nil {
			return false, err
		}
		// The provider rounds each subscription's invoice itself: it
		// rates the parts without the month's rounding carry, and what
		// the carry changes of the own total is charged here (carried).
		inv := own
		if own.CarriedMicros != nil {
			parts = slices.Clone(parts)
			parts[0].RoundingCarry = nil
			if inv, err = RateParts(period, parts); err != nil {
				return false, err
			}
		}
		var minor int64
		for _, l := range inv.Lines {
			if l.Kind == LineCommitment {
				minor += l.AmountMinor
			}
		}
		shared, err := allowanceShared(period, parts, inv, minor)
		if err != nil {
			return false, err
		}
		carried := own.TotalMinor - inv.TotalMinor
		if minor+shared+carried == 0 {
			return false, nil
		}
		charge, err = s.Store.AddCommitmentCharge(ctx, &CommitmentCharge{ContractID: c.ID, PeriodStart: period.Start, Currency: inv.Currency,
			AmountMinor: minor + shared + carried, IdempotencyKey: CommitmentKey(c.ID, period.Start), CreatedAt: now,
			Description: adjustmentDescription(minor, shared, carried, period)})
		if err != nil {
			return false, err
		}
	}
	desc := charge.Description
	if desc == "" {
		desc = adjustmentDescription(charge.AmountMinor, 0, 0, period)
	}
	item := *charge
	item.Description = desc
	if err := s.sendItem(ctx, c, sub, &item, period, now, resend); err != nil {
		return false, err
	}
	return true, s.Store.MarkCommitmentChargeSent(ctx, c.ID, period.Start, now)
}

// sendItem sends a contract's recorded item of a closed period to the
// provider. The item goes on the invoice of the stay's subscription while
// it lives; a stay that has ended (a short stay, usually, by the time its
// month is charged) has no more invoices, so its item goes to the org's
// live subscription on the same listing (same customer, same seller) or,
// with none, onto the customer's own invoice, issued at once
// (InvoiceItem.SubscriptionID empty). resend says the item was recorded by
// an earlier run, which may have reached the provider.
func (s *Service) sendItem(ctx context.Context, c *contracts.Contract, sub *Subscription, item *CommitmentCharge, period Period,
	now time.Time, resend bool) error {
	target, err := s.invoicingSubscription(ctx, c, sub, now)
	if err != nil {
		return err
	}
	return s.Provider.AddInvoiceItem(ctx, InvoiceItem{CustomerID: sub.CustomerID, SubscriptionID: target, ContractID: c.ID,
		Currency: item.Currency, AmountMinor: item.AmountMinor, IdempotencyKey: item.IdempotencyKey, Period: period,
		Description: item.Description, Resend: resend})
}

// invoicingSubscription is the subscription whose next invoice takes an
// item of contract c: its own while it lives, else the newest live one of
// the org's other stays on the listing, else none ("").
func (s *Service) invoicingSubscription(ctx context.Context, c *contracts.Contract, sub *Subscription, now time.Time) (string, error) {
	if sub.CanceledAt == nil && (c.CanceledAt == nil || c.CanceledAt.After(now)) {
		return sub.Refs.ID, nil
	}
	if s.Stays == nil {
		return "", nil
	}
	list, err := s.Stays.ListContracts(ctx, c.BuyerOrgID)
	if err != nil {
		return "", err
	}
	var newest *contracts.Contract
	var live string
	for i := range list {
		x := &list[i]
		if x.ListingID != c.ListingID || x.ID == c.ID || (x.CanceledAt != nil && !x.CanceledAt.After(now)) ||
			(newest != nil && startsBefore(x, newest)) {
			continue
		}
		other, err := s.Store.Subscription(ctx, x.ID)
		switch {
		case agentmarket.KindOf(err) == agentmarket.NotFound:
			continue
		case err != nil:
			return "", err
		case other.CanceledAt == nil && other.CustomerID == sub.CustomerID:
			newest, live = x, other.Refs.ID
		}
	}
	return live, nil
}

// pendingItem is a contract's item of a period as recorded (nil: none
// yet) and its subscription; skip is set when there is nothing to send
// (the item was sent, or the contract has no subscription at the
// provider) or on err.
func (s *Service) pendingItem(ctx context.Context, contractID string, period Period,
	recorded func(context.Context, string, time.Time) (*CommitmentCharge, error)) (item *CommitmentCharge, sub *Subscription, skip bool, err error) {
	item, err = recorded(ctx, contractID, period.Start)
	switch {
	case err == nil && item.SentAt != nil:
		return nil, nil, true, nil
	case err != nil && agentmarket.KindOf(err) != agentmarket.NotFound:
		return nil, nil, true, err
	}
	sub, err = s.Store.Subscription(ctx, contractID)
	if agentmarket.KindOf(err) == agentmarket.NotFound {
		return nil, nil, true, nil
	}
	return item, sub, err != nil, err
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

// adjustmentDescription is the invoice item's text, naming what it holds:
// the commitment's shortfall, the allowance the month's earlier stays and
// plans used, what the month's rounding carry changes (a cent either
// way: the item may be a credit).
func adjustmentDescription(commitment, shared, carried int64, period Period) string {
	var what []string
	if commitment != 0 || (shared == 0 && carried == 0) {
		what = append(what, "minimum commitment shortfall")
	}
	if shared != 0 {
		what = append(what, "monthly allowance already used by earlier subscriptions or plans")
	}
	if carried != 0 {
		what = append(what, "this month's earlier subscriptions rounded once with this one")
	}
	text := strings.Join(what, " and ")
	return strings.ToUpper(text[:1]) + text[1:] + ", " + period.Start.Format("January 2006")
}

// sharesAllowance reports whether the contract's month draws on an
// allowance that other parts used first: it changed plans in the period,
// or the org had an earlier stay on the listing in it (plans and
// contracts only: no usage is read for the others).
func (s *Service) sharesAllowance(ctx context.Context, c *contracts.Contract, period Period) (bool, error) {
	changes, err := planChanges(ctx, s.History, c)
	if err != nil {
		return false, err
	}
	for _, ch := range changes {
		if period.Contains(ch.At) {
			return true, nil
		}
	}
	if s.Stays == nil {
		return false, nil
	}
	list, err := s.Stays.ListContracts(ctx, c.BuyerOrgID)
	if err != nil {
		return false, err
	}
	for i := range list {
		x := &list[i]
		if x.ListingID == c.ListingID && x.ID != c.ID && startsBefore(x, c) {
			if _, ok := activeIn(x, period); ok {
				return true, nil
			}
		}
	}
	return false, nil
}

// allowanceShared is what the provider's prices miss of the month's
// invoice, in minor units: a metered price's free first tier applies per
// subscription item and period, so each stay and each plan of the month
// gets its tier in full there, where the own rating shares one allowance
// (the allowance rule). It is the invoice's total, less its commitment
// lines (charged apart), less the same parts rated each with a fresh
// allowance and no commitment, rounded once as the invoice is; never
// negative. parts and inv are without the month's rounding carry.
func allowanceShared(period Period, parts []Part, inv *Invoice, commitmentMinor int64) (int64, error) {
	if len(parts) == 1 && parts[0].AllowanceUsed == (Usage{}) {
		return 0, nil
	}
	fresh := new(big.Rat)
	for _, p := range parts {
		p.AllowanceUsed = Usage{}
		p.Plan.MinCommitMicros = 0
		one, err := RateParts(period, []Part{p})
		if err != nil {
			return 0, err
		}
		fresh.Add(fresh, one.ExactMicros())
	}
	// Nothing is charged unless the shared allowance costs something
	// exactly: the roundings alone must not make a cent.
	var commitExact big.Rat
	for _, l := range inv.Lines {
		if l.Kind == LineCommitment {
			commitExact.Add(&commitExact, l.ExactMicros())
		}
	}
	if new(big.Rat).Sub(new(big.Rat).Sub(inv.ExactMicros(), &commitExact), fresh).Sign() <= 0 {
		return 0, nil
	}
	perMinor := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(6-inv.MinorUnitDigits)), nil))
	freshMinor := roundHalfUp(fresh.Quo(fresh, perMinor)).Int64()
	return max(0, inv.TotalMinor-commitmentMinor-freshMinor), nil
}
