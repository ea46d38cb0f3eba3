package billing

import (
	"context"
	"time"
)

// Store persists billing's own state: the provider's objects we created
// (so a retry reuses them instead of asking the provider again past its
// idempotency window), the usage reporter's outbox and watermarks, the
// webhook events processed, and the own ledger's invoices.
// Implementations: billing/gormstore; every implementation passes
// billing/storetest.
//
// Lookups of one thing that does not exist answer a NotFound error. The
// Save methods are "first write wins": when the row exists already they
// change nothing and return what is stored, so two racing callers end up
// using the same objects.
type Store interface {
	// PlanPrices returns the provider's prices of a listing's plan version.
	PlanPrices(ctx context.Context, listingID string, version int) (PlanPrices, error)
	SavePlanPrices(ctx context.Context, listingID string, version int, p PlanPrices, at time.Time) (PlanPrices, error)

	// Customer returns the provider's customer of an org.
	Customer(ctx context.Context, orgID string) (Customer, error)
	SaveCustomer(ctx context.Context, orgID string, c Customer, at time.Time) (Customer, error)

	// Subscription returns a contract's subscription at the provider.
	Subscription(ctx context.Context, contractID string) (*Subscription, error)
	SaveSubscription(ctx context.Context, s *Subscription) (*Subscription, error)
	// ContractOfSubscription returns the contract id of a provider
	// subscription id (for webhooks).
	ContractOfSubscription(ctx context.Context, subscriptionID string) (string, error)
	// OpenSubscriptions lists the subscriptions not canceled, by contract id.
	OpenSubscriptions(ctx context.Context) ([]Subscription, error)
	// SetSubscriptionCanceled records that the subscription ended at at
	// (the first time only); NotFound for a contract without one.
	SetSubscriptionCanceled(ctx context.Context, contractID string, at time.Time) error
	// SetSubscriptionItems records a subscription's items after a plan
	// change; NotFound for a contract without a subscription.
	SetSubscriptionItems(ctx context.Context, contractID string, refs SubscriptionRefs) error
	// SetSubscriptionUsageFrom records from when the contract's usage is
	// reported (the end of its trial); NotFound for a contract without a
	// subscription.
	SetSubscriptionUsageFrom(ctx context.Context, contractID string, from time.Time) error

	// Watermark returns how much of a contract's usage of one kind in the
	// billing period starting at periodStart has been reported; the zero
	// Reported and Through when nothing has.
	Watermark(ctx context.Context, contractID string, kind LineKind, periodStart time.Time) (Watermark, error)
	// LatestWatermark is the contract's watermark of the kind in the
	// latest period that has one; NotFound when there is none.
	LatestWatermark(ctx context.Context, contractID string, kind LineKind) (Watermark, error)
	// AddReport records r as pending, in the outbox, provided the
	// watermark is still seen (same Reported and Through) and the contract
	// has no pending report of that kind; otherwise it changes nothing and
	// answers a Conflict (someone else is reporting that usage).
	AddReport(ctx context.Context, r *UsageReport, seen Watermark) error
	// SkipWindow moves the watermark's Through to through without a
	// report (the window had no usage), under the same conditions as
	// AddReport.
	SkipWindow(ctx context.Context, seen Watermark, through time.Time) error
	// PendingReports lists the reports not yet sent, oldest window first;
	// contractID "" lists every contract's.
	PendingReports(ctx context.Context, contractID string) ([]UsageReport, error)
	// MarkReportSent turns a pending report into a sent one and, in the
	// same transaction, adds its quantity to the period's watermark and
	// moves Through to the window's end (never back). It reports whether
	// it did: a report already sent (or failed) is left as it is.
	MarkReportSent(ctx context.Context, key ReportKey, at time.Time) (bool, error)
	// MarkReportFailed turns a pending report into a failed one, for a
	// refusal the provider will repeat; the watermark's Through moves past
	// the window but Reported does not, so the next window carries the
	// quantity again.
	MarkReportFailed(ctx context.Context, key ReportKey, at time.Time, reason string) (bool, error)
	// Reports lists the reports of q, ordered by contract, kind and window.
	Reports(ctx context.Context, q ReportQuery) ([]UsageReport, error)

	// WebhookEventSeen reports whether an event id has been recorded.
	WebhookEventSeen(ctx context.Context, eventID string) (bool, error)
	// RecordWebhookEvent records an event once and reports whether this
	// call recorded it. An applied event with a contract also advances
	// that contract's last applied event time (never back), in the same
	// transaction.
	RecordWebhookEvent(ctx context.Context, e *WebhookEvent) (bool, error)
	// LastAppliedEvent is the created time of the newest event applied to
	// a contract, zero when none.
	LastAppliedEvent(ctx context.Context, contractID string) (time.Time, error)

	// AddCommitmentCharge records a contract's commitment charge of a
	// period, pending, unless it has one; it returns the one stored.
	AddCommitmentCharge(ctx context.Context, c *CommitmentCharge) (*CommitmentCharge, error)
	// MarkCommitmentChargeSent records that the provider took it.
	MarkCommitmentChargeSent(ctx context.Context, contractID string, periodStart, at time.Time) error
	// CommitmentCharge returns a contract's charge of the period starting
	// at periodStart, or NotFound.
	CommitmentCharge(ctx context.Context, contractID string, periodStart time.Time) (*CommitmentCharge, error)
	// AddCreditItem, MarkCreditItemSent and CreditItem are the same for
	// the credit a contract's month is given back at the provider
	// (credit.go): one per contract and period.
	AddCreditItem(ctx context.Context, c *CommitmentCharge) (*CommitmentCharge, error)
	MarkCreditItemSent(ctx context.Context, contractID string, periodStart, at time.Time) error
	CreditItem(ctx context.Context, contractID string, periodStart time.Time) (*CommitmentCharge, error)

	// SaveInvoice stores a contract's invoice for a period unless it has
	// one, and reports whether it stored this one.
	SaveInvoice(ctx context.Context, inv *LocalInvoice) (bool, error)
	// Invoice returns a contract's invoice for the period starting at
	// periodStart.
	Invoice(ctx context.Context, contractID string, periodStart time.Time) (*LocalInvoice, error)
	// Invoices lists the invoices of the period starting at periodStart,
	// by contract id.
	Invoices(ctx context.Context, periodStart time.Time) ([]LocalInvoice, error)
}

// Subscription is a contract's subscription at the provider.
type Subscription struct {
	ContractID string
	CustomerID string
	Refs       SubscriptionRefs
	CreatedAt  time.Time
	// CanceledAt is when it was canceled (by Detach, or at the provider);
	// the reporter stops reporting to it.
	CanceledAt *time.Time
	// UsageFrom is when the contract's usage starts to be reported: the
	// end of its free trial (zero: no trial), whose usage is free.
	UsageFrom time.Time
}

// Watermark is how much of a contract's usage of one line kind in one
// billing period has been reported to the provider.
type Watermark struct {
	ContractID  string
	Kind        LineKind
	PeriodStart time.Time
	// Reported is the quantity sent so far in the period: the sum of its
	// sent reports.
	Reported int64
	// Through is the end of the last window reported, or skipped for
	// having no usage (zero: none yet).
	Through time.Time
}

// ReportStatus is where a usage report is in the outbox.
type ReportStatus string

const (
	// ReportPending is recorded and maybe sent, but not known to be: it is
	// sent again, exactly, until it is marked sent.
	ReportPending ReportStatus = "pending"
	ReportSent    ReportStatus = "sent"
	// ReportFailed was refused by the provider for a reason a retry would
	// not change; its quantity goes out with the next window.
	ReportFailed ReportStatus = "failed"
)

// ReportKey names one usage report: a contract's usage of one kind in the
// window starting at WindowStart.
type ReportKey struct {
	ContractID  string
	Kind        LineKind
	WindowStart time.Time
}

// UsageReport is one row of the reporter's outbox: the usage of one line
// kind of a contract in one closed window, as sent (or to be sent) to the
// provider.
type UsageReport struct {
	ContractID string
	Kind       LineKind
	// Window is the span reported; PeriodStart the start of the billing
	// period it belongs to (the window lies inside that period).
	Window      Period
	PeriodStart time.Time
	// ItemID is the subscription item the usage is reported to.
	ItemID         string
	Quantity       int64
	IdempotencyKey string
	Status         ReportStatus
	// Error is why the provider refused a failed report.
	Error     string
	CreatedAt time.Time
	SentAt    *time.Time
}

// Key is the report's key.
func (r *UsageReport) Key() ReportKey {
	return ReportKey{ContractID: r.ContractID, Kind: r.Kind, WindowStart: r.Window.Start}
}

// ReportQuery selects reports: empty filters match everything; a window
// matches when it lies within [From, To).
type ReportQuery struct {
	ContractID string
	From, To   time.Time
	Status     ReportStatus
}

// WebhookOutcome is what became of a webhook event.
type WebhookOutcome string

const (
	WebhookApplied WebhookOutcome = "applied"
	// WebhookIgnoredType: a type that does not move contracts.
	WebhookIgnoredType WebhookOutcome = "ignored_type"
	// WebhookUnknownSubscription: no contract has that subscription.
	WebhookUnknownSubscription WebhookOutcome = "unknown_subscription"
	// WebhookStale: older than the last event applied to the contract.
	WebhookStale WebhookOutcome = "stale"
	// WebhookRefused: the contract's life cycle does not allow the move
	// (a canceled contract's final invoice being paid, say).
	WebhookRefused WebhookOutcome = "refused_transition"
)

// WebhookEvent is a processed webhook event.
type WebhookEvent struct {
	ID         string
	Type       string
	Created    time.Time
	ReceivedAt time.Time
	// ContractID is the contract it concerns, when known.
	ContractID string
	Outcome    WebhookOutcome
}

// CommitmentCharge is what a contract on the provider is charged for a
// month that fell short of its minimum commitment: recorded (pending)
// before the provider is called, marked sent after, so it is charged once.
type CommitmentCharge struct {
	ContractID     string
	PeriodStart    time.Time
	Currency       string
	AmountMinor    int64
	IdempotencyKey string
	// Description is the invoice item's text: a commitment's shortfall,
	// the allowance shared with the month's earlier stays and plans
	// (which the provider's per-item free tiers miss), or both. Empty on
	// charges recorded before it: a commitment's.
	Description string
	CreatedAt   time.Time
	SentAt      *time.Time
}

// LocalInvoice is an invoice of the own ledger: a contract's closed
// period, rated.
type LocalInvoice struct {
	ContractID string
	Invoice    Invoice
	CreatedAt  time.Time
}
