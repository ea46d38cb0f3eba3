// Package stripe is the billing.Provider on Stripe (stripe-go v76, API
// version 2023-10-16). It is the only package that imports stripe-go; cmd/
// wires it in when AGENTMARKET_STRIPE_SECRET_KEY is set. Every call goes
// through this Provider's own client.API and backend (never stripe-go's
// global key or backend), so tests and several configurations can live in
// one process.
//
// # Objects
//
// Per listing, one product with the deterministic id "am_<listing id>".
// Per plan version, five monthly prices on it: the flat fee (licensed,
// quantity 1) and one metered price per billing.MeteredLineKinds
// (usage_type metered, aggregate_usage sum). Per org, a customer. Per
// contract, a subscription with the flat item first and the metered items
// after it in MeteredLineKinds order. Every object carries metadata naming
// our ids (agentmarket_listing_id, agentmarket_plan_version,
// agentmarket_line_kind, agentmarket_org_id, agentmarket_contract_id) for
// people and for reconciliation; only an invoice item's key
// (agentmarket_item_key) is read back, by AddInvoiceItem's resend.
//
// # Units and prices
//
// Usage is reported in the units billing.Rate counts (tokens,
// milliseconds of compute, tasks) and each metered price is the plan's
// price of ONE such unit, in the currency's minor unit:
//
//	flat fee:  monthly_fee_micros                / 10^(6−d)
//	tokens:    per_million_micros / 1,000,000    / 10^(6−d)
//	compute:   per_hour_micros    / 3,600,000    / 10^(6−d)   (per ms)
//	tasks:     per_task_micros                   / 10^(6−d)
//
// where d is the currency's minor unit digits (billing.MinorUnitDigits).
// A price that is a whole number of minor units is sent as unit_amount;
// any other as unit_amount_decimal, a decimal string computed with integer
// arithmetic (no float anywhere: stripe-go's own field for it is a
// float64, so the string goes out as an extra parameter). Stripe keeps 12
// decimals, and these fit exactly:
//
//   - tokens need 12−d decimals (1 micro per million tokens is 10^-10 cent
//     per token in usd): always exact;
//   - tasks and the flat fee need at most 6−d: always exact;
//   - compute per ms is exact when per_hour_micros is a multiple of 9
//     (of 18 for zero-decimal currencies), because 3,600,000 ms has the
//     factor 9. Otherwise the per-ms price has no finite decimal, and it is
//     rounded half up at the 12th decimal: off by less than 5×10^-13 minor
//     unit per ms, i.e. less than 0.0013 minor unit on a month of
//     uninterrupted compute (2.6×10^9 ms).
//
// Why per unit, rather than per 1,000 tokens or per hour with
// transform_quantity: transform_quantity rounds the reported quantity to a
// whole number of its units (up or down), so billing per 1,000 tokens or
// per hour would bill usage that Rate does not; reporting the same units
// as Rate keeps Stripe's quantity equal to Rate's Used, and the unit
// prices above fit Stripe's 12 decimals.
//
// The allowance is in the price, so usage is reported in full: a plan
// with included units gets a graduated tiered price whose first tier (up
// to the included units) costs 0 and whose second tier (up to inf) costs
// the unit price above. Stripe then bills max(0, used − included) × price
// per billing period, which is Rate's line, and like Rate it does not
// prorate the allowance. Without an allowance the price is per_unit.
//
// The flat fee is charged in advance and the usage in arrears, both by
// calendar month when Subscribe is given the BillingCycleAnchor (Stripe
// prorates the first partial month, and CancelSubscription credits the
// unused part of the last one: invoice_now and prorate), so Rate's
// invoice for a month corresponds to the Stripe invoice lines whose
// line period is that month: the metered lines of the invoice issued at
// the month's end and the flat fee line (plus any proration lines) of the
// invoice issued at its start.
//
// # Where Stripe's rounding differs
//
// Rate keeps every line exact and rounds once, on the total (half up),
// then splits the total over the lines by largest remainder. Stripe rounds
// each line (quantity × unit price) to the minor unit on its own; a
// prorated fee and its cancellation credit are two lines, each rounded. So
// for the same usage:
//
//   - a line whose exact amount is a whole number of minor units (most
//     flat fees, most prices in practice) is equal on both sides;
//   - a line with a fraction of a minor unit may differ by one minor unit
//     between Stripe's line and Rate's AmountMinor, and Stripe's invoice
//     total may differ from Rate's TotalMinor by at most half a minor unit
//     per such line, plus one half;
//   - an inexact per-ms compute price adds the bound above (below 0.0013
//     minor unit a month), which can move Stripe's compute line by one
//     minor unit only when Rate's exact line lies that close to a half.
//
// Reconciliation therefore compares Stripe's line for a kind and period
// not with Line.AmountMinor but with Line.ExactMicros converted to minor
// units and rounded to the nearest unit: equal means Stripe billed what
// Rate rated, and the difference between the two totals is reported as
// rounding, not as a discrepancy. Anything else (another quantity, another
// price, a missing line) is a discrepancy.
//
// # Idempotency keys
//
// Every create sends an Idempotency-Key derived from our ids, so a retry
// (ours, or stripe-go's own: after network errors, 409, 429 lock
// timeouts and 503) is answered from Stripe's record instead of creating a
// second object:
//
//	product       am1/listing/<listing id>/plan/<version>/product
//	price         am1/listing/<listing id>/plan/<version>/price/<kind>
//	              (kind: flat_fee, input_tokens, output_tokens, compute, tasks)
//	customer      am1/org/<org id>/customer
//	subscription  am1/contract/<contract id>/subscription
//	cancellation  billing.CancelKey:      am1/contract/<contract id>/cancel
//	usage record  billing.UsageReportKey: am1/contract/<contract id>/usage/<kind>/<window start>-<window end>
//	invoice item  billing.CommitmentKey:  am1/contract/<contract id>/commitment/<period start>
//	              billing.CreditKey:      am1/contract/<contract id>/credit/<period start>
//	invoice       <invoice item key>/invoice (an item without a live subscription, AddInvoiceItem)
//
// Stripe keeps a key for 24 hours and answers a key reused with other
// parameters with an idempotency_error (a Conflict here). It also keeps
// the answer to a request that failed with a 500 once it began executing:
// a retry with the same key gets the same 500 for those 24 hours, and
// whether the object exists is then for reconciliation to find out. Past 24 hours
// only the product is still protected, by its deterministic id: creating
// it again answers resource_already_exists, which EnsurePlan takes as
// success; and an invoice item, by its key in its metadata
// (agentmarket_item_key), which a resend (InvoiceItem.Resend) looks for
// among the customer's items before creating it. So the caller stores
// what EnsurePlan, EnsureCustomer and Subscribe return, and the usage
// reporter records its watermark, before calling again.
//
// # Errors
//
// Stripe's errors become the application's kinds: a declined card and an
// invalid request are Invalid (an unknown object is NotFound), a key
// reused with other parameters is Conflict, rate limiting, Stripe's 5xx,
// lock conflicts and network failures are Unavailable (after stripe-go's
// retries), and a rejected or under-privileged secret key is Internal,
// with a cause that says to check AGENTMARKET_STRIPE_SECRET_KEY (the
// transport logs it once; callers see only "payment provider error").
package stripe
