// Package billing rates a contract's usage into an invoice. Its Rate is the
// source of truth for every amount AgentMarket charges: Stripe (or the own
// ledger) only carries what this package computes, and reconciliation
// compares against it. The rules below are the ones finance can rely on.
//
// # Units
//
// Prices and amounts are integers of micro-units of the plan's currency
// (1 USD = 1,000,000 micros). No floating point is used anywhere. The one
// conversion to the currency's minor unit (cents, yen, fils) happens once,
// on the invoice total; see Rounding.
//
// # Billing period
//
// A Period is [Start, End) in UTC; by default the calendar month (MonthOf).
// Proration counts whole seconds: both ends of a period are truncated to
// the second before anything is measured. A billed period is at most 366
// days long.
//
// # Flat fee
//
// The plan's monthly fee is charged per billed period. When the contract is
// active for only part of the period (it starts or ends inside it), the fee
// is prorated by time:
//
//	fee × active_seconds / period_seconds
//
// where active_seconds is the length of the overlap of the contract's
// active span with the billed period. The product is computed with
// arbitrary-precision integers (math/big: fee × seconds exceeds int64 for
// large fees) and is kept as an exact fraction, not rounded. January has
// 2,678,400 seconds, April 2,592,000, February 2,419,200 (2,505,600 in a
// leap year), so a contract active for the last 10 days of April pays
// exactly 10/30 of the fee, and of January exactly 10/31.
//
// # Allowance
//
// The included units of a plan (included_input_tokens,
// included_output_tokens, included_compute_ms, included_tasks) are free
// once per calendar month per buyer org and listing, in full, and are NOT
// prorated when a contract is active for only part of the month. Every
// stay of the org on the listing in the month draws on that one allowance,
// in the order they began: each part (a contract, or one plan of a
// contract that changed plans) may use free what is left of its own
// plan's allowance after what the month's earlier parts used free
// (Part.AllowanceUsed, AllowanceUsed). Why:
//
//   - No sequence of subscribing, canceling, resubscribing and changing
//     plans gets more free usage in a month than the largest allowance
//     among the plans held: cycling stays collects nothing.
//   - A shorter stay never makes the same usage dearer: a buyer who
//     cancels on the 10th pays less, never more, than one who stays to
//     the end for the same usage. (Prorated allowances break this: fewer
//     free units can cost more than the fee saved.)
//   - Prorating a count of units needs a second rounding (of units), and
//     the house rule is one rounding, in one place.
//
// With Stripe, a metered price's free first tier applies per subscription
// item and period: a second stay or a replaced item in the same month gets
// a tier again at Stripe. ChargeCommitments charges what that misses
// (allowanceShared) as an invoice item once the month is over, so the
// buyer pays at Stripe what the own rating rates. Stripe also rounds each
// subscription's invoice on its own, where the own rating rounds an org's
// stays on a listing in a month once together (Part.RoundingCarry): the
// same item carries what the carry changes of a stay's total, a cent
// either way, so stays too short to cost a cent each are charged the
// month's amount rounded once at Stripe too.
//
// # Parts
//
// A contract's terms may change inside a period: a free trial ends, a
// plan is replaced. The period is then rated in parts (RateParts), each
// the span one set of terms was in force, with the usage metered in that
// span (split at the instant the terms changed, to the millisecond of the
// usage rows). Each part is rated by the rules below as a contract active
// for that span only: its flat fee prorated by its whole seconds, what is
// left of the month's allowance. A part may be shorter than a second: it
// rates as zero seconds of fee and keeps its usage. A trial part is rated at zero: its lines show
// the seconds and the usage at a price of zero. The exact amounts of all
// parts are summed, and the sum is rounded once.
//
// # Usage lines
//
// For each counter, billable = max(0, used − included), and:
//
//	input, output tokens: billable × price_per_million / 1,000,000
//	compute:              billable_ms × price_per_hour / 3,600,000
//	tasks:                billable × price_per_task
//
// Every line's amount is exact: Line.AmountMicros holds its whole micros
// and Line.AmountFraction the rest below one micro (a compute millisecond
// at 0.36 USD an hour is 1/10 of a micro). Lines are summed exactly into
// the subtotal, which is likewise SubtotalMicros + SubtotalFraction. Nothing
// is lost before the total is rounded.
//
// The meter's per-call cost (a2aproxy.Rate) is a list price rounded per
// call and ignores the allowance; invoices never sum those costs, they
// re-rate the period's summed usage here.
//
// # Rounding
//
// The exact subtotal is converted to the currency's minor unit exactly
// once, rounding half up (a half minor unit or more goes up: 0.5 cent → 1
// cent, 2.5 cents → 3 cents; amounts are never negative). Half up rather
// than banker's rounding (half to even) because only one amount per invoice
// is rounded, so there is no accumulated bias for half-to-even to cancel,
// and half up is the rule buyers, sellers and accountants expect (and the
// one the meter's per-call list price uses). The exact subtotal is rounded
// directly: never first to whole micros and then to minor units, which
// could round twice (4,999.6 micros is 0 cents, not 1).
//
// Minor units follow the ISO 4217 exponent of the currency (MinorUnitDigits):
// 2 digits for usd, eur, gbp and most others, 0 for jpy, krw and the other
// zero-decimal currencies, 3 for bhd, iqd, jod, kwd, lyd, omr and tnd. A
// currency not in the table is refused rather than guessed.
//
// # Lines versus total
//
// The invoice total (TotalMinor) is the rounded exact subtotal. Each line
// also carries AmountMinor, its share of that total in minor units, so that
// the lines printed on an invoice add up to its total exactly. The shares
// are allocated by largest remainder: every line gets its exact amount
// rounded down to the minor unit, and the minor units still missing from
// the total (never more than there are lines with a fractional part) go
// one each to the lines with the largest fractional parts, ties to the
// earlier line (the order of LineKinds). So every AmountMinor is its exact
// line amount rounded either down or up, and the AmountMinor of all lines
// sum to TotalMinor.
//
// # Exports
//
// The FOCUS export (Focus) divides an invoice among the tasks and tags
// that used it: each line's AmountMinor, in micros, is apportioned among
// its resources in proportion to their units by largest remainder
// (apportion), so the rows sum to the line, and the lines to the total,
// exactly. Apportioning divides an amount already rounded; it rounds
// nothing.
//
// # Limits
//
// Every amount must fit an int64 of micros (up to 9,223,372,036,854,775,807
// micros: 9.2 trillion of the major unit). Plan amounts are bounded
// (listings.Plan.CheckAmounts: usage prices at most 10^10 micros, the
// monthly fee 10^13, allowances 10^12 units; docs/billing.md says why) and
// a plan past a bound is refused. Usage sums saturate at the largest int64
// instead of wrapping (metering.Sum); a line or subtotal above the int64
// range, which a saturated sum gives, is refused with an Invalid error
// (code amount_out_of_range) for that contract only, rather than wrapped.
// Realistic volumes are far inside: 10^12 tokens at 1,000 USD per million
// is 10^15 micros.
//
// # Preview
//
// Preview rates an open period: the usage so far, and the flat fee for the
// whole part of the period the contract covers (to the period's end, or
// the contract's end if it is set), since that fee will be due whatever
// happens between now and then.
//
// Nothing in this package reads the wall clock: the caller passes the
// periods and the preview's "now".
package billing
