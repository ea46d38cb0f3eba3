package billing_test

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

// sequenceRuns is the budget of random buyer sequences a run of the
// suite tries, besides the regression cases (each a few months of a few
// orgs on real stores: SQLite and the embedded usage store).
const sequenceRuns = 25

// TestPropertyBuyerSequences plays random sequences of what buyers do —
// subscribe (with a trial, once per org), use, change plans, accept
// private offers (a subscription at the offer's private plan, with its
// trial when the org had none, or a plan change to it; each offer once),
// cancel, resubscribe, stays shorter than a second — for three orgs over
// three months, closing each month, and holds the billing to a small
// model of its rules (issue 23, item 8):
//
//   - every contract-month rates and is closed (none skipped);
//   - the allowance rule: the usage an org gets free on the listing in a
//     month is at most the largest allowance among the plans it held;
//   - no sequence bills less than the same paid seconds and usage under
//     one stay at the lowest terms the org held (the least fee and prices,
//     the largest allowance, of its plans that month);
//   - each contract's preview at the month's last millisecond equals the
//     invoice the month's close issues;
//   - the FOCUS rows of each org's month sum to its invoices exactly;
//   - prepaid credit (issue 25): calls of a contract burn random amounts
//     of its org's credit as they run, some more than the month costs;
//     each invoice, and its preview, takes off exactly what the contract
//     burned in the month, rounded half up to the cent, never more than
//     its total, and what is due is the rest: nothing burned is charged
//     again, nothing is credited twice or to another contract;
//   - with Stripe, which rounds each subscription alone and gives each
//     its allowance: each stay's own rounding plus the adjustment item
//     the month's end charges it, once, add up for each org to what its
//     own invoices charge (checkStripeMonth).
//
// A seed draws a list of actions (generateSequence), then the list is
// played against the stores (playSequence). A failing list is shrunk
// (shrinkSequence: fewer months, fewer actions, smaller numbers) to one
// that still breaks the same invariant, and the failure prints it as Go
// source: paste it into sequenceRegressions (sequence_regressions_test.go),
// where every run plays it. AGENTMARKET_BILLING_SEQUENCES=N adds N seeds
// drawn at random (scripts/test.sh sets it, so CI tries new sequences
// every run).
func TestPropertyBuyerSequences(t *testing.T) {
	cases := append([]seqCase{}, sequenceRegressions...)
	for i := range sequenceRuns {
		cases = append(cases, seqCase{Seed: uint64(23_000 + i)})
	}
	if n, err := strconv.Atoi(os.Getenv("AGENTMARKET_BILLING_SEQUENCES")); err == nil && n > 0 {
		base := rand.Uint64() >> 16
		for i := range n {
			cases = append(cases, seqCase{Seed: base + uint64(i)})
		}
	}
	var played seqCounts
	shrinks := 2 // failures a run shrinks; later ones print their seed only
	for i, c := range cases {
		name := fmt.Sprint(c.Seed)
		if c.Actions != nil {
			name = fmt.Sprintf("regression-%d", i)
		}
		t.Run(name, func(t *testing.T) { played.add(checkSequence(t, c, nil, &shrinks)) })
	}
	t.Logf("offers accepted: %+v", played)
	// The sequences reach every kind of offer acceptance.
	if played.offerSubscribed == 0 || played.offerTrials == 0 || played.offerChanges == 0 {
		t.Errorf("the sequences accepted offers too rarely: %+v", played)
	}
	// And credit paid part of some invoices, and the whole of others.
	if played.credited == 0 || played.creditCapped == 0 {
		t.Errorf("the sequences applied credit too rarely: %+v", played)
	}
}

// checkSequence plays c (its seed's sequence when it lists no actions)
// and, when an invariant breaks, shrinks it (while *shrinks, the run's
// budget, lasts: a shrink may take half a minute) and fails the test with
// the shrunk case as Go source.
func checkSequence(t *testing.T, c seqCase, plant seqPlant, shrinks *int) seqCounts {
	t.Helper()
	if c.Actions == nil {
		c = generateSequence(c.Seed)
	}
	n, err := playSequence(t, c, plant)
	if err == nil {
		return n
	}
	if *shrinks <= 0 {
		t.Fatalf("seed %d, %d actions: %v\n(not shrunk, this run's shrinks are spent: add {Seed: %d} to sequenceRegressions, "+
			"and -run 'TestPropertyBuyerSequences/regression' shrinks it)", c.Seed, len(c.Actions), err, c.Seed)
	}
	*shrinks--
	small := shrinkSequence(t, c, err, plant)
	t.Fatalf("seed %d, %d actions: %v\nshrunk to %d actions over %d months, which fail with: %v\n"+
		"add it to sequenceRegressions (billing/sequence_regressions_test.go):\n%s",
		c.Seed, len(c.Actions), err, len(small.Actions), small.Months, small.failure, small.GoString())
	return n
}

// seqCounts counts what a sequence did with offers.
type seqCounts struct {
	offerSubscribed, offerTrials, offerChanges int
	credited, creditCapped                     int // invoices with credit applied; those it paid whole
}

func (c *seqCounts) add(o seqCounts) {
	c.offerSubscribed += o.offerSubscribed
	c.offerTrials += o.offerTrials
	c.offerChanges += o.offerChanges
	c.credited += o.credited
	c.creditCapped += o.creditCapped
}

// seqPlans are the listing's plan versions: the base plan (3), a dearer
// one with more allowance (4), a cheap one with little (5); and the
// private plans of offers: a discount with the largest allowance (6), and
// the base fee at the cheap plan's token price with a trial (7).
func seqPlans() map[int]listings.Plan {
	base := basePlan(49_000_000)
	dear := basePlan(99_000_000)
	dear.Version, dear.InputTokensPerMillionMicros, dear.IncludedInputTokens, dear.IncludedTasks = 4, 5_000_000, 2_000_000, 300
	cheap := basePlan(19_000_000)
	cheap.Version, cheap.InputTokensPerMillionMicros, cheap.IncludedInputTokens, cheap.IncludedOutputTokens = 5, 2_000_000, 300_000, 50_000
	cheap.IncludedTasks = 10
	discount := basePlan(9_000_000)
	discount.Version, discount.InputTokensPerMillionMicros, discount.IncludedInputTokens, discount.IncludedTasks = 6, 1_000_000, 5_000_000, 1_000
	trial := basePlan(49_000_000)
	trial.Version, trial.InputTokensPerMillionMicros = 7, 2_000_000
	return map[int]listings.Plan{3: base, 4: dear, 5: cheap, 6: discount, 7: trial}
}

// seqOrgIDs are the buyer orgs of a sequence.
var seqOrgIDs = []string{"org_a", "org_b", "org_c"}

// seqOffer is a private offer made to every org: ofr_<org>_<n>.
type seqOffer struct {
	n, version int
	trialDays  int64
}

var seqOffers = []seqOffer{{1, 6, 0}, {2, 7, 3}}

func (f seqOffer) id(org string) string { return fmt.Sprintf("ofr_%s_%d", org, f.n) }

// seqKind is what an action does.
type seqKind int

const (
	seqSubscribe seqKind = iota // a new contract at Plan, or accepting Offer; a trial to TrialEnd
	seqCancel                   // the open contract ends at once
	seqChange                   // the open contract moves to Plan, or to Offer's plan
	seqUse                      // calls of the open contract: Usage, burning Burn micros of credit
)

// seqAction is one thing a buyer org does, at an instant.
type seqAction struct {
	At       time.Time
	Org      string
	Kind     seqKind
	Plan     int       // seqSubscribe, seqChange
	Offer    string    // seqSubscribe, seqChange: the offer accepted ("": none)
	TrialEnd time.Time // seqSubscribe: the trial's end (zero: none)
	Usage    billing.Usage
	Burn     int64 // seqUse: credit burned, in micros
}

// seqCase is a sequence of actions over Months months from May 2026,
// each month previewed and closed in turn; actions after the last month
// are not played. A case with no Actions plays its Seed's sequence.
type seqCase struct {
	Seed    uint64
	Months  int
	Actions []seqAction

	failure error // set by shrinkSequence: how the shrunk case fails
}

// seqMonth is the i-th month of a sequence.
func seqMonth(i int) billing.Period { return billing.MonthOf(date(2026, time.Month(5+i), 1)) }

// seqModel holds the rules an action must meet to be played (the ones
// the marketplace enforces before billing sees anything): one open
// contract per org, one trial per org, each offer accepted once, no plan
// change in a trial, one a month. The generator draws only actions it
// allows; a shrunk list may hold others, which are skipped.
type seqModel struct {
	orgs      map[string]*seqOrg
	contracts int
}

type seqOrg struct {
	open     *seqStay
	trialed  bool
	accepted map[string]bool
}

// seqStay is an org's open contract as the model sees it.
type seqStay struct {
	id       string
	plan     int
	trialEnd time.Time
	changed  billing.Period // the month of its last plan change
}

func newSeqModel() *seqModel {
	m := &seqModel{orgs: map[string]*seqOrg{}}
	for _, id := range seqOrgIDs {
		m.orgs[id] = &seqOrg{accepted: map[string]bool{}}
	}
	return m
}

// openOffers are the offers to org not yet accepted.
func (m *seqModel) openOffers(org string) []seqOffer {
	var open []seqOffer
	for _, f := range seqOffers {
		if !m.orgs[org].accepted[f.id(org)] {
			open = append(open, f)
		}
	}
	return open
}

// apply plays a on the model; ok is false when the rules refuse it. For
// a subscription it returns the new stay, its trial dropped when the
// org had one already.
func (m *seqModel) apply(a seqAction) (s *seqStay, ok bool) {
	o := m.orgs[a.Org]
	if o == nil {
		return nil, false
	}
	if a.Offer != "" && o.accepted[a.Offer] {
		return nil, false
	}
	if a.Kind == seqSubscribe {
		if o.open != nil {
			return nil, false
		}
		m.contracts++
		s = &seqStay{id: fmt.Sprintf("ctr_%d", m.contracts), plan: a.Plan}
		if !a.TrialEnd.IsZero() && !o.trialed {
			s.trialEnd, o.trialed = a.TrialEnd, true
		}
		o.open = s
	} else if s = o.open; s == nil {
		return nil, false
	}
	switch a.Kind {
	case seqCancel:
		o.open = nil
	case seqChange:
		if a.At.Before(s.trialEnd) || s.changed == billing.MonthOf(a.At) || a.Plan == s.plan {
			return nil, false // the rules: no change in a trial, one a month
		}
		s.plan, s.changed = a.Plan, billing.MonthOf(a.At)
	}
	if a.Offer != "" {
		o.accepted[a.Offer] = true
	}
	return s, true
}

// generateSequence draws a seed's sequence: for three orgs over three
// months, 10 to 30 steps a month, mostly hours to days apart, sometimes
// within the same second.
func generateSequence(seed uint64) seqCase {
	r := rand.New(rand.NewPCG(seed, 23))
	c := seqCase{Seed: seed, Months: 3}
	m := newSeqModel()
	add := func(a seqAction) {
		if _, ok := m.apply(a); !ok {
			panic(fmt.Sprintf("generateSequence(%d) drew an action the rules refuse: %+v", seed, a))
		}
		c.Actions = append(c.Actions, a)
	}
	// offer is one of org's offers still open, drawn; false when none is.
	offer := func(org string) (seqOffer, bool) {
		open := m.openOffers(org)
		if len(open) == 0 {
			return seqOffer{}, false
		}
		return open[r.IntN(len(open))], true
	}
	now := date(2026, 5, 1).Add(time.Duration(r.Int64N(int64(time.Hour))))
	for i := range c.Months {
		month := seqMonth(i)
		for steps := 10 + r.IntN(20); steps > 0; steps-- {
			step := time.Duration(r.Int64N(int64(3 * 24 * time.Hour)))
			if r.IntN(5) == 0 {
				step = time.Duration(1+r.IntN(900)) * time.Millisecond
			}
			next := now.Add(step).Truncate(time.Millisecond)
			if !next.Before(month.End.Add(-time.Second)) {
				break
			}
			now = next
			org := seqOrgIDs[r.IntN(len(seqOrgIDs))]
			o := m.orgs[org]
			if o.open == nil {
				a := seqAction{At: now, Org: org, Kind: seqSubscribe, Plan: 3 + r.IntN(3)}
				if f, ok := offer(org); ok && r.IntN(3) == 0 {
					// Accepting an offer subscribes at its private plan,
					// in its trial (as contracts.AcceptOffer: on a whole
					// second) when the org had none on the listing.
					a.Plan, a.Offer = f.version, f.id(org)
					if f.trialDays > 0 && !o.trialed {
						a.TrialEnd = now.Add(time.Duration(f.trialDays)*24*time.Hour + time.Second - 1).Truncate(time.Second)
					}
				} else if !o.trialed && r.IntN(3) == 0 {
					a.TrialEnd = now.Add(time.Duration(r.Int64N(int64(4 * 24 * time.Hour)))).Truncate(time.Second)
				}
				add(a)
				continue
			}
			switch k := r.IntN(10); {
			case k < 2:
				add(seqAction{At: now, Org: org, Kind: seqCancel})
			case k < 5:
				if now.Before(o.open.trialEnd) || o.open.changed == billing.MonthOf(now) {
					continue // the rules: no change in a trial, one a month
				}
				// A change to a public plan, or (k = 4) accepting an
				// offer, which changes the open contract's plan to the
				// offer's under the same rules.
				a := seqAction{At: now, Org: org, Kind: seqChange, Plan: 3 + r.IntN(3)}
				if k == 4 {
					f, ok := offer(org)
					if !ok {
						continue
					}
					a.Plan, a.Offer = f.version, f.id(org)
				}
				if a.Plan == o.open.plan {
					continue
				}
				add(a)
			default:
				a := seqAction{At: now, Org: org, Kind: seqUse, Usage: billing.Usage{InputTokens: r.Int64N(900_000), OutputTokens: r.Int64N(150_000),
					ComputeMs: r.Int64N(2_000_000), Tasks: r.Int64N(60)}}
				if r.IntN(3) == 0 { // the calls paid from the org's prepaid credit
					a.Burn = r.Int64N(40_000_000)
				}
				add(a)
			}
		}
		now = month.End.Add(10 * time.Minute)
	}
	return c
}

// seqPlant is a test's extra invariant over a closed month's invoices by
// org ("" when it holds): the shrinker's own test plants a wrong one.
type seqPlant func(month billing.Period, byOrg map[string][]*billing.Invoice) string

// seqFailure is a broken invariant: its format names which.
type seqFailure struct {
	format string
	msg    string
}

func (f seqFailure) Error() string { return f.msg }

// sameFailure reports whether two failures break the same invariant.
func sameFailure(a, b error) bool {
	fa, okA := a.(seqFailure)
	fb, okB := b.(seqFailure)
	return okA && okB && fa.format == fb.format
}

// playSequence plays c on fresh stores, closing its months in turn, and
// returns the first broken invariant (a panic of the code under test is
// one too).
func playSequence(t *testing.T, c seqCase, plant seqPlant) (n seqCounts, err error) {
	defer func() {
		switch x := recover().(type) {
		case nil:
		case seqFailure:
			err = x
		default:
			err = seqFailure{format: "panic", msg: fmt.Sprintf("panic: %v\n%s", x, debug.Stack())}
		}
	}()
	ctx := context.Background()
	e := newEnvOn(t, migratedCopy)
	for v, p := range seqPlans() {
		e.plans[fmt.Sprintf("lst_echo/%d", v)] = p
	}
	h := history{}
	svc := e.ledger()
	svc.History = h
	burned := seqBurns{}
	svc.Credit = burned
	returned := &seqReturns{}
	svc.CreditBack = returned
	// The same months with Stripe: every contract has a subscription
	// there, and its adjustment items are charged once the month is over.
	withStripe := e.service()
	withStripe.History = h
	model := newSeqModel()
	open := map[string]int{} // org → index in e.ctrs.all of its open contract
	fail := func(format string, args ...any) {
		panic(seqFailure{format: format, msg: fmt.Sprintf(format, args...)})
	}

	actions := c.Actions
	if len(actions) > 0 {
		e.at(actions[0].At)
	}
	for m := range c.Months {
		month := seqMonth(m)
		for ; len(actions) > 0 && actions[0].At.Before(month.End); actions = actions[1:] {
			a := actions[0]
			s, ok := model.apply(a)
			if !ok {
				continue
			}
			e.at(a.At)
			switch a.Kind {
			case seqSubscribe:
				e.contract(s.id, a.At)
				ct := &e.ctrs.all[len(e.ctrs.all)-1]
				ct.BuyerOrgID, ct.PlanVersion, ct.OfferID = a.Org, a.Plan, a.Offer
				if !s.trialEnd.IsZero() {
					end := s.trialEnd
					ct.TrialEnd = &end
				}
				open[a.Org] = len(e.ctrs.all) - 1
				if _, err := e.store.SaveSubscription(ctx, &billing.Subscription{ContractID: s.id, CustomerID: "cus_" + a.Org,
					Refs: billing.SubscriptionRefs{ID: "sub_" + s.id}, CreatedAt: a.At}); err != nil {
					t.Fatal(err)
				}
				if a.Offer != "" {
					n.offerSubscribed++
					if ct.TrialEnd != nil {
						n.offerTrials++
					}
				}
				continue
			}
			ct := &e.ctrs.all[open[a.Org]]
			switch a.Kind {
			case seqCancel:
				end := a.At
				ct.CanceledAt = &end
			case seqChange:
				h[ct.ID] = append(h[ct.ID], contracts.PlanChange{ContractID: ct.ID, Seq: len(h[ct.ID]) + 1, At: a.At, FromVersion: ct.PlanVersion,
					ToVersion: a.Plan, OfferID: a.Offer})
				ct.PlanVersion = a.Plan
				if a.Offer != "" {
					n.offerChanges++
				}
			case seqUse:
				e.use(t, ct.ID, a.At, a.Usage)
				if a.Burn > 0 {
					burned[ct.ID] = append(burned[ct.ID], seqBurn{at: a.At, micros: a.Burn})
				}
			}
		}

		// Previews at the month's last millisecond, then the close.
		e.at(month.End.Add(-time.Millisecond))
		active, err := e.ctrs.ContractsActiveIn(ctx, month)
		if err != nil {
			t.Fatal(err)
		}
		pv := &billing.Previews{Contracts: getter(e.ctrs.all), Plans: e.plans, Usage: e.usage, Clock: e.clock, History: h, Stays: e.ctrs, Credit: burned}
		previews := map[string]*billing.Invoice{}
		for _, c := range active {
			inv, err := pv.Preview(ctx, agentmarket.Actor{}, c.ID)
			if err != nil {
				fail("%s's preview of %s: %v", c.ID, month.Start.Format("2006-01"), err)
			}
			previews[c.ID] = inv
		}
		e.at(month.End.Add(10 * time.Minute))
		if n, err := svc.CloseMonth(ctx, month); err != nil || n != len(active) {
			fail("CloseMonth(%s) = %d, %v; %d contracts were active", month.Start.Format("2006-01"), n, err, len(active))
		}
		credited, capped := checkMonth(fail, e, svc, month, active, previews, burned, returned, plant)
		checkStripeMonth(fail, e, withStripe, month, active)
		n.credited += credited
		n.creditCapped += capped
	}
	return n, nil
}

func checkMonth(fail func(string, ...any), e *env, svc *billing.Service, month billing.Period, active []contracts.Contract,
	previews map[string]*billing.Invoice, burned seqBurns, returned *seqReturns, plant seqPlant) (credited, capped int) {
	ctx := context.Background()
	plans := seqPlans()
	byOrg := map[string][]*billing.Invoice{}
	for _, c := range active {
		li, err := e.store.Invoice(ctx, c.ID, month.Start)
		if err != nil {
			fail("%s has no invoice for %s: %v", c.ID, month.Start.Format("2006-01"), err)
		}
		inv := &li.Invoice
		if p := previews[c.ID]; p.TotalMinor != inv.TotalMinor || p.ExactMicros().Cmp(inv.ExactMicros()) != 0 {
			fail("%s: preview %s (%d) ≠ invoice %s (%d)\n  %s\n  %s", c.ID, p.ExactMicros(), p.TotalMinor, inv.ExactMicros(), inv.TotalMinor,
				summary(p), summary(inv))
		}
		// The model of credit: what the contract's calls burned in the
		// month, to the cent (half up), at most the invoice's total.
		var micros int64
		for _, b := range burned[c.ID] {
			if !b.at.Before(month.Start) && b.at.Before(month.End) {
				micros += b.micros
			}
		}
		want := min((2*micros+10_000)/20_000, inv.TotalMinor)
		if inv.CreditAppliedMinor != want || inv.AmountDueMinor() != inv.TotalMinor-want || previews[c.ID].CreditAppliedMinor != want {
			fail("%s in %s burned %d micros of credit: the invoice applied %d cents (due %d of %d), its preview %d; want %d",
				c.ID, month.Start.Format("2006-01"), micros, inv.CreditAppliedMinor, inv.AmountDueMinor(), inv.TotalMinor,
				previews[c.ID].CreditAppliedMinor, want)
		}
		// What was burned beyond that goes back to the org's balance, once
		// (the same contract-month's give-back recorded once).
		back := max(0, micros-want*10_000)
		if got := returned.of(c.ID, month.Start); got != back {
			fail("%s in %s burned %d micros, the invoice applied %d cents: %d micros given back, want %d", c.ID,
				month.Start.Format("2006-01"), micros, want, got, back)
		}
		if want > 0 {
			credited++
			if want == inv.TotalMinor {
				capped++
			}
		}
		byOrg[c.BuyerOrgID] = append(byOrg[c.BuyerOrgID], inv)
	}
	if plant != nil {
		if msg := plant(month, byOrg); msg != "" {
			fail("planted invariant: %s", msg)
		}
	}
	for org, invs := range byOrg {
		// The model: what the org's paid parts used, for how long, under
		// which plans; the allowance it got free.
		var used, free billing.Usage
		var seconds int64
		lowest := listings.Plan{Currency: "usd", Version: 99}
		first := true
		var billed big.Rat
		var cents int64
		for _, inv := range invs {
			billed.Add(&billed, inv.ExactMicros())
			cents += inv.TotalMinor
			for i, part := range inv.Parts {
				if part.Trial {
					continue
				}
				seconds += part.Active.End.Unix() - part.Active.Start.Unix()
				p := plans[part.PlanVersion]
				if first {
					lowest.MonthlyFeeMicros, lowest.InputTokensPerMillionMicros = p.MonthlyFeeMicros, p.InputTokensPerMillionMicros
					lowest.OutputTokensPerMillionMicros, lowest.ComputePerHourMicros, lowest.PerTaskMicros = p.OutputTokensPerMillionMicros, p.ComputePerHourMicros, p.PerTaskMicros
					first = false
				}
				lowest.MonthlyFeeMicros = min(lowest.MonthlyFeeMicros, p.MonthlyFeeMicros)
				lowest.InputTokensPerMillionMicros = min(lowest.InputTokensPerMillionMicros, p.InputTokensPerMillionMicros)
				lowest.OutputTokensPerMillionMicros = min(lowest.OutputTokensPerMillionMicros, p.OutputTokensPerMillionMicros)
				lowest.ComputePerHourMicros = min(lowest.ComputePerHourMicros, p.ComputePerHourMicros)
				lowest.PerTaskMicros = min(lowest.PerTaskMicros, p.PerTaskMicros)
				lowest.IncludedInputTokens = max(lowest.IncludedInputTokens, p.IncludedInputTokens)
				lowest.IncludedOutputTokens = max(lowest.IncludedOutputTokens, p.IncludedOutputTokens)
				lowest.IncludedComputeMs = max(lowest.IncludedComputeMs, p.IncludedComputeMs)
				lowest.IncludedTasks = max(lowest.IncludedTasks, p.IncludedTasks)
				for _, l := range inv.Lines {
					if l.Part != i {
						continue
					}
					f := min(l.Used, l.Included)
					switch l.Kind {
					case billing.LineInputTokens:
						used.InputTokens += l.Used
						free.InputTokens += f
					case billing.LineOutputTokens:
						used.OutputTokens += l.Used
						free.OutputTokens += f
					case billing.LineCompute:
						used.ComputeMs += l.Used
						free.ComputeMs += f
					case billing.LineTasks:
						used.Tasks += l.Used
						free.Tasks += f
					}
				}
			}
		}
		if first {
			continue // trials only
		}
		if free.InputTokens > lowest.IncludedInputTokens || free.OutputTokens > lowest.IncludedOutputTokens ||
			free.ComputeMs > lowest.IncludedComputeMs || free.Tasks > lowest.IncludedTasks {
			fail("%s in %s got %+v free, more than the largest allowance of its plans (%d, %d, %d, %d)", org, month.Start.Format("2006-01"),
				free, lowest.IncludedInputTokens, lowest.IncludedOutputTokens, lowest.IncludedComputeMs, lowest.IncludedTasks)
		}
		one, err := billing.RateParts(month, []billing.Part{{Plan: lowest, Span: billing.Period{Start: month.Start, End: month.Start.Add(time.Duration(seconds) * time.Second)},
			Usage: used}})
		if err != nil {
			fail("the model's stay: %v", err)
		}
		if billed.Cmp(one.ExactMicros()) < 0 {
			fail("%s in %s was billed %s micros, less than one stay at its lowest terms (%s)", org, month.Start.Format("2006-01"),
				billed.FloatString(3), one.ExactMicros().FloatString(3))
		}
		// What is charged, not only rated: the month's stays are rounded
		// once together (the rounding carry), so cycling short stays whose
		// invoices would each round to nothing charges the month's amount.
		if once := roundCents(&billed); cents != once || cents < one.TotalMinor {
			fail("%s in %s was charged %d cents for %s micros (rounded once: %d); one stay at its lowest terms: %d", org,
				month.Start.Format("2006-01"), cents, billed.FloatString(3), once, one.TotalMinor)
		}
		rows, err := e.focus(svc).Rows(ctx, billing.FocusInput{OrgID: org, Period: month})
		if err != nil {
			fail("FOCUS of %s: %v", org, err)
		}
		var cost int64
		for _, row := range rows {
			cost += row.CostMicros
		}
		if cost != cents*10_000 {
			fail("%s's FOCUS rows of %s cost %d micros; its invoices %d cents", org, month.Start.Format("2006-01"), cost, cents)
		}
	}
	return credited, capped
}

// checkStripeMonth holds a closed month with Stripe to the own ledger:
// Stripe's prices charge each stay alone (each part with the plan's full
// allowance, rounded once per subscription), and with the adjustment
// item ChargeCommitments adds (the allowance the month's earlier stays
// and plans used, the month's rounding carry) each org pays what its own
// invoices charge, to the cent.
func checkStripeMonth(fail func(string, ...any), e *env, st *billing.Service, month billing.Period, active []contracts.Contract) {
	ctx := context.Background()
	if _, err := st.ChargeCommitments(ctx, month); err != nil {
		fail("ChargeCommitments(%s): %v", month.Start.Format("2006-01"), err)
	}
	if _, err := st.ChargeCommitments(ctx, month); err != nil { // charged once: nothing new
		fail("ChargeCommitments(%s) again: %v", month.Start.Format("2006-01"), err)
	}
	plans := seqPlans()
	own, atStripe := map[string]int64{}, map[string]int64{}
	for _, c := range active {
		li, err := e.store.Invoice(ctx, c.ID, month.Start)
		if err != nil {
			fail("%s has no invoice for %s: %v", c.ID, month.Start.Format("2006-01"), err)
		}
		inv := &li.Invoice
		own[c.BuyerOrgID] += inv.TotalMinor
		alone := new(big.Rat)
		for i, part := range inv.Parts {
			var u billing.Usage
			for _, l := range inv.Lines {
				if l.Part != i {
					continue
				}
				switch l.Kind {
				case billing.LineInputTokens:
					u.InputTokens = l.Used
				case billing.LineOutputTokens:
					u.OutputTokens = l.Used
				case billing.LineCompute:
					u.ComputeMs = l.Used
				case billing.LineTasks:
					u.Tasks = l.Used
				}
			}
			one, err := billing.RateParts(month, []billing.Part{{Plan: plans[part.PlanVersion], Span: part.Active, Usage: u, Trial: part.Trial}})
			if err != nil {
				fail("%s's part %d alone: %v", c.ID, i, err)
			}
			alone.Add(alone, one.ExactMicros())
		}
		atStripe[c.BuyerOrgID] += roundCents(alone)
		item, err := e.store.CommitmentCharge(ctx, c.ID, month.Start)
		switch {
		case err == nil && item.SentAt == nil:
			fail("%s's adjustment of %s (%d cents) was not sent", c.ID, month.Start.Format("2006-01"), item.AmountMinor)
		case err == nil:
			atStripe[c.BuyerOrgID] += item.AmountMinor
		case agentmarket.KindOf(err) != agentmarket.NotFound:
			fail("%s's adjustment of %s: %v", c.ID, month.Start.Format("2006-01"), err)
		}
	}
	for org, cents := range own {
		if atStripe[org] != cents {
			fail("%s in %s pays %d cents at Stripe (each stay rounded alone, with its adjustment item), %d on the own ledger", org,
				month.Start.Format("2006-01"), atStripe[org], cents)
		}
	}
}

// roundCents is micros (usd) to cents, half up.
func roundCents(micros *big.Rat) int64 {
	q := new(big.Rat).Quo(micros, big.NewRat(10_000, 1))
	n := new(big.Int).Lsh(q.Num(), 1)
	n.Add(n, q.Denom())
	return n.Quo(n, new(big.Int).Lsh(q.Denom(), 1)).Int64()
}

// migrated is a migrated SQLite file's bytes, made once: a sequence
// plays on a copy (migrating a database anew takes most of a short
// replay, and the shrinker replays a case hundreds of times).
var migrated struct {
	once sync.Once
	raw  []byte
	err  error
}

// migratedCopy opens a fresh copy of the migrated SQLite file.
func migratedCopy(tb testing.TB) *relational.DB {
	tb.Helper()
	migrated.once.Do(func() {
		dir, err := os.MkdirTemp("", "billing-seq-")
		if err != nil {
			migrated.err = err
			return
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "migrated.db")
		db, err := relational.OpenSQLite(context.Background(), path)
		if err == nil {
			err = db.Close()
		}
		if err == nil {
			migrated.raw, err = os.ReadFile(path)
		}
		migrated.err = err
	})
	if migrated.err != nil {
		tb.Fatalf("migrated sqlite: %v", migrated.err)
	}
	path := filepath.Join(tb.TempDir(), "test.db")
	if err := os.WriteFile(path, migrated.raw, 0o600); err != nil {
		tb.Fatal(err)
	}
	db, err := relational.OpenSQLite(context.Background(), path)
	if err != nil {
		tb.Fatalf("open sqlite: %v", err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// seqBurn is what calls of a contract burned of their org's credit.
type seqBurn struct {
	at     time.Time
	micros int64
}

// seqBurns is every contract's burns (billing.CreditBurns).
type seqBurns map[string][]seqBurn

func (b seqBurns) CreditBurned(_ context.Context, contractID string, from, to time.Time) (int64, error) {
	var n int64
	for _, x := range b[contractID] {
		if !x.at.Before(from) && x.at.Before(to) {
			n += x.micros
		}
	}
	return n, nil
}

// seqReturns records what the own ledger gave back to orgs' balances,
// once per kind and ref as the credit store records it.
type seqReturns struct {
	by map[string]contracts.CreditMovement
}

func (r *seqReturns) AddCredit(_ context.Context, m *contracts.CreditMovement) (*contracts.CreditAccount, bool, error) {
	if r.by == nil {
		r.by = map[string]contracts.CreditMovement{}
	}
	k := string(m.Kind) + "|" + m.Ref
	if _, ok := r.by[k]; ok {
		return &contracts.CreditAccount{}, false, nil
	}
	r.by[k] = *m
	return &contracts.CreditAccount{}, true, nil
}

// of is what was given back for a contract's month (-1 for a movement
// that names another contract or moves nothing).
func (r *seqReturns) of(contractID string, monthStart time.Time) int64 {
	m, ok := r.by[string(contracts.CreditUnbilled)+"|"+billing.UnbilledKey(contractID, monthStart)]
	if !ok {
		return 0
	}
	if m.ContractID != contractID || m.AmountMicros <= 0 {
		return -1
	}
	return m.AmountMicros
}
