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
// matches any) from from (a UTC midnight: a month's start) on.
func (s Spend) Spent(ctx context.Context, apiKeyID, contractID string, from time.Time) (int64, error) {
	totals, err := s.Store.Totals(ctx, Query{GroupBy: ByBuyer, From: from, To: SpendUntil(s.Clock.Now()),
		APIKeyID: apiKeyID, ContractID: contractID})
	if err != nil {
		return 0, err
	}
	return Sum(totals).CostMicros, nil
}

// SpendUntil is the end of a budget's spend query made at now: the UTC
// midnight after an hour past now (rows a clock slightly ahead stamped are
// counted). A range of whole days is what a store's daily rollups answer
// without reading the rows: a meter reads a budget's spend every few
// seconds under load, and all of today's rows would otherwise be read
// each time.
func SpendUntil(now time.Time) time.Time {
	t := now.UTC().Add(time.Hour)
	return time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC)
}
