package metering

import (
	"context"

	"github.com/agentmarket/agentmarket"
)

// Counters are the billable quantities of a task.
type Counters struct {
	InputTokens  int64
	OutputTokens int64
	ComputeMs    int64
}

// Sub returns c - d.
func (c Counters) Sub(d Counters) Counters {
	return Counters{c.InputTokens - d.InputTokens, c.OutputTokens - d.OutputTokens, c.ComputeMs - d.ComputeMs}
}

// Raise is what a task's billed counters c become when a call reports cum
// (the agent's cumulative counters) and adds add (estimates, observed
// compute): max(c, cum) + add, each sum saturating (agentmarket.AddSat),
// so a counter at the top of the int64 range stays there instead of
// wrapping to a negative one, which the next call would bill as an
// increase of almost 2^63. The one rule every ledger bills by.
func (c Counters) Raise(cum, add Counters) Counters {
	return Counters{
		InputTokens:  agentmarket.AddSat(max(c.InputTokens, cum.InputTokens), add.InputTokens),
		OutputTokens: agentmarket.AddSat(max(c.OutputTokens, cum.OutputTokens), add.OutputTokens),
		ComputeMs:    agentmarket.AddSat(max(c.ComputeMs, cum.ComputeMs), add.ComputeMs),
	}
}

// Clamp bounds each counter to [0, agentmarket.MaxQuantity] (what an agent
// may report for one task) and reports whether any was out of bounds: a
// report past the bound counts as the bound, never as a wrapped or
// negative number.
func (c Counters) Clamp() (Counters, bool) {
	clamped := false
	for _, v := range []*int64{&c.InputTokens, &c.OutputTokens, &c.ComputeMs} {
		switch {
		case *v < 0:
			*v, clamped = 0, true
		case *v > agentmarket.MaxQuantity:
			*v, clamped = agentmarket.MaxQuantity, true
		}
	}
	return c, clamped
}

// Zero reports whether nothing is counted.
func (c Counters) Zero() bool { return c == Counters{} }

// Ledger remembers what has been billed per task, so that cumulative
// reports, replays, resubscribes and polls bill only the increase.
// Implementations must be safe across processes (several meters).
type Ledger interface {
	// Bill raises the task's billed counters: each counter becomes
	// max(billed, cum) + add. It returns the increase (never negative) and
	// whether this call is the first to bill the task.
	Bill(ctx context.Context, listingID, taskID string, cum, add Counters) (delta Counters, first bool, err error)
}

// BillRequest is one Bill call, for batches.
type BillRequest struct {
	ListingID, TaskID string
	Cum, Add          Counters
	// RowID, when set, names the usage row the bill is for: a BatchLedger
	// bills each row id once, and answers a request for a row it billed
	// already with that first answer (a row settled again after a crash, or
	// by the shipper after it was settled ahead, is not billed twice).
	RowID string
}

// BillResult is what Bill answered for one request of a batch.
type BillResult struct {
	Delta Counters
	First bool
	Err   error
}

// BatchLedger bills many tasks at once (one commit for the batch), for
// meters under load, and bills each request's RowID at most once.
type BatchLedger interface {
	Ledger
	BillMany(ctx context.Context, reqs []BillRequest) []BillResult
}
