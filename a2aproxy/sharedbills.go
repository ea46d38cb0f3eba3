package a2aproxy

import (
	"context"
	"errors"
	"time"

	"github.com/agentmarket/agentmarket/metering"
)

// billDecider decides a call's bill on the call path (accounting.decide):
// the meter's own book in memory (billBook, the only meter) or the bills
// the meters share (sharedBook, Redis).
type billDecider interface {
	// bill raises the task's bill by the call's report (cum) and what it
	// adds, and returns the increase, the task's total after it, and
	// whether it is the task's first bill. errDeferred (or another error):
	// the row goes pending, billed by the shipper through the ledger.
	// errUnbilled: the row bills nothing.
	bill(ctx context.Context, listingID, taskID string, fresh bool, cum, add metering.Counters, at time.Time) (delta, total metering.Counters, first bool, err error)
	// done notes that a row carrying the task's total was projected, or
	// will not be.
	done(listingID, taskID string, total metering.Counters)
}

var (
	_ billDecider = (*billBook)(nil)
	_ billDecider = sharedBook{}
)

// errUnbilled is a call whose bill could be decided neither in the shared
// bills (they did not answer) nor by the shipper (the task may be billed
// there: the ledger's total would be behind). It bills nothing; a later
// call's cumulative report bills what this one reported.
var errUnbilled = errors.New("the shared bills did not answer for a task they may hold")

// sharedBook decides bills in the bills the meters share (Proxy.Shared
// Bills). Every task it bills was bound by a call that created its bill
// there (fresh); a task it holds no bill of (bound while they were away,
// or its bill expired) is billed through the ledger, in the database, as
// with no shared bills, and so are all its later calls: a task is billed
// in one place only. When the shared bills fail, a call that created its
// task goes to the ledger too (the task then never has a shared bill); one
// about a task that may have one bills nothing (errUnbilled) rather than
// risk billing twice: an agent's cumulative report is billed by the task's
// next call, what the meter estimated for this call alone is not.
type sharedBook struct {
	shared SharedBills
}

func (b sharedBook) bill(ctx context.Context, listingID, taskID string, fresh bool, cum, add metering.Counters, at time.Time) (delta, total metering.Counters, first bool, err error) {
	old, total, first, found, err := b.shared.RaiseBill(ctx, listingID, taskID, fresh, cum, add, at)
	switch {
	case err != nil && fresh:
		return delta, total, false, err
	case err != nil:
		return delta, total, false, errors.Join(errUnbilled, err)
	case !found:
		return delta, total, false, errDeferred
	}
	return total.Sub(old), total, first, nil
}

func (sharedBook) done(string, string, metering.Counters) {}
