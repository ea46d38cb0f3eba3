package billing

import (
	"fmt"
	"math"
	"math/big"
	"sort"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings"
)

// Usage is what a contract used in a period: the sums of its usage rows
// (metering.Total carries the same counters).
type Usage struct{ InputTokens, OutputTokens, ComputeMs, Tasks int64 }

// Validate reports every negative counter.
func (u Usage) Validate() error {
	var fe agentmarket.Fields
	u.check(&fe, "")
	return fe.Err("invalid_usage", "the usage is not valid")
}

func (u Usage) check(fe *agentmarket.Fields, prefix string) {
	for _, c := range []struct {
		name string
		v    int64
	}{
		{"input_tokens", u.InputTokens},
		{"output_tokens", u.OutputTokens},
		{"compute_ms", u.ComputeMs},
		{"tasks", u.Tasks},
	} {
		if c.v < 0 {
			fe.Add(field(prefix, c.name), "non_negative", "%s must not be negative", c.name)
		}
	}
}

// LineKind names what an invoice line charges for.
type LineKind string

const (
	LineFlatFee      LineKind = "flat_fee"
	LineInputTokens  LineKind = "input_tokens"
	LineOutputTokens LineKind = "output_tokens"
	LineCompute      LineKind = "compute"
	LineTasks        LineKind = "tasks"
	// LineCommitment is what a month falls short of its plan's minimum
	// commitment (Plan.MinCommitMicros): only on parts whose plan has one.
	LineCommitment LineKind = "commitment"
)

// LineKinds is the order of an invoice's lines. Every part of an invoice
// has one line of each kind, zero or not, so invoices always have the same
// shape; a part whose plan has a minimum commitment has a LineCommitment
// line last.
var LineKinds = []LineKind{LineFlatFee, LineInputTokens, LineOutputTokens, LineCompute, LineTasks}

// Fraction is a part of one micro-unit: Num/Den with 0 <= Num < Den, in
// lowest terms ({0, 1} when there is none).
type Fraction struct{ Num, Den int64 }

// Line is one invoice line. Its exact amount is
// Quantity × UnitPriceMicros / PerUnits micros, held as the whole micros
// AmountMicros plus the fraction of a micro AmountFraction; for a
// LineCommitment line, what that (the commitment for the part's seconds)
// exceeds the part's other lines by, or zero.
type Line struct {
	Kind        LineKind
	Description string
	// Used is the units used in the period; for the flat fee, the seconds
	// the contract was active in it.
	Used int64
	// Included is the allowance (0 for the flat fee).
	Included int64
	// Quantity is the billable units: max(0, Used − Included).
	Quantity int64
	// UnitPriceMicros is the price of PerUnits units: per 1,000,000 tokens,
	// per 3,600,000 ms (an hour), per 1 task; for the flat fee, the monthly
	// fee per PerUnits = the seconds of the billed period.
	UnitPriceMicros int64
	PerUnits        int64
	// AmountMicros is the exact amount rounded down to whole micros, and
	// AmountFraction the rest: together they are exact.
	AmountMicros   int64
	AmountFraction Fraction
	// AmountMinor is the line's share of the invoice's TotalMinor, in minor
	// units (largest remainder): the lines' AmountMinor sum to TotalMinor.
	AmountMinor int64
	// Part is the index in Invoice.Parts of the part the line rates.
	Part int
}

// ExactMicros is the line's exact amount in micros.
func (l Line) ExactMicros() *big.Rat {
	return exact(l.AmountMicros, l.AmountFraction)
}

// Part is a span of a billed period under one set of terms: a plan, paid
// or in a free trial, and the usage metered in the span. A contract whose
// terms did not change in the period is one part.
type Part struct {
	Plan listings.Plan
	// Span is when the terms were in force; the flat fee is charged for
	// its overlap with the billed period, in whole seconds.
	Span Period
	// Usage is what was metered under these terms.
	Usage Usage
	// Trial marks a free trial: its fee and usage are rated at zero.
	Trial bool
	// AllowanceUsed, on the first part, is how much of the month's
	// allowance the buyer org's earlier stays on the listing used before
	// this contract began (priorAllowance): a month's allowance is shared
	// by every stay of an org on a listing. Each later part starts from
	// what the parts before it used; a later part's own value is ignored.
	AllowanceUsed Usage
	// RoundingCarry, on the first part, is what the invoices of the org's
	// earlier stays on the listing this month rounded away, in micros
	// (their exact amounts less their totals; between minus and plus half
	// a minor unit): the total is rounded from the exact subtotal plus it,
	// so that a month's stays together are charged its exact amount
	// rounded once (a stay of minutes cannot round its fee to nothing, one
	// after the other). nil: none.
	RoundingCarry *big.Rat
}

// PartInfo is a part as an invoice shows it.
type PartInfo struct {
	PlanVersion int
	// Active is the part's overlap with the billed period in whole
	// seconds (Start = End when it has none: a part may carry usage but
	// no whole second).
	Active Period
	Trial  bool
}

// MaxParts bounds the parts of one invoice.
const MaxParts = 32

// Invoice is a rated period of one contract.
type Invoice struct {
	Currency string
	// PlanVersion is the plan version of the last part.
	PlanVersion int
	// Period is the billed period; Active the part of it, in whole seconds,
	// in which the contract was active (from its first part's start to its
	// last part's end).
	Period Period
	Active Period
	// Parts are the spans rated under one set of terms, in time order.
	Parts []PartInfo
	// Lines has one line per LineKinds for each part, part after part.
	Lines []Line
	// SubtotalMicros is the exact sum of the lines rounded down to whole
	// micros, and SubtotalFraction the rest: together they are exact.
	SubtotalMicros   int64
	SubtotalFraction Fraction
	// MinorUnitDigits is the currency's ISO 4217 exponent; TotalMinor the
	// exact subtotal in minor units, rounded half up, once.
	MinorUnitDigits int
	TotalMinor      int64
	// CarriedMicros is the rounding carry the total was rounded with (what
	// the month's earlier stays of the org on the listing rounded away,
	// Part.RoundingCarry); nil when none.
	CarriedMicros *big.Rat
	// Preview is set on an invoice of an open period, rated as of AsOf.
	Preview bool
	AsOf    time.Time
	// CreditAppliedMinor is what the org's prepaid credit paid of the
	// total: the credit the period's calls burned, in minor units rounded
	// half up as the total is, at most the total (credit.go). The amount
	// charged is TotalMinor less it.
	CreditAppliedMinor int64
}

// AmountDueMinor is what is charged once credit is applied.
func (inv *Invoice) AmountDueMinor() int64 { return inv.TotalMinor - inv.CreditAppliedMinor }

// roundedAway is what the invoice's one rounding took off (or added to)
// the exact subtotal plus its carry, in micros: the carry of the month's
// next stay.
func (inv *Invoice) roundedAway() *big.Rat {
	perMinor := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(6-inv.MinorUnitDigits)), nil))
	r := inv.ExactMicros()
	if inv.CarriedMicros != nil {
		r.Add(r, inv.CarriedMicros)
	}
	return r.Sub(r, new(big.Rat).Mul(big.NewRat(inv.TotalMinor, 1), perMinor))
}

// ExactMicros is the invoice's exact subtotal in micros.
func (inv *Invoice) ExactMicros() *big.Rat {
	return exact(inv.SubtotalMicros, inv.SubtotalFraction)
}

func exact(whole int64, f Fraction) *big.Rat {
	r := new(big.Rat).SetInt64(whole)
	if f.Den != 0 {
		r.Add(r, big.NewRat(f.Num, f.Den))
	}
	return r
}

// Rate rates a contract's usage in a billed period. active is the span in
// which the contract was active; only its overlap with billed counts, so an
// open-ended contract may pass any End at or after billed.End. The rules
// are in the package documentation. Bad input, and amounts past the int64
// range of micros, are *agentmarket.Error of kind Invalid listing every
// problem.
func Rate(plan listings.Plan, usage Usage, billed Period, active Period) (*Invoice, error) {
	var fe agentmarket.Fields
	checkTerms(&fe, plan, usage)
	if billed.check(&fe, "billed") {
		checkLength(&fe, billed, "billed")
		if active.check(&fe, "active") {
			if _, ok := overlap(billed, active); !ok {
				fe.Add("active", "outside_period", "the contract was not active in the billed period")
			}
		}
	} else {
		active.check(&fe, "active")
	}
	if err := fe.Err("invalid_rating_input", "the invoice cannot be rated"); err != nil {
		return nil, err
	}
	on, _ := overlap(billed, active)
	return rateParts(billed, []Part{{Plan: plan, Span: on, Usage: usage}})
}

// RateParts rates a contract's billed period made of parts (a trial and
// then paid; one plan, then another), as one invoice with one rounding:
// each part is rated as Rate rates a contract active for its span (the
// fee prorated by the second, what is left of the month's allowance), a
// trial part at zero, and the exact amounts of all parts are summed before
// the total is rounded. Parts must be in time order, not overlap and
// share a currency; a part may be shorter than a second (zero seconds of
// fee, its usage kept), and together they must overlap the billed period,
// by any time.
func RateParts(billed Period, parts []Part) (*Invoice, error) {
	var fe agentmarket.Fields
	if billed.check(&fe, "billed") {
		checkLength(&fe, billed, "billed")
	}
	checkParts(&fe, parts)
	if len(fe) == 0 {
		if !touches(billed, Period{Start: parts[0].Span.Start, End: parts[len(parts)-1].Span.End}) {
			fe.Add("parts", "outside_period", "the contract was not active in the billed period")
		}
	}
	if err := fe.Err("invalid_rating_input", "the invoice cannot be rated"); err != nil {
		return nil, err
	}
	return rateParts(billed, parts)
}

// PreviewParts rates an open period made of parts as of now (see
// RateParts): the last part's span should reach to the period's end (or
// the contract's), its fee being due whatever happens until then.
func PreviewParts(period Period, parts []Part, now time.Time) (*Invoice, error) {
	if !period.Contains(now) {
		var fe agentmarket.Fields
		fe.Add("now", "outside_period", "now must fall inside the period: a preview is of an open period")
		return nil, fe.Err("invalid_preview_input", "the invoice preview cannot be rated")
	}
	inv, err := RateParts(period, parts)
	if err != nil {
		return nil, err
	}
	inv.Preview, inv.AsOf = true, now
	return inv, nil
}

func checkParts(fe *agentmarket.Fields, parts []Part) {
	switch {
	case len(parts) == 0:
		fe.Add("parts", "required", "an invoice has one part at least")
		return
	case len(parts) > MaxParts:
		fe.Add("parts", "max", "an invoice has at most %d parts", MaxParts)
		return
	}
	for i, p := range parts {
		prefix := fmt.Sprintf("parts[%d]", i)
		checkTerms(fe, p.Plan, p.Usage, prefix+".")
		// A part may be shorter than a second (a stay canceled in the
		// second it began, a plan changed and canceled in one second): it
		// rates as zero seconds of fee and keeps its usage.
		if p.Span.checkSpan(fe, prefix+".span") && i > 0 && p.Span.Start.Before(parts[i-1].Span.End) {
			fe.Add(prefix+".span.start", "ordered", "a part starts when the one before it ends, or later")
		}
		if i > 0 && p.Plan.Currency != parts[0].Plan.Currency {
			fe.Add(prefix+".plan.currency", "same_currency", "every part of an invoice is in %q", parts[0].Plan.Currency)
		}
	}
}

// Preview rates an open period as of now: the usage so far, and the flat
// fee for all of the period the contract covers, from contractStart (nil:
// before the period) to contractEnd (nil: open-ended) within the period.
// now must fall inside the period, and the contract must have started by
// then.
func Preview(plan listings.Plan, usage Usage, period Period, contractStart, contractEnd *time.Time, now time.Time) (*Invoice, error) {
	var fe agentmarket.Fields
	checkTerms(&fe, plan, usage)
	active := period
	if period.check(&fe, "period") {
		checkLength(&fe, period, "period")
		if !period.Contains(now) {
			fe.Add("now", "outside_period", "now must fall inside the period: a preview is of an open period")
		}
		if contractStart != nil && contractStart.After(active.Start) {
			active.Start = *contractStart
		}
		if contractEnd != nil && contractEnd.Before(active.End) {
			active.End = *contractEnd
		}
	}
	if contractStart != nil && contractStart.After(now) {
		fe.Add("contract_start", "not_started", "the contract starts after now: there is nothing to preview")
	}
	switch {
	case contractStart != nil && contractEnd != nil && contractEnd.Unix() <= contractStart.Unix():
		fe.Add("contract_end", "after_start", "contract_end must be at least one whole second after contract_start")
	case len(fe) == 0 && active.End.Unix() <= active.Start.Unix():
		fe.Add("contract_end", "outside_period", "the contract is not active in the period")
	}
	if err := fe.Err("invalid_preview_input", "the invoice preview cannot be rated"); err != nil {
		return nil, err
	}
	on, _ := overlap(period, active)
	inv, err := rateParts(period, []Part{{Plan: plan, Span: on, Usage: usage}})
	if err != nil {
		return nil, err
	}
	inv.Preview, inv.AsOf = true, now
	return inv, nil
}

func checkTerms(fe *agentmarket.Fields, plan listings.Plan, usage Usage, prefix ...string) {
	pre := strings.Join(prefix, "")
	if _, err := MinorUnitDigits(plan.Currency); err != nil {
		fe.Add(pre+"plan.currency", "unknown_currency", "currency %q is not one AgentMarket can bill in", plan.Currency)
	}
	plan.CheckAmounts(fe, pre+"plan.")
	usage.check(fe, pre+"usage")
}

func checkLength(fe *agentmarket.Fields, p Period, prefix string) {
	if s, e := p.seconds(); e-s > int64(MaxPeriod/time.Second) {
		fe.Add(prefix+".end", "max_length", "a billed period is at most 366 days")
	}
}

// overlap is the intersection of two periods in whole seconds, and whether
// it is at least one second long.
func overlap(a, b Period) (Period, bool) {
	as, ae := a.seconds()
	bs, be := b.seconds()
	s, e := max(as, bs), min(ae, be)
	if e <= s {
		return Period{}, false
	}
	return Period{Start: time.Unix(s, 0).UTC(), End: time.Unix(e, 0).UTC()}, true
}

// clip is the overlap of p with billed in whole seconds, empty (Start =
// End) when there is none.
func clip(billed, p Period) Period {
	if on, ok := overlap(billed, p); ok {
		return on
	}
	bs, be := billed.seconds()
	s := min(max(p.Start.Unix(), bs), be)
	return Period{Start: time.Unix(s, 0).UTC(), End: time.Unix(s, 0).UTC()}
}

// rateParts computes the invoice of valid input.
func rateParts(billed Period, parts []Part) (*Invoice, error) {
	digits, err := MinorUnitDigits(parts[0].Plan.Currency)
	if err != nil {
		return nil, err
	}
	bs, be := billed.seconds()
	periodSec := be - bs
	inv := &Invoice{
		Currency:        parts[0].Plan.Currency,
		PlanVersion:     parts[len(parts)-1].Plan.Version,
		Period:          Period{Start: time.Unix(bs, 0).UTC(), End: time.Unix(be, 0).UTC()},
		MinorUnitDigits: digits,
	}
	used := parts[0].AllowanceUsed
	for i, p := range parts {
		on := clip(billed, p.Span)
		if i == 0 {
			inv.Active.Start = on.Start
		}
		inv.Active.End = on.End
		inv.Parts = append(inv.Parts, PartInfo{PlanVersion: p.Plan.Version, Active: on, Trial: p.Trial})
		inv.Lines = append(inv.Lines, partLines(p, i, on, periodSec, used)...)
		used = allowanceAfter(p, used)
	}

	var fe agentmarket.Fields
	amounts := make([]*big.Rat, len(inv.Lines))
	subtotal := new(big.Rat)
	partSum := make([]*big.Rat, len(parts)) // each part's lines but its commitment
	for i := range partSum {
		partSum[i] = new(big.Rat)
	}
	for i := range inv.Lines {
		l := &inv.Lines[i]
		l.Quantity = max(0, l.Used-l.Included) // both non-negative: cannot overflow
		amounts[i] = new(big.Rat).SetFrac(
			new(big.Int).Mul(big.NewInt(l.Quantity), big.NewInt(l.UnitPriceMicros)),
			big.NewInt(l.PerUnits))
		if l.Kind == LineCommitment {
			if amounts[i].Sub(amounts[i], partSum[l.Part]).Sign() < 0 {
				amounts[i].SetInt64(0)
			}
		} else {
			partSum[l.Part].Add(partSum[l.Part], amounts[i])
		}
		var ok bool
		if l.AmountMicros, l.AmountFraction, ok = split(amounts[i]); !ok {
			fe.Add(lineField(inv, l), "range", "%s comes to more than %d micros", l.Kind, int64(math.MaxInt64))
		}
		subtotal.Add(subtotal, amounts[i])
	}
	if err := fe.Err("amount_out_of_range", "the invoice amount is too large to bill"); err != nil {
		return nil, err
	}
	var ok bool
	if inv.SubtotalMicros, inv.SubtotalFraction, ok = split(subtotal); !ok {
		fe.Add("subtotal", "range", "the subtotal comes to more than %d micros", int64(math.MaxInt64))
		return nil, fe.Err("amount_out_of_range", "the invoice amount is too large to bill")
	}

	// The one rounding: micros to minor units, half up, on the total (with
	// what the month's earlier stays rounded away: RoundingCarry).
	perMinor := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(6-digits)), nil))
	toRound := new(big.Rat).Set(subtotal)
	if c := parts[0].RoundingCarry; c != nil {
		toRound.Add(toRound, c)
		inv.CarriedMicros = new(big.Rat).Set(c)
	}
	total := roundHalfUp(new(big.Rat).Quo(toRound, perMinor))
	if total.Sign() < 0 {
		total.SetInt64(0)
	}
	inv.TotalMinor = total.Int64() // fits: at most the subtotal in micros, plus a minor unit

	allocate(inv.Lines, amounts, perMinor, inv.TotalMinor)
	return inv, nil
}

// lineField names a line in an error: lines.<kind>, or
// parts[i].lines.<kind> on an invoice of several parts.
func lineField(inv *Invoice, l *Line) string {
	if len(inv.Parts) == 1 {
		return "lines." + string(l.Kind)
	}
	return fmt.Sprintf("parts[%d].lines.%s", l.Part, l.Kind)
}

// partLines are the lines of one part (Quantity and amounts still to be
// computed): the fee for the part's whole seconds in the period, and the
// usage less what is left of the plan's allowance after used (what the
// month's earlier stays and parts took of it). A trial's lines carry what
// was used at a price of zero.
func partLines(p Part, index int, on Period, periodSec int64, used Usage) []Line {
	plan := p.Plan
	plan.IncludedInputTokens = max(0, plan.IncludedInputTokens-used.InputTokens)
	plan.IncludedOutputTokens = max(0, plan.IncludedOutputTokens-used.OutputTokens)
	plan.IncludedComputeMs = max(0, plan.IncludedComputeMs-used.ComputeMs)
	plan.IncludedTasks = max(0, plan.IncludedTasks-used.Tasks)
	as, ae := on.seconds()
	activeSec := ae - as
	lines := []Line{
		{Kind: LineFlatFee, Description: flatDescription(activeSec, periodSec),
			Used: activeSec, UnitPriceMicros: plan.MonthlyFeeMicros, PerUnits: periodSec},
		{Kind: LineInputTokens, Description: "Input tokens, per million",
			Used: p.Usage.InputTokens, Included: plan.IncludedInputTokens, UnitPriceMicros: plan.InputTokensPerMillionMicros, PerUnits: 1_000_000},
		{Kind: LineOutputTokens, Description: "Output tokens, per million",
			Used: p.Usage.OutputTokens, Included: plan.IncludedOutputTokens, UnitPriceMicros: plan.OutputTokensPerMillionMicros, PerUnits: 1_000_000},
		{Kind: LineCompute, Description: "Compute, per hour, billed per millisecond",
			Used: p.Usage.ComputeMs, Included: plan.IncludedComputeMs, UnitPriceMicros: plan.ComputePerHourMicros, PerUnits: 3_600_000},
		{Kind: LineTasks, Description: "Tasks, per task",
			Used: p.Usage.Tasks, Included: plan.IncludedTasks, UnitPriceMicros: plan.PerTaskMicros, PerUnits: 1},
	}
	if plan.MinCommitMicros > 0 && !p.Trial {
		lines = append(lines, Line{Kind: LineCommitment, Description: strings.Replace(flatDescription(activeSec, periodSec), "Monthly fee",
			"Minimum monthly commitment, less the charges above", 1), Used: activeSec, UnitPriceMicros: plan.MinCommitMicros, PerUnits: periodSec})
	}
	for i := range lines {
		l := &lines[i]
		l.Part = index
		if p.Trial {
			l.Included, l.UnitPriceMicros = 0, 0
			if l.Kind == LineFlatFee {
				l.Description = strings.Replace(l.Description, "Monthly fee", "Free trial: no monthly fee", 1)
			} else {
				l.Description += ", free trial"
			}
		}
	}
	return lines
}

// The allowance rule. A plan's included_* quantities are a month's, once
// per buyer org and listing: every stay of the org on the listing in the
// month (contracts one after another, plan versions one after another)
// draws on one allowance. A part may use free what is left of its own
// plan's allowance after what the month's earlier parts used free, so no
// sequence of subscribing, canceling, resubscribing and changing plans
// gets more free usage in a month than the largest allowance among the
// plans held. Trial parts are free altogether and draw nothing.

// allowanceAfter is the allowance used once part p is rated, used having
// been used before it.
func allowanceAfter(p Part, used Usage) Usage {
	if p.Trial {
		return used
	}
	take := func(u, included, before int64) int64 {
		return agentmarket.AddSat(before, min(u, max(0, included-before)))
	}
	return Usage{
		InputTokens:  take(p.Usage.InputTokens, p.Plan.IncludedInputTokens, used.InputTokens),
		OutputTokens: take(p.Usage.OutputTokens, p.Plan.IncludedOutputTokens, used.OutputTokens),
		ComputeMs:    take(p.Usage.ComputeMs, p.Plan.IncludedComputeMs, used.ComputeMs),
		Tasks:        take(p.Usage.Tasks, p.Plan.IncludedTasks, used.Tasks),
	}
}

// AllowanceUsed is the allowance a contract's parts used in a month,
// starting from parts[0].AllowanceUsed: what the next stay of the same
// org on the listing in that month starts from.
func AllowanceUsed(parts []Part) Usage {
	if len(parts) == 0 {
		return Usage{}
	}
	used := parts[0].AllowanceUsed
	for _, p := range parts {
		used = allowanceAfter(p, used)
	}
	return used
}

// split divides a non-negative amount into whole micros and the fraction
// of a micro, and reports whether the whole micros fit an int64 (and the
// fraction's denominator too: it divides the product of the lines' units,
// far below the int64 range for periods up to MaxPeriod).
func split(r *big.Rat) (int64, Fraction, bool) {
	whole, rem := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if !whole.IsInt64() || !r.Denom().IsInt64() {
		return 0, Fraction{}, false
	}
	f := new(big.Rat).SetFrac(rem, r.Denom()) // reduced to lowest terms
	return whole.Int64(), Fraction{Num: f.Num().Int64(), Den: f.Denom().Int64()}, true
}

// roundHalfUp rounds a non-negative amount to the nearest integer, halves
// up: floor(r + 1/2) = floor((2·num + den) / (2·den)). It is the package's
// only rounding.
func roundHalfUp(r *big.Rat) *big.Int {
	num := new(big.Int).Lsh(r.Num(), 1)
	num.Add(num, r.Denom())
	return num.Quo(num, new(big.Int).Lsh(r.Denom(), 1))
}

// allocate sets each line's AmountMinor by largest remainder so that they
// sum to total: each line gets its exact amount in minor units rounded
// down, and the units still missing go one each to the lines with the
// largest fractional parts, ties to the earlier line. Since total is the
// rounded sum of the exact amounts, the units missing number at most the
// lines with a fractional part, so no line moves by more than one unit.
func allocate(lines []Line, amounts []*big.Rat, perMinor *big.Rat, total int64) {
	rems := make([]*big.Rat, len(lines))
	order := make([]int, len(lines))
	missing := total
	for i := range lines {
		minor := new(big.Rat).Quo(amounts[i], perMinor)
		floor := new(big.Int).Quo(minor.Num(), minor.Denom())
		lines[i].AmountMinor = floor.Int64()
		missing -= lines[i].AmountMinor
		rems[i] = minor.Sub(minor, new(big.Rat).SetInt(floor))
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return rems[order[a]].Cmp(rems[order[b]]) > 0 })
	// With a rounding carry the total may be one unit past the lines'
	// units either way: one more goes to the largest remainder (the first
	// line when none has one), one less comes off the smallest remainder
	// of a line that has a unit.
	for k := 0; missing > 0; k++ {
		lines[order[k%len(order)]].AmountMinor++
		missing--
	}
	for k := len(order) - 1; missing < 0 && k >= 0; k-- {
		if i := order[k]; lines[i].AmountMinor > 0 {
			lines[i].AmountMinor--
			missing++
		}
	}
}

func flatDescription(active, period int64) string {
	const day = 24 * 60 * 60
	switch {
	case active == period:
		return "Monthly fee"
	case active%day == 0 && period%day == 0:
		return fmt.Sprintf("Monthly fee, prorated for %d of %d days", active/day, period/day)
	default:
		return fmt.Sprintf("Monthly fee, prorated for %d of %d seconds", active, period)
	}
}
