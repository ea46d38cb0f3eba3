package a2aproxy

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// Prepaid credit (docs/billing.md, "Prepaid credit"; contracts/credit.go).
//
// A call of an org that holds credit in its listing's currency reserves
// before it is forwarded, against the balance, what it reserves under
// budgets (the plan's per-task price plus its per-call ceiling at its
// rates, reservation) and burns what it cost when it ends (finish): the
// same reservations as budgets, with the account's credited total as the
// limit and its burned total as the spend. So no concurrent burst burns
// past the balance by more than what the admitted calls used beyond their
// reservations, on one meter and, with SharedBudgets (Redis), across every
// meter: one script takes the reservation, the store's burned total passed
// as its floor.
//
// A call the balance cannot cover is refused with CodeCreditExhausted when
// the account is Required; otherwise it goes on without burning (invoiced
// as usual). An org without credit costs the call path one bool test
// (Actor.Credit); an org with credit only in another currency, one map
// lookup.
//
// The burns are written to the store by RunCredit, a few seconds' worth in
// one row per org, currency and contract: a meter killed loses at most
// that interval's burns (the calls were metered to the spool all the
// same, and invoiced: the credit errs on the buyer's side).

// creditFlush is how often a meter writes the burns it settled.
const creditFlush = time.Second

// credit is the chain's stage of prepaid credit.
type credit struct {
	book *creditBook
}

func (s credit) serve(cl *call, next handler) error {
	if !cl.actor.Credit || s.book == nil || cl.plan == nil {
		return next(cl) // no credit: nothing to hold
	}
	if err := s.book.reserve(cl.x.Context(), cl); err != nil {
		return err
	}
	err := next(cl)
	if err != nil {
		s.book.settle(cl, 0) // refused further on: it burned nothing
	}
	return err
}

// creditKey is an org's account in a currency.
type creditKey struct{ org, currency string }

// creditAcct is what this meter knows of an account: the store's credited
// total and burned total (raised by every call settled here since), what
// calls in flight hold.
type creditAcct struct {
	found                    bool // the org has an account in the currency
	required                 bool
	credited, burned, reserd int64
	// base is the store's burned figure as last read: burned - base is
	// what this meter burned since (its share is of what base leaves).
	base   int64
	readAt time.Time
}

// creditHold is a call's reservation against its org's credit.
type creditHold struct {
	acct     *creditAcct // in this meter's memory; nil with id
	id       string      // in the shared state
	key      creditKey
	contract string
	amount   int64
	on       bool
}

// creditBook is the meter's view of the credit accounts its calls burn.
type creditBook struct {
	store   contracts.CreditReader
	shared  SharedBudgets // nil: this meter's memory holds the reservations
	clock   agentmarket.Clock
	refresh time.Duration
	metrics *Metrics
	logger  *slog.Logger
	base    context.Context
	share   localShare // of each balance this meter reserves on its own

	mu      sync.Mutex
	accts   map[creditKey]*creditAcct
	pending map[[3]string]int64 // burns not yet written: org, currency, contract
}

func newCreditBook(store contracts.CreditReader, clock agentmarket.Clock, refresh time.Duration, logger *slog.Logger) *creditBook {
	return &creditBook{store: store, clock: clock, refresh: refresh, logger: logger,
		accts: map[creditKey]*creditAcct{}, pending: map[[3]string]int64{}}
}

// reserve holds cl's reservation against its org's credit in its plan's
// currency, or refuses it.
func (b *creditBook) reserve(ctx context.Context, cl *call) error {
	key := creditKey{cl.actor.OrgID, cl.plan.Currency}
	a, err := b.read(ctx, cl, key)
	if err != nil || !a.found {
		return err
	}
	amount := reservation(cl)
	b.mu.Lock()
	credited, floor, required := a.credited, a.burned, a.required
	b.mu.Unlock()
	if b.shared != nil {
		id := "c:" + key.org + "|" + key.currency
		refused, burned, held, err := b.shared.ReserveBudgets(ctx, []string{id}, []int64{credited}, []int64{floor}, amount)
		switch {
		case err == nil && refused >= 0:
			return b.refuse(cl, key, required, credited-burned, held, amount)
		case err == nil:
			cl.credit = creditHold{id: id, key: key, contract: cl.contract.ID, amount: amount, on: true}
			return nil
		}
		b.metrics.SharedFallback("reserve")
		b.logger.DebugContext(ctx, "credit reserved in this meter's memory: the shared state did not answer", "err", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	held := agentmarket.AddSat(a.burned, a.reserd)
	if after := agentmarket.AddSat(held, amount); after > a.credited || (amount == 0 && held >= a.credited) ||
		b.share.over(a.credited, a.base, a.burned-a.base+a.reserd, amount) {
		return b.refuse(cl, key, a.required, a.credited-a.burned, a.reserd, amount)
	}
	a.reserd += amount
	cl.credit = creditHold{acct: a, key: key, contract: cl.contract.ID, amount: amount, on: true}
	return nil
}

// refuse is the answer to a call the balance cannot cover: a refusal when
// the account is required, else the call goes on unburned.
func (b *creditBook) refuse(cl *call, key creditKey, required bool, balance, held, amount int64) error {
	if !required {
		return nil
	}
	return rpcErr(CodeCreditExhausted, http.StatusOK, fmt.Sprintf(
		"the organisation's prepaid credit in %s cannot take this call: its balance is %d micros, %d are held by calls in flight, and the call reserves %d (its plan's per-task price and per-call ceiling); buy or be granted more credit",
		key.currency, balance, held, amount))
}

// read returns the account of key, read from the store when it was not
// in the last refresh. When the store cannot answer, a reading at most
// lastSpendGrace old stands in; past it the call is refused
// (CodeBudgetUnchecked): credit fails closed.
func (b *creditBook) read(ctx context.Context, cl *call, key creditKey) (*creditAcct, error) {
	now := b.clock.Now()
	b.mu.Lock()
	a := b.accts[key]
	if a == nil {
		a = &creditAcct{}
		b.accts[key] = a
	}
	readAt := a.readAt
	b.mu.Unlock()
	if readingFresh(readAt, now, b.refresh) {
		return a, nil
	}
	got, err := b.store.CreditAccount(ctx, key.org, key.currency)
	if err != nil && agentmarket.KindOf(err) != agentmarket.NotFound {
		if readingTooOld(readAt, now) {
			b.logger.WarnContext(ctx, "call refused: its org's credit cannot be checked", "trace_id", cl.trace.traceID, "org", key.org, "err", err)
			return nil, rpcErr(CodeBudgetUnchecked, http.StatusOK, "the organisation's prepaid credit cannot be checked right now; retry shortly")
		}
		return a, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	a.readAt = now
	if got == nil {
		a.found = false
		return a, nil
	}
	a.found, a.required, a.credited = true, got.Required, got.CreditedMicros
	a.burned = max(a.burned, got.BurnedMicros)
	a.base = max(a.base, got.BurnedMicros)
	return a, nil
}

// settle ends cl's reservation and burns cost. Idempotent: the hold is
// cleared.
func (b *creditBook) settle(cl *call, cost int64) {
	h := cl.credit
	if !h.on {
		return
	}
	cl.credit = creditHold{}
	b.mu.Lock()
	if cost > 0 {
		b.pending[[3]string{h.key.org, h.key.currency, h.contract}] += cost
	}
	if h.acct != nil {
		h.acct.reserd -= h.amount
		h.acct.burned = agentmarket.AddSat(h.acct.burned, cost)
	} else if a := b.accts[h.key]; a != nil {
		// This meter's figure follows the shared one, for a fallback.
		a.burned = agentmarket.AddSat(a.burned, cost)
	}
	b.mu.Unlock()
	if h.id != "" {
		if err := b.shared.SettleBudgets(b.base, []string{h.id}, h.amount, cost); err != nil {
			b.metrics.SharedFallback("settle")
			b.logger.Warn("a call's credit reservation could not be settled in the shared state; it stays held there", "credit", h.id, "err", err)
		}
	}
}

// flush writes the burns settled since the last flush; those the store
// refuses wait for the next.
func (b *creditBook) flush(ctx context.Context) error {
	b.mu.Lock()
	if len(b.pending) == 0 {
		b.mu.Unlock()
		return nil
	}
	taken := b.pending
	b.pending = map[[3]string]int64{}
	b.mu.Unlock()
	now := b.clock.Now().UTC()
	burns := make([]contracts.CreditBurn, 0, len(taken))
	for k, v := range taken {
		burns = append(burns, contracts.CreditBurn{OrgID: k[0], Currency: k[1], ContractID: k[2], Micros: v, At: now})
	}
	if err := b.store.RecordBurns(ctx, burns); err != nil {
		b.mu.Lock()
		for k, v := range taken {
			b.pending[k] += v
		}
		b.mu.Unlock()
		return err
	}
	return nil
}

// RunCredit writes the credit the meter's calls burned, every second,
// until ctx ends, then once more. Without Credit it returns at once.
func (p *Proxy) RunCredit(ctx context.Context) {
	if p.credits == nil {
		return
	}
	t := time.NewTicker(creditFlush)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := p.credits.flush(last); err != nil {
				p.Logger.Error("credit burns not written at shutdown", "err", err)
			}
			return
		case <-t.C:
			if err := p.credits.flush(ctx); err != nil && ctx.Err() == nil {
				p.Logger.Warn("credit burns not written; retried", "err", err)
			}
		}
	}
}
