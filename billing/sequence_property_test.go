package billing_test

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
)

// sequenceRuns is the budget of random buyer sequences a run of the
// suite tries, besides the regression seeds (each a few months of a few
// orgs on real stores: SQLite and the embedded usage store).
const sequenceRuns = 25

// sequenceRegressions are seeds that once found a failure: each runs on
// every run of the suite. Add the seed a failure prints here.
var sequenceRegressions = []uint64{}

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
//     again, nothing is credited twice or to another contract.
//
// AGENTMARKET_BILLING_SEQUENCES=N adds N seeds drawn at random (scripts/test.sh
// sets it, so CI tries new sequences every run; a failure names its seed).
func TestPropertyBuyerSequences(t *testing.T) {
	seeds := append([]uint64{}, sequenceRegressions...)
	for i := range sequenceRuns {
		seeds = append(seeds, uint64(23_000+i))
	}
	if n, err := strconv.Atoi(os.Getenv("AGENTMARKET_BILLING_SEQUENCES")); err == nil && n > 0 {
		base := rand.Uint64() >> 16
		for i := range n {
			seeds = append(seeds, base+uint64(i))
		}
	}
	var played seqCounts
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { played.add(playSequence(t, seed)) })
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

// seqOffer is a private offer made to one org.
type seqOffer struct {
	id        string
	version   int
	trialDays int64
	accepted  bool
}

type seqOrg struct {
	id      string
	open    int // index in e.ctrs.all of the open contract, -1 for none
	trialed bool
	offers  []*seqOffer
}

// offer is one of o's offers still open, nil when none is.
func (o *seqOrg) offer(r *rand.Rand) *seqOffer {
	var open []*seqOffer
	for _, f := range o.offers {
		if !f.accepted {
			open = append(open, f)
		}
	}
	if len(open) == 0 {
		return nil
	}
	return open[r.IntN(len(open))]
}

func playSequence(t *testing.T, seed uint64) (n seqCounts) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 23))
	e := newEnv(t)
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
	orgs := []*seqOrg{{id: "org_a", open: -1}, {id: "org_b", open: -1}, {id: "org_c", open: -1}}
	for _, o := range orgs {
		o.offers = []*seqOffer{{id: "ofr_" + o.id + "_1", version: 6}, {id: "ofr_" + o.id + "_2", version: 7, trialDays: 3}}
	}
	changedIn := map[string]billing.Period{} // contract → the month of its last plan change
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d (add it to sequenceRegressions): %s", seed, fmt.Sprintf(format, args...))
	}

	now := date(2026, 5, 1).Add(time.Duration(r.Int64N(int64(time.Hour))))
	e.at(now)
	for m := 0; m < 3; m++ {
		month := billing.MonthOf(date(2026, time.Month(5+m), 1))
		for steps := 10 + r.IntN(20); steps > 0; steps-- {
			// Mostly hours to days apart; sometimes within the same second.
			step := time.Duration(r.Int64N(int64(3 * 24 * time.Hour)))
			if r.IntN(5) == 0 {
				step = time.Duration(1+r.IntN(900)) * time.Millisecond
			}
			next := e.clock.Now().Add(step).Truncate(time.Millisecond)
			if !next.Before(month.End.Add(-time.Second)) {
				break
			}
			e.at(next)
			now = next
			o := orgs[r.IntN(len(orgs))]
			if o.open < 0 {
				v := 3 + r.IntN(3)
				id := fmt.Sprintf("ctr_%d", len(e.ctrs.all)+1)
				e.contract(id, now)
				c := &e.ctrs.all[len(e.ctrs.all)-1]
				c.BuyerOrgID, c.PlanVersion = o.id, v
				if f := o.offer(r); f != nil && r.IntN(3) == 0 {
					// Accepting an offer subscribes at its private plan,
					// in its trial (as contracts.AcceptOffer: on a whole
					// second) when the org had none on the listing.
					c.PlanVersion, c.OfferID, f.accepted = f.version, f.id, true
					n.offerSubscribed++
					if f.trialDays > 0 && !o.trialed {
						end := now.Add(time.Duration(f.trialDays)*24*time.Hour + time.Second - 1).Truncate(time.Second)
						c.TrialEnd, o.trialed = &end, true
						n.offerTrials++
					}
				} else if !o.trialed && r.IntN(3) == 0 {
					end := now.Add(time.Duration(r.Int64N(int64(4 * 24 * time.Hour)))).Truncate(time.Second)
					c.TrialEnd, o.trialed = &end, true
				}
				o.open = len(e.ctrs.all) - 1
				continue
			}
			c := &e.ctrs.all[o.open]
			switch k := r.IntN(10); {
			case k < 2:
				end := now
				c.CanceledAt, o.open = &end, -1
			case k < 5:
				trialing := c.TrialEnd != nil && now.Before(*c.TrialEnd)
				if trialing || changedIn[c.ID] == billing.MonthOf(now) {
					continue // the rules: no change in a trial, one a month
				}
				// A change to a public plan, or (k = 4) accepting an
				// offer, which changes the open contract's plan to the
				// offer's under the same rules.
				to, offerID := 3+r.IntN(3), ""
				if k == 4 {
					f := o.offer(r)
					if f == nil {
						continue
					}
					to, offerID = f.version, f.id
					if to != c.PlanVersion {
						f.accepted = true
						n.offerChanges++
					}
				}
				if to == c.PlanVersion {
					continue
				}
				h[c.ID] = append(h[c.ID], contracts.PlanChange{ContractID: c.ID, Seq: len(h[c.ID]) + 1, At: now, FromVersion: c.PlanVersion, ToVersion: to,
					OfferID: offerID})
				c.PlanVersion, changedIn[c.ID] = to, billing.MonthOf(now)
			default:
				e.use(t, c.ID, now, billing.Usage{InputTokens: r.Int64N(900_000), OutputTokens: r.Int64N(150_000),
					ComputeMs: r.Int64N(2_000_000), Tasks: r.Int64N(60)})
				if r.IntN(3) == 0 { // the calls paid from the org's prepaid credit
					burned[c.ID] = append(burned[c.ID], seqBurn{at: now, micros: r.Int64N(40_000_000)})
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
		credited, capped := checkMonth(t, fail, e, svc, month, active, previews, burned, returned)
		n.credited += credited
		n.creditCapped += capped
		now = e.clock.Now()
	}
	return n
}

func checkMonth(t *testing.T, fail func(string, ...any), e *env, svc *billing.Service, month billing.Period, active []contracts.Contract,
	previews map[string]*billing.Invoice, burned seqBurns, returned *seqReturns) (credited, capped int) {
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

// roundCents is micros (usd) to cents, half up.
func roundCents(micros *big.Rat) int64 {
	q := new(big.Rat).Quo(micros, big.NewRat(10_000, 1))
	n := new(big.Int).Lsh(q.Num(), 1)
	n.Add(n, q.Denom())
	return n.Quo(n, new(big.Int).Lsh(q.Denom(), 1)).Int64()
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
