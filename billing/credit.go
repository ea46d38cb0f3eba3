package billing

import (
	"context"
	"math/big"
	"time"
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
// rule), at most the total.
func applyCredit(ctx context.Context, credit CreditBurns, contractID string, inv *Invoice) error {
	burned, err := credit.CreditBurned(ctx, contractID, inv.Period.Start, inv.Period.End)
	if err != nil || burned <= 0 {
		return err
	}
	perMinor := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(6-inv.MinorUnitDigits)), nil)
	minor := roundHalfUp(new(big.Rat).SetFrac(big.NewInt(burned), perMinor)).Int64()
	inv.CreditAppliedMinor = min(minor, inv.TotalMinor)
	return nil
}
