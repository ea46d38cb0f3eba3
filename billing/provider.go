package billing

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings"
)

// Provider is a payment provider that invoices and collects what Rate
// computes (Stripe is one; the own ledger needs none). It only carries
// amounts: Rate stays the source of truth, and reconciliation compares the
// provider's invoices against it.
//
// Every call that creates something at the provider is idempotent: the
// provider derives an idempotency key from our ids (or takes the caller's),
// so a retry after a timeout or a crash creates nothing twice. Providers
// keep such keys for a limited time (Stripe: 24 hours), so the caller
// stores what a call returns and does not repeat a call it has a result
// for.
type Provider interface {
	// EnsurePlan creates the product, the flat monthly price and one
	// metered monthly price per MeteredLineKinds for a listing's plan
	// version (idempotency keys derived from listing id + plan version +
	// kind, so a retry creates nothing twice). The metered prices carry
	// the plan's allowance, so usage is reported in full (see ReportUsage).
	EnsurePlan(ctx context.Context, listingID, listingName string, plan listings.Plan) (PlanPrices, error)
	// EnsureCustomer creates the customer that pays for an org's contracts.
	EnsureCustomer(ctx context.Context, orgID, orgName, email string) (Customer, error)
	// Subscribe creates the subscription with the flat item and the
	// metered items; with a seller's connected account, the seller is paid
	// the charges less the platform's fee.
	Subscribe(ctx context.Context, in SubscribeInput) (SubscriptionRefs, error)
	// CancelSubscription ends a subscription at once: the provider invoices
	// the usage not yet invoiced and credits the unused part of the flat
	// fee, so the period is billed as Rate bills a contract that ends in
	// it. See CancelKey for the key.
	CancelSubscription(ctx context.Context, subscriptionID, idempotencyKey string) error
	// EndTrialNow ends a subscription's free trial now, before its
	// scheduled end (its usage allowance is used up): the provider starts
	// charging from now. See TrialEndKey for the key.
	EndTrialNow(ctx context.Context, subscriptionID, idempotencyKey string) error
	// SetCancelAt makes a subscription end by itself at at (the end of its
	// trial, when the buyer chose to stop then; the end of the billing
	// period), or no longer (at zero). Each change carries its own key
	// (ScheduleEndKey).
	SetCancelAt(ctx context.Context, subscriptionID string, at time.Time, idempotencyKey string) error
	// ChangePlan replaces a subscription's items (its flat fee and metered
	// items) with the prices of another plan version from in.At: the
	// provider prorates the flat fee by the second onto the next invoice,
	// and the usage already reported to the old items is invoiced at the
	// old prices. It returns the new items. See PlanChangeKey for the key.
	ChangePlan(ctx context.Context, in PlanChangeInput) (SubscriptionRefs, error)
	// AddInvoiceItem adds a one-off charge (a month's adjustment: its
	// minimum commitment's shortfall, the allowance shared across stays,
	// the month's one rounding) or, with a negative amount, a credit
	// (prepaid credit a month's calls burned) to in.SubscriptionID's next
	// invoice or, without one, to an invoice of the customer issued at
	// once. It is charged once however often it is called with the same
	// key, also past the provider's idempotency window when in.Resend
	// says an earlier call may have reached it. See CommitmentKey and
	// CreditKey for the keys.
	AddInvoiceItem(ctx context.Context, in InvoiceItem) error
	// ReportUsage adds quantity to one metered subscription item at time at
	// (action increment). quantity is in the units of the line kind's
	// Usage counter (tokens, milliseconds of compute, tasks) and is the
	// usage itself, not the billable part: the prices hold the allowance.
	// at must fall inside the subscription's current billing period and
	// the reported window (its last second, say), and not in the future.
	// See UsageReportKey for the key.
	ReportUsage(ctx context.Context, itemID string, quantity int64, at time.Time, idempotencyKey string) error
}

// PlanChangeInput is a subscription's move to another plan version.
type PlanChangeInput struct {
	SubscriptionID string
	// Old are the subscription's items now, Prices the new plan's.
	Old    SubscriptionRefs
	Prices PlanPrices
	// At is the instant of the change (proration from there).
	At             time.Time
	IdempotencyKey string
}

// InvoiceItem is a one-off charge of a contract's month.
type InvoiceItem struct {
	CustomerID string
	// SubscriptionID is the live subscription whose next invoice takes
	// the item (the contract's own, or another of the org's on the same
	// listing); empty when none lives: the provider invoices the item
	// on its own, at once (a canceled subscription invoices nothing more).
	SubscriptionID string
	// ContractID is the contract whose month it adjusts (for people, and
	// to find the item again).
	ContractID string
	Currency   string
	// AmountMinor is in the currency's minor unit, as Rate rounded it.
	AmountMinor    int64
	Description    string
	IdempotencyKey string
	// Period is the span the charge is for.
	Period Period
	// Resend is set when the item was recorded by an earlier call that
	// may have reached the provider (a crash, a timeout): the provider
	// then first looks for it, since its idempotency key may have
	// expired.
	Resend bool
}

// MeteredLineKinds are the usage lines, in invoice order: each has a
// metered price per plan version and a metered item per subscription.
var MeteredLineKinds = []LineKind{LineInputTokens, LineOutputTokens, LineCompute, LineTasks}

// PlanPrices are a plan version's objects at the provider.
type PlanPrices struct {
	ProductID   string
	FlatPriceID string
	// MeteredPriceIDs has one price per MeteredLineKinds.
	MeteredPriceIDs map[LineKind]string
}

// Customer is an org's customer at the provider.
type Customer struct{ ID string }

// SubscriptionRefs are a contract's subscription at the provider and its
// items: the flat fee's and one metered item per MeteredLineKinds, to
// which usage is reported.
type SubscriptionRefs struct {
	ID             string
	FlatItemID     string
	MeteredItemIDs map[LineKind]string
}

// SubscribeInput is what a contract's subscription is made of.
type SubscribeInput struct {
	ContractID string
	CustomerID string
	Prices     PlanPrices
	// BillingCycleAnchor, when set, is the end of the contract's first
	// billing period (MonthOf(start).End): the provider's periods are then
	// the calendar months Rate bills, and the first one is prorated as
	// Rate prorates it. Zero leaves the provider's default (periods start
	// when the subscription does).
	BillingCycleAnchor time.Time
	// TrialEnd, when set, is the end of the contract's free trial: the
	// provider charges nothing before it (the first period, from it to
	// BillingCycleAnchor, is prorated). CancelAtTrialEnd ends the
	// subscription then instead.
	TrialEnd         time.Time
	CancelAtTrialEnd bool
	// ConnectedAccountID is the seller's connected account that receives
	// the charges less the platform's fee; empty: the platform keeps all.
	ConnectedAccountID string
	// PlatformFeePercent is the platform's share of every invoice, in
	// percent (0 to 100, at most two decimals). It is a float64 because it
	// is Stripe's own parameter type (application_fee_percent) and never an
	// amount of money: no amount is computed from it here. It requires a
	// ConnectedAccountID.
	PlatformFeePercent float64
}

// Validate reports every broken rule.
func (in SubscribeInput) Validate() error {
	var fe agentmarket.Fields
	if in.ContractID == "" {
		fe.Add("contract_id", "required", "contract_id is required")
	}
	if in.CustomerID == "" {
		fe.Add("customer_id", "required", "customer_id is required")
	}
	if in.Prices.FlatPriceID == "" {
		fe.Add("prices.flat_price_id", "required", "the flat fee's price is required")
	}
	seen := map[string]bool{in.Prices.FlatPriceID: in.Prices.FlatPriceID != ""}
	for _, k := range MeteredLineKinds {
		id := in.Prices.MeteredPriceIDs[k]
		switch {
		case id == "":
			fe.Add("prices.metered_price_ids."+string(k), "required", "the %s price is required", k)
		case seen[id]:
			fe.Add("prices.metered_price_ids."+string(k), "unique", "the %s price %q is used for another line too", k, id)
		}
		seen[id] = true
	}
	for k := range in.Prices.MeteredPriceIDs {
		if !isMetered(k) {
			fe.Add("prices.metered_price_ids."+string(k), "unknown", "%q is not a metered line kind", k)
		}
	}
	if in.CancelAtTrialEnd && in.TrialEnd.IsZero() {
		fe.Add("cancel_at_trial_end", "requires_trial", "cancel_at_trial_end needs a trial_end")
	}
	if !in.TrialEnd.IsZero() && !in.BillingCycleAnchor.IsZero() && in.BillingCycleAnchor.Before(in.TrialEnd) {
		fe.Add("billing_cycle_anchor", "after_trial", "the billing cycle anchor cannot come before the trial's end")
	}
	p := in.PlatformFeePercent
	switch {
	case math.IsNaN(p) || p < 0 || p > 100:
		fe.Add("platform_fee_percent", "range", "platform_fee_percent must be between 0 and 100")
	case math.Abs(p*100-math.Round(p*100)) > 1e-6:
		fe.Add("platform_fee_percent", "precision", "platform_fee_percent has at most two decimals")
	case p != 0 && in.ConnectedAccountID == "":
		fe.Add("platform_fee_percent", "requires_connected_account", "a platform fee needs the seller's connected account")
	}
	return fe.Err("invalid_subscribe_input", "the subscription cannot be created")
}

func isMetered(k LineKind) bool {
	for _, m := range MeteredLineKinds {
		if m == k {
			return true
		}
	}
	return false
}

// Idempotency keys of the calls whose key the caller passes. They share
// the "am1/" scheme with the keys providers derive themselves (see the
// provider's documentation): "am1" versions the scheme, and the rest names
// the object and our ids, so the same operation on the same objects always
// sends the same key and different operations never share one.

// CancelKey is the idempotency key of a contract's cancellation.
func CancelKey(contractID string) string {
	return "am1/contract/" + contractID + "/cancel"
}

// CommitmentKey is the idempotency key of a contract's charge for falling
// short of its minimum commitment in the period starting at periodStart.
func CommitmentKey(contractID string, periodStart time.Time) string {
	return fmt.Sprintf("am1/contract/%s/commitment/%d", contractID, periodStart.Unix())
}

// TrialEndKey is the idempotency key of ending a contract's trial early.
func TrialEndKey(contractID string) string {
	return "am1/contract/" + contractID + "/trial-end"
}

// ScheduleEndKey is the idempotency key of one change, made at now, of
// when a contract's subscription ends by itself (end; zero: it no longer
// does): every change is its own call (the same key twice would be
// answered from the first, however the choice changed in between).
func ScheduleEndKey(contractID string, end, now time.Time) string {
	when := "none"
	if !end.IsZero() {
		when = fmt.Sprint(end.Unix())
	}
	return fmt.Sprintf("am1/contract/%s/cancel-at/%s/%d", contractID, when, now.UnixNano())
}

// PlanChangeKey is the idempotency key of a contract's seq-th plan change.
func PlanChangeKey(contractID string, seq int) string {
	return fmt.Sprintf("am1/contract/%s/plan-change/%d", contractID, seq)
}

// UsageReportKey is the idempotency key of one usage report: a contract's
// usage of one line kind in one closed window [Start, End) (Unix seconds).
// A window is reported once with its whole delta, so a retry of the same
// window sends the same key and the provider counts it once.
func UsageReportKey(contractID string, kind LineKind, window Period) string {
	return fmt.Sprintf("am1/contract/%s/usage/%s/%d-%d", contractID, kind, window.Start.Unix(), window.End.Unix())
}
