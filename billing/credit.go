package billing

import (
	"context"
	"fmt"
	"math/big"
	"time"

	"github.com/agentmarket/agentmarket/contracts"
)

// Invoices apply prepaid credit before charging (contracts/credit.go): the
// usage a contract's calls paid from the org's credit, burned by the
// meter as they ran, is taken off the invoice of the period it happened
// in, so it is never charged twice. The monthly fee and usage the credit
// did not cover (an account not required, once spent) are charged as
// usual.

// CreditBurns tells what a contract's calls burned of their org's credit
// in [from, to) (contracts.CreditStore implements it).
type CreditBurns interface {
	CreditBurned(ctx context.Context, contractID string, from, to time.Time) (int64, error)
}

// applyCredit sets inv's CreditAppliedMinor from what the contract burned
// in inv's period: in minor units, rounded half up (the invoice's one
// rule), at most the total. It returns what was burned beyond what the
// invoice applied, in micros (0 when nothing was): the own ledger gives
// it back to the balance (Service.CreditBack).
func applyCredit(ctx context.Context, credit CreditBurns, contractID string, inv *Invoice) (int64, error) {
	burned, err := credit.CreditBurned(ctx, contractID, inv.Period.Start, inv.Period.End)
	if err != nil || burned <= 0 {
		return 0, err
	}
	perMinor := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(6-inv.MinorUnitDigits)), nil)
	minor := roundHalfUp(new(big.Rat).SetFrac(big.NewInt(burned), perMinor)).Int64()
	inv.CreditAppliedMinor = min(minor, inv.TotalMinor)
	return max(0, burned-inv.CreditAppliedMinor*perMinor.Int64()), nil
}

// CreditReturns gives back to an org's balance what its calls burned
// beyond what their invoice charged (contracts.CreditStore implements it;
// a movement of the same kind and ref is recorded once).
type CreditReturns interface {
	AddCredit(ctx context.Context, m *contracts.CreditMovement) (*contracts.CreditAccount, bool, error)
}

// UnbilledKey is the idempotency key of what a contract's calls burned
// beyond its invoice of the period starting at periodStart.
func UnbilledKey(contractID string, periodStart time.Time) string {
	return fmt.Sprintf("am1/contract/%s/unbilled/%d", contractID, periodStart.Unix())
}

// CreditKey is the idempotency key of a contract's credit item of a
// period.
func CreditKey(contractID string, periodStart time.Time) string {
	return fmt.Sprintf("am1/contract/%s/credit/%d", contractID, periodStart.Unix())
}

// ApplyCredits gives back at the provider, for every contract whose calls
// burned prepaid credit in a closed period, what they burned: a negative
// invoice item on the subscription's next invoice (key CreditKey), since
// the usage itself was reported to the provider's metered items in full.
// The item is recorded before the provider is called and marked sent
// after, so a crash or a second run credits it once. Without a Provider
// (the own ledger's invoices apply credit themselves, CloseMonth) or
// Credit it does nothing. It returns how many items the provider took.
func (s *Service) ApplyCredits(ctx context.Context, period Period) (int, error) {
	if s.Provider == nil || s.Credit == nil {
		return 0, nil
	}
	list, now, err := s.closedPeriod(ctx, period)
	if err != nil {
		return 0, err
	}
	return eachContract(list, func(c *contracts.Contract) (bool, error) { return s.giveBackCredit(ctx, c, period, now) })
}

func (s *Service) giveBackCredit(ctx context.Context, c *contracts.Contract, period Period, now time.Time) (bool, error) {
	item, sub, skip, err := s.pendingItem(ctx, c.ID, period, s.Store.CreditItem)
	if skip {
		return false, err
	}
	resend := item != nil
	if item == nil {
		burned, err := s.Credit.CreditBurned(ctx, c.ID, period.Start, period.End)
		if err != nil || burned <= 0 {
			return false, err
		}
		plan, err := s.Plans.Plan(ctx, c.ListingID, c.PlanVersion)
		if err != nil {
			return false, err
		}
		digits, err := MinorUnitDigits(plan.Currency)
		if err != nil {
			return false, err
		}
		perMinor := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(6-digits)), nil)
		minor := roundHalfUp(new(big.Rat).SetFrac(big.NewInt(burned), perMinor)).Int64()
		if minor == 0 {
			return false, nil
		}
		item, err = s.Store.AddCreditItem(ctx, &CommitmentCharge{ContractID: c.ID, PeriodStart: period.Start, Currency: plan.Currency,
			AmountMinor: -minor, IdempotencyKey: CreditKey(c.ID, period.Start), CreatedAt: now,
			Description: "Prepaid credit applied, " + period.Start.Format("January 2006")})
		if err != nil {
			return false, err
		}
	}
	if err := s.sendItem(ctx, c, sub, item, period, now, resend); err != nil {
		return false, err
	}
	return true, s.Store.MarkCreditItemSent(ctx, c.ID, period.Start, now)
}
