package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/agentmarket/agentmarket/metering"
)

// Ledger is an in-memory metering.Ledger with the semantics every ledger
// must have: max(billed, cum) + add, the increase returned. It serves the
// tests of what settles pending usage (metering.Settle, the shipper).
type Ledger struct {
	mu     sync.Mutex
	billed map[string]metering.Counters
	// Down fails this many calls with ErrLedgerDown.
	Down atomic.Int64
}

// ErrLedgerDown is what a Ledger that is Down answers.
var ErrLedgerDown = errors.New("ledger database down")

func (l *Ledger) Bill(_ context.Context, listingID, taskID string, cum, add metering.Counters) (metering.Counters, bool, error) {
	if l.Down.Add(-1) >= 0 {
		return metering.Counters{}, false, ErrLedgerDown
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.billed == nil {
		l.billed = map[string]metering.Counters{}
	}
	k := listingID + "/" + taskID
	old, seen := l.billed[k]
	n := old.Raise(cum, add)
	l.billed[k] = n
	return n.Sub(old), !seen, nil
}

// Rates are the prices Pending rows are rated at.
var Rates = metering.Rates{InputTokensPerMillion: 3_000_000, OutputTokensPerMillion: 15_000_000, ComputePerHour: 3_600_000, PerTask: 1_000}

// Pending is u as a row of task whose usage the meter could not bill: its
// billed counters zero, and the usage pending at Rates.
func Pending(u metering.Usage, task string, cum, add metering.Counters) metering.Usage {
	u.TaskID = task
	u.InputTokens, u.OutputTokens, u.ComputeMs, u.Tasks, u.CostMicros = 0, 0, 0, 0, 0
	u.Pending = &metering.PendingBill{Key: task, Cum: cum, Add: add, Rates: Rates}
	return u
}
