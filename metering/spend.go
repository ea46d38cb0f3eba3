package metering

import (
	"context"
	"time"

	"github.com/agentmarket/agentmarket"
)

// Spend reads budgets' spend from the usage store: the list price of the
// usage of one API key or one contract since a time. A spend past the
// int64 range reads as its largest value (Sum), a spent budget.
type Spend struct {
	Store Store
	Clock agentmarket.Clock
}

// Spent is the cost of the usage of apiKeyID and contractID (an empty one
// matches any) from from until an hour past the clock's now.
func (s Spend) Spent(ctx context.Context, apiKeyID, contractID string, from time.Time) (int64, error) {
	totals, err := s.Store.Totals(ctx, Query{GroupBy: ByBuyer, From: from, To: s.Clock.Now().UTC().Add(time.Hour),
		APIKeyID: apiKeyID, ContractID: contractID})
	if err != nil {
		return 0, err
	}
	return Sum(totals).CostMicros, nil
}
