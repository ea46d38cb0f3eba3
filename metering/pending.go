package metering

import (
	"context"
	"math"
	"math/big"
)

// Rates are a plan's usage prices, in micro-units: per million tokens, per
// hour of compute (billed per millisecond), per task.
type Rates struct {
	InputTokensPerMillion  int64
	OutputTokensPerMillion int64
	ComputePerHour         int64
	PerTask                int64
}

// Price is the list price of some usage at rates, in micro-units, rounded
// half up once. Monthly allowances apply on the invoice (package billing
// re-rates the period's totals), not here.
//
// Token prices are per million tokens and compute per hour (billed per
// millisecond), so the parts are summed exactly over the common
// denominator 18,000,000 (lcm of 10^6 and 3.6·10^6) and divided once. Every
// realistic call takes the int64 path; larger values are priced with big
// integers, and a cost beyond int64 saturates at its maximum.
func Price(r Rates, d Counters, tasks int64) int64 {
	const den = 18_000_000
	small := func(vs ...int64) bool {
		for _, v := range vs {
			if v < 0 || v >= 1<<26 {
				return false
			}
		}
		return true
	}
	if small(d.InputTokens, d.OutputTokens, d.ComputeMs, tasks) &&
		small(r.InputTokensPerMillion>>4, r.OutputTokensPerMillion>>4, r.ComputePerHour>>4, r.PerTask>>4) {
		n := (d.InputTokens*r.InputTokensPerMillion+d.OutputTokens*r.OutputTokensPerMillion)*18 +
			d.ComputeMs*r.ComputePerHour*5 +
			tasks*r.PerTask*den
		return (n + den/2) / den
	}
	b := func(v int64) *big.Int { return big.NewInt(v) }
	n := new(big.Int).Mul(b(d.InputTokens), b(r.InputTokensPerMillion))
	n.Add(n, new(big.Int).Mul(b(d.OutputTokens), b(r.OutputTokensPerMillion)))
	n.Mul(n, b(18))
	n.Add(n, new(big.Int).Mul(new(big.Int).Mul(b(d.ComputeMs), b(r.ComputePerHour)), b(5)))
	n.Add(n, new(big.Int).Mul(new(big.Int).Mul(b(tasks), b(r.PerTask)), b(den)))
	n.Add(n, b(den/2))
	n.Quo(n, b(den))
	if !n.IsInt64() {
		return math.MaxInt64
	}
	return n.Int64()
}

// PendingBill is usage a meter observed and has not billed yet: what it
// asks the ledger, and the prices to rate the answer at. The meter spools
// every row with it (no ledger on the call path), and Settle bills it
// before the row is stored.
type PendingBill struct {
	// Key is the ledger's task key (the task id, or "call:<row id>").
	Key      string
	Cum, Add Counters
	Rates    Rates
}

// Settle bills the pending usage of rows through the ledger: each such row
// gets the increase the ledger grants, a task count of 1 when this is the
// task's first bill, and its cost; its Pending is cleared. Rows without
// pending usage are left alone. On an error no row is changed half-way
// (a row is changed only once its bill is in), and the caller retries.
//
// With a BatchLedger each row is billed once by its id: a crash after the
// ledger billed a row and before the row was stored (the spool then
// replays it), or a row settled ahead and settled again, gets the same
// answer as the first time and bills nothing more. A plain Ledger has no
// such memory: a replayed row bills its Add counters (estimates, observed
// compute) again, though never its Cum counters (the agent's own
// cumulative report).
func Settle(ctx context.Context, l Ledger, rows []Usage) error {
	var idx []int
	var reqs []BillRequest
	for i := range rows {
		if p := rows[i].Pending; p != nil {
			idx = append(idx, i)
			reqs = append(reqs, BillRequest{ListingID: rows[i].ListingID, TaskID: p.Key, Cum: p.Cum, Add: p.Add, RowID: rows[i].ID})
		}
	}
	if len(reqs) == 0 {
		return nil
	}
	var res []BillResult
	if bl, ok := l.(BatchLedger); ok {
		res = bl.BillMany(ctx, reqs)
	} else {
		res = make([]BillResult, len(reqs))
		for i, r := range reqs {
			res[i].Delta, res[i].First, res[i].Err = l.Bill(ctx, r.ListingID, r.TaskID, r.Cum, r.Add)
		}
	}
	var firstErr error
	for j, i := range idx {
		if res[j].Err != nil {
			if firstErr == nil {
				firstErr = res[j].Err
			}
			continue
		}
		u := &rows[i]
		d := res[j].Delta
		u.InputTokens, u.OutputTokens, u.ComputeMs = d.InputTokens, d.OutputTokens, d.ComputeMs
		if res[j].First && u.TaskID != "" {
			u.Tasks = 1
		}
		u.CostMicros = Price(u.Pending.Rates, d, u.Tasks)
		u.Pending = nil
	}
	return firstErr
}
