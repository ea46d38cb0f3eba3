package a2aproxy

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/metering"
)

// Budgets that hold under concurrency (docs/billing.md, "Budgets").
//
// A call under a monthly budget (its API key's, its subscription's, its
// org's)
// reserves before it is forwarded and settles when it ends (finish): a
// send reserves the plan's per-task price plus its per-call ceiling
// (listings.Plan.CallCeiling) at the plan's rates; any other call reserves
// nothing. A call is admitted only if, for each of its budgets, what was
// spent this month, what the calls in flight reserve and its own
// reservation fit within the budget (a call reserving nothing: if spent
// and reserved stay below it). When it ends, its reservation is released
// and what it cost is added to the spend, in this meter's memory, at
// once. So no concurrent burst spends past a budget by more than what the
// admitted calls used beyond their reservations: the overshoot bound,
// tested by TestBudgetBurst (cmd/marketplace).
//
// The spend starts from the usage store's figure and is read again every
// CacheTTL, raised to it when the store says more (calls through other
// meters, which this meter does not see); the store never lowers it, since
// it lags this meter's own calls by the spool's shipping.
//
// With SharedBudgets (Redis) the spend and the holds live there, for every
// meter of the deployment: a reservation is taken under all of a call's
// budgets at once by one script, the store's figure passed as a floor, so
// the bound holds across meters. While Redis fails, a meter holds the
// budgets on its own (its holds then settle in its memory), never with no
// budget and never refusing every call. Without it each meter holds its
// budgets on its own, and the calls of other meters count once the store
// has them.

// reserve is the chain's stage of budgets: it holds a call's reservation
// (a budgetHold on the call) while the call runs.
type reserve struct {
	book *budgetBook
}

func (r reserve) serve(cl *call, next handler) error {
	if cl.actor.KeyBudgetMicros == nil && cl.contract.MonthlyBudgetMicros == nil && cl.actor.OrgBudgetMicros == nil {
		return next(cl) // no budget: nothing to hold, no lock taken
	}
	if err := r.book.reserve(cl.x.Context(), cl, reservation(cl)); err != nil {
		return err
	}
	err := next(cl)
	if err != nil {
		// Refused further on: it used nothing (a refusal metered by fail
		// settles nothing more, the hold being gone).
		r.book.settle(cl, 0)
	}
	return err
}

// reservation is what a call reserves: for a send, the plan's per-task
// price and its per-call ceiling at its rates; else nothing.
func reservation(cl *call) int64 {
	if cl.plan == nil || cl.req == nil || (cl.req.Method != wire.MethodSend && cl.req.Method != wire.MethodStream) {
		return 0
	}
	in, out, ms := cl.plan.CallCeiling()
	return metering.Price(rates(*cl.plan), metering.Counters{InputTokens: in, OutputTokens: out, ComputeMs: ms}, 1)
}

// lastSpendGrace is how old the last spend read for a budget may be and
// still stand in when the usage store cannot answer. Past it, budgets fail
// closed: a call under a budget is refused (CodeBudgetUnchecked) until the
// spend can be read again, so a budget is never overshot by more than
// what a minute of calls costs. Calls without a budget go on (their usage
// is spooled).
const lastSpendGrace = time.Minute

// readingFresh reports whether a reading taken at at (zero: never) is
// recent enough, within refresh, to serve without asking the store.
func readingFresh(at, now time.Time, refresh time.Duration) bool {
	return !at.IsZero() && now.Sub(at) < refresh
}

// readingTooOld reports whether a reading taken at at (zero: never) may no
// longer stand in for one the store cannot give: past lastSpendGrace the
// call is refused (budgets and credit fail closed).
func readingTooOld(at, now time.Time) bool {
	return at.IsZero() || now.Sub(at) > lastSpendGrace
}

// budgetBook is the meter's spend and reservations of every budget it
// holds this month.
type budgetBook struct {
	spend   Spend
	orgs    OrgSpend      // nil: org budgets are not held
	shared  SharedBudgets // nil: this meter's memory holds them
	base    context.Context
	metrics *Metrics
	clock   agentmarket.Clock
	refresh time.Duration // how often the store's figure is read again
	logger  *slog.Logger
	share   localShare // of each budget this meter reserves on its own

	mu    sync.Mutex
	month time.Time // of accts; a new month starts them afresh
	accts map[budgetKey]*budgetAcct
}

type budgetKey struct {
	kind budgetKind
	id   string
}

type budgetKind uint8

const (
	keyBudget budgetKind = iota
	contractBudget
	orgBudget
)

// budgetAcct is one budget's month: spent is the store's figure raised by
// every call settled here since (a lower figure from the store is this
// meter's calls not yet shipped), reserved what the calls in flight hold.
type budgetAcct struct {
	spent, reserved int64
	// base is the store's figure as last read: spent - base is what this
	// meter settled since (its share is of what base leaves).
	base   int64
	readAt time.Time // the store's figure was last read; zero: never
	// reading: a call is reading the store's figure now; the others go on
	// with the last one meanwhile (within lastSpendGrace) instead of
	// sending the store the same query each.
	reading bool
}

// budgetHold is a call's reservation: the budgets it holds and how much,
// in this meter's memory (accts) or in the shared state (ids).
type budgetHold struct {
	accts  [3]*budgetAcct
	ids    []string
	n      int
	amount int64
}

func newBudgetBook(spend Spend, orgs OrgSpend, clock agentmarket.Clock, refresh time.Duration, logger *slog.Logger) *budgetBook {
	return &budgetBook{spend: spend, orgs: orgs, clock: clock, refresh: refresh, logger: logger, accts: map[budgetKey]*budgetAcct{}}
}

// reserve admits cl under its budgets with amount held, or refuses it:
// CodeBudgetExhausted when a budget cannot take it, CodeBudgetUnchecked
// when a budget's spend is unknown (budgets fail closed, lastSpendGrace).
func (b *budgetBook) reserve(ctx context.Context, cl *call, amount int64) error {
	if b.spend == nil {
		return nil
	}
	now := b.clock.Now()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	type budget struct {
		micros *int64
		key    budgetKey
		what   string
		acct   *budgetAcct
	}
	bs := [3]budget{{cl.actor.KeyBudgetMicros, budgetKey{keyBudget, cl.actor.KeyID}, "API key", nil},
		{cl.contract.MonthlyBudgetMicros, budgetKey{contractBudget, cl.contract.ID}, "subscription", nil},
		{cl.actor.OrgBudgetMicros, budgetKey{orgBudget, cl.actor.OrgID}, "organisation", nil}}
	for i := range bs {
		if bs[i].micros == nil || (bs[i].key.kind == orgBudget && b.orgs == nil) {
			continue
		}
		a, err := b.read(ctx, cl, bs[i].key, month, now, bs[i].what)
		if err != nil {
			return err
		}
		bs[i].acct = a
	}
	if b.shared != nil {
		var ids []string
		var limits, floors []int64
		var whats []string
		for _, bg := range bs {
			if bg.acct != nil {
				ids = append(ids, fmt.Sprintf("%c:%s|%s", "kco"[bg.key.kind], bg.key.id, month.Format("2006-01")))
				limits, whats = append(limits, *bg.micros), append(whats, bg.what)
				b.mu.Lock()
				floors = append(floors, bg.acct.spent)
				b.mu.Unlock()
			}
		}
		refused, spent, held, err := b.shared.ReserveBudgets(ctx, ids, limits, floors, amount)
		switch {
		case err == nil && refused >= 0:
			return exhausted(whats[refused], limits[refused], spent, held, amount)
		case err == nil:
			cl.hold = budgetHold{ids: ids, n: len(ids), amount: amount}
			return nil
		}
		// Redis failed: this meter holds the budgets on its own meanwhile.
		b.metrics.SharedFallback("reserve")
		b.logger.DebugContext(ctx, "budgets reserved in this meter's memory: the shared state did not answer", "err", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, bg := range bs {
		if bg.acct == nil {
			continue
		}
		held := agentmarket.AddSat(bg.acct.spent, bg.acct.reserved)
		if after := agentmarket.AddSat(held, amount); after > *bg.micros || (amount == 0 && held >= *bg.micros) ||
			b.share.over(*bg.micros, bg.acct.base, bg.acct.spent-bg.acct.base+bg.acct.reserved, amount) {
			return exhausted(bg.what, *bg.micros, bg.acct.spent, bg.acct.reserved, amount)
		}
	}
	h := budgetHold{amount: amount}
	for _, bg := range bs {
		if bg.acct != nil {
			bg.acct.reserved += amount
			h.accts[h.n] = bg.acct
			h.n++
		}
	}
	cl.hold = h
	return nil
}

// exhausted is the refusal of a call a budget cannot take.
func exhausted(what string, budget, spent, held, amount int64) error {
	return rpcErr(CodeBudgetExhausted, http.StatusOK, fmt.Sprintf(
		"the %s's monthly budget of %d micros cannot take this call: %d micros are spent this month and %d held by calls in flight, and the call reserves %d (its plan's per-task price and per-call ceiling)",
		what, budget, spent, held, amount))
}

// read returns key's account for month, read from the store when it was
// not in the last refresh. When the store cannot answer, a reading at most
// lastSpendGrace old stands in; past it the call is refused.
func (b *budgetBook) read(ctx context.Context, cl *call, key budgetKey, month, now time.Time, what string) (*budgetAcct, error) {
	b.mu.Lock()
	if !b.month.Equal(month) {
		b.month, b.accts = month, map[budgetKey]*budgetAcct{}
	}
	a := b.accts[key]
	if a == nil {
		a = &budgetAcct{}
		b.accts[key] = a
	}
	readAt := a.readAt
	if readingFresh(readAt, now, b.refresh) || (a.reading && !readingTooOld(readAt, now)) {
		b.mu.Unlock()
		return a, nil
	}
	a.reading = true
	b.mu.Unlock()
	spent, err := b.spent(ctx, key, month)
	b.mu.Lock()
	a.reading = false
	b.mu.Unlock()
	if err != nil {
		if readingTooOld(readAt, now) {
			b.logger.WarnContext(ctx, "call refused: its budget cannot be checked, the usage store is unavailable",
				"trace_id", cl.trace.traceID, "budget_of", what, "err", err)
			return nil, rpcErr(CodeBudgetUnchecked, http.StatusOK, fmt.Sprintf("the %s's monthly budget cannot be checked right now (spend is unavailable); retry shortly", what))
		}
		return a, nil
	}
	b.mu.Lock()
	a.spent = max(a.spent, spent)
	a.base = max(a.base, spent)
	a.readAt = now
	b.mu.Unlock()
	return a, nil
}

// spent is the store's figure of key's budget this month.
func (b *budgetBook) spent(ctx context.Context, key budgetKey, month time.Time) (int64, error) {
	switch key.kind {
	case contractBudget:
		return b.spend.Spent(ctx, "", key.id, month)
	case orgBudget:
		return b.orgs.OrgSpent(ctx, key.id, month)
	}
	return b.spend.Spent(ctx, key.id, "", month)
}

// settle ends cl's reservation, adding cost to the spend of the budgets it
// held. It is idempotent: the hold is cleared.
func (b *budgetBook) settle(cl *call, cost int64) {
	h := cl.hold
	if h.n == 0 {
		return
	}
	cl.hold = budgetHold{}
	if h.ids != nil {
		// On the meter's own context: the buyer may be gone. A settle
		// that fails leaves the hold in Redis until the month's hash
		// expires: the budget errs on the side of stopping early.
		if err := b.shared.SettleBudgets(b.base, h.ids, h.amount, cost); err != nil {
			b.metrics.SharedFallback("settle")
			b.logger.Warn("a call's reservation could not be settled in the shared state; it stays held there", "budgets", h.ids, "err", err)
		}
		return
	}
	b.mu.Lock()
	for _, a := range h.accts[:h.n] {
		a.reserved -= h.amount
		a.spent = agentmarket.AddSat(a.spent, cost)
	}
	b.mu.Unlock()
}

// settledCost is what a call's usage row costs: its decided cost when the
// meter billed it on the call path (bill book, shared bills), else (the
// row left pending to the shipper) the price of what its task reported or
// was estimated so far, which is at least the call's share: a task of
// several calls through a meter that leaves bills pending counts high
// until the store's figure is read again (it never lowers the spend, so
// such a budget errs on the side of stopping early).
func settledCost(cl *call, u *metering.Usage) int64 {
	if u.Pending == nil {
		return u.CostMicros
	}
	var tasks int64
	if cl.binds != nil {
		tasks = 1
	}
	return metering.Price(u.Pending.Rates, metering.Counters{}.Raise(u.Pending.Cum, u.Pending.Add), tasks)
}
