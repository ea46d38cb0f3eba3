// Package gormstore keeps billing's state in SQL through GORM: PostgreSQL
// in production, SQLite in the embedded default. The schema comes from
// migrations/ (0006_billing), never from GORM; rows map to billing's types
// explicitly in this file.
//
// Times are stored in UTC, truncated to the microsecond (PostgreSQL's
// precision), so what is read back equals what was written. The usage
// outbox serializes reporters on the watermark row: AddReport and
// SkipWindow lock it (SELECT … FOR UPDATE on PostgreSQL; SQLite runs one
// transaction at a time) before checking that it is still what the caller
// saw.
package gormstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

// Store implements billing.Store.
type Store struct {
	db *gorm.DB
}

var _ billing.Store = (*Store)(nil)

// New returns a store over db, whose schema the migrations have created.
func New(db *gorm.DB) *Store { return &Store{db: db} }

func ts(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func tsp(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := ts(*t)
	return &u
}

// ---- plan prices ----

type planPricesRow struct {
	ListingID       string `gorm:"primaryKey"`
	PlanVersion     int    `gorm:"primaryKey"`
	ProductID       string
	FlatPriceID     string `gorm:"column:flat_price_id"`
	MeteredPriceIDs string `gorm:"column:metered_price_ids"`
	CreatedAt       time.Time
}

func (planPricesRow) TableName() string { return "billing_plan_prices" }

// PlanPrices implements billing.Store.
func (s *Store) PlanPrices(ctx context.Context, listingID string, version int) (billing.PlanPrices, error) {
	var r planPricesRow
	if err := s.db.WithContext(ctx).Where("listing_id = ? AND plan_version = ?", listingID, version).Take(&r).Error; err != nil {
		return billing.PlanPrices{}, relational.Translate(err, "plan prices")
	}
	return planPricesFromRow(&r)
}

func planPricesFromRow(r *planPricesRow) (billing.PlanPrices, error) {
	ids, err := decodeKinds(r.MeteredPriceIDs)
	if err != nil {
		return billing.PlanPrices{}, err
	}
	return billing.PlanPrices{ProductID: r.ProductID, FlatPriceID: r.FlatPriceID, MeteredPriceIDs: ids}, nil
}

// SavePlanPrices implements billing.Store.
func (s *Store) SavePlanPrices(ctx context.Context, listingID string, version int, p billing.PlanPrices, at time.Time) (billing.PlanPrices, error) {
	ids, err := encodeKinds(p.MeteredPriceIDs)
	if err != nil {
		return billing.PlanPrices{}, err
	}
	row := &planPricesRow{ListingID: listingID, PlanVersion: version, ProductID: p.ProductID, FlatPriceID: p.FlatPriceID,
		MeteredPriceIDs: ids, CreatedAt: ts(at)}
	if err := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(row).Error; err != nil {
		return billing.PlanPrices{}, relational.Translate(err, "plan prices")
	}
	return s.PlanPrices(ctx, listingID, version)
}

// ---- customers ----

type customerRow struct {
	OrgID      string `gorm:"primaryKey"`
	CustomerID string
	CreatedAt  time.Time
}

func (customerRow) TableName() string { return "billing_customers" }

// Customer implements billing.Store.
func (s *Store) Customer(ctx context.Context, orgID string) (billing.Customer, error) {
	var r customerRow
	if err := s.db.WithContext(ctx).Where("org_id = ?", orgID).Take(&r).Error; err != nil {
		return billing.Customer{}, relational.Translate(err, "customer")
	}
	return billing.Customer{ID: r.CustomerID}, nil
}

// SaveCustomer implements billing.Store.
func (s *Store) SaveCustomer(ctx context.Context, orgID string, c billing.Customer, at time.Time) (billing.Customer, error) {
	row := &customerRow{OrgID: orgID, CustomerID: c.ID, CreatedAt: ts(at)}
	if err := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(row).Error; err != nil {
		return billing.Customer{}, relational.Translate(err, "customer")
	}
	return s.Customer(ctx, orgID)
}

// ---- subscriptions ----

type subscriptionRow struct {
	ContractID     string `gorm:"primaryKey"`
	SubscriptionID string
	CustomerID     string
	FlatItemID     string `gorm:"column:flat_item_id"`
	MeteredItemIDs string `gorm:"column:metered_item_ids"`
	CreatedAt      time.Time
	CanceledAt     *time.Time
	UsageFrom      *time.Time
}

func (subscriptionRow) TableName() string { return "billing_subscriptions" }

func subscriptionFromRow(r *subscriptionRow) (*billing.Subscription, error) {
	ids, err := decodeKinds(r.MeteredItemIDs)
	if err != nil {
		return nil, err
	}
	sub := &billing.Subscription{ContractID: r.ContractID, CustomerID: r.CustomerID, CreatedAt: r.CreatedAt.UTC(),
		Refs: billing.SubscriptionRefs{ID: r.SubscriptionID, FlatItemID: r.FlatItemID, MeteredItemIDs: ids}}
	if r.CanceledAt != nil {
		t := r.CanceledAt.UTC()
		sub.CanceledAt = &t
	}
	if r.UsageFrom != nil {
		sub.UsageFrom = r.UsageFrom.UTC()
	}
	return sub, nil
}

// Subscription implements billing.Store.
func (s *Store) Subscription(ctx context.Context, contractID string) (*billing.Subscription, error) {
	var r subscriptionRow
	if err := s.db.WithContext(ctx).Where("contract_id = ?", contractID).Take(&r).Error; err != nil {
		return nil, relational.Translate(err, "subscription")
	}
	return subscriptionFromRow(&r)
}

// SaveSubscription implements billing.Store.
func (s *Store) SaveSubscription(ctx context.Context, sub *billing.Subscription) (*billing.Subscription, error) {
	ids, err := encodeKinds(sub.Refs.MeteredItemIDs)
	if err != nil {
		return nil, err
	}
	row := &subscriptionRow{ContractID: sub.ContractID, SubscriptionID: sub.Refs.ID, CustomerID: sub.CustomerID,
		FlatItemID: sub.Refs.FlatItemID, MeteredItemIDs: ids, CreatedAt: ts(sub.CreatedAt), CanceledAt: tsp(sub.CanceledAt)}
	if !sub.UsageFrom.IsZero() {
		u := ts(sub.UsageFrom)
		row.UsageFrom = &u
	}
	// Only a second row for the same contract is ignored: the same
	// provider subscription for another contract is a Conflict.
	if err := s.db.WithContext(ctx).Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "contract_id"}}, DoNothing: true}).
		Create(row).Error; err != nil {
		return nil, relational.Translate(err, "subscription")
	}
	return s.Subscription(ctx, sub.ContractID)
}

// ContractOfSubscription implements billing.Store.
func (s *Store) ContractOfSubscription(ctx context.Context, subscriptionID string) (string, error) {
	var r subscriptionRow
	if err := s.db.WithContext(ctx).Select("contract_id").Where("subscription_id = ?", subscriptionID).Take(&r).Error; err != nil {
		return "", relational.Translate(err, "subscription")
	}
	return r.ContractID, nil
}

// OpenSubscriptions implements billing.Store.
func (s *Store) OpenSubscriptions(ctx context.Context) ([]billing.Subscription, error) {
	var rows []subscriptionRow
	if err := s.db.WithContext(ctx).Where("canceled_at IS NULL").Order("contract_id ASC").Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "subscription")
	}
	out := make([]billing.Subscription, 0, len(rows))
	for i := range rows {
		sub, err := subscriptionFromRow(&rows[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *sub)
	}
	return out, nil
}

// SetSubscriptionCanceled implements billing.Store.
func (s *Store) SetSubscriptionCanceled(ctx context.Context, contractID string, at time.Time) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var r subscriptionRow
		if err := tx.Where("contract_id = ?", contractID).Take(&r).Error; err != nil {
			return err
		}
		if r.CanceledAt != nil {
			return nil
		}
		return tx.Model(&subscriptionRow{}).Where("contract_id = ? AND canceled_at IS NULL", contractID).
			Update("canceled_at", ts(at)).Error
	})
	return relational.Translate(err, "subscription")
}

// SetSubscriptionUsageFrom implements billing.Store.
func (s *Store) SetSubscriptionUsageFrom(ctx context.Context, contractID string, from time.Time) error {
	res := s.db.WithContext(ctx).Model(&subscriptionRow{}).Where("contract_id = ?", contractID).Update("usage_from", ts(from))
	if res.Error != nil {
		return relational.Translate(res.Error, "subscription")
	}
	if res.RowsAffected == 0 {
		return relational.Translate(gorm.ErrRecordNotFound, "subscription")
	}
	return nil
}

// ---- usage reports and watermarks ----

type reportRow struct {
	ContractID     string    `gorm:"primaryKey"`
	LineKind       string    `gorm:"primaryKey"`
	WindowStart    time.Time `gorm:"primaryKey"`
	WindowEnd      time.Time
	PeriodStart    time.Time
	ItemID         string `gorm:"column:item_id"`
	Quantity       int64
	IdempotencyKey string
	Status         string
	Error          string
	CreatedAt      time.Time
	SentAt         *time.Time
}

func (reportRow) TableName() string { return "billing_usage_reports" }

func reportFromRow(r *reportRow) billing.UsageReport {
	out := billing.UsageReport{
		ContractID: r.ContractID, Kind: billing.LineKind(r.LineKind),
		Window:      billing.Period{Start: r.WindowStart.UTC(), End: r.WindowEnd.UTC()},
		PeriodStart: r.PeriodStart.UTC(), ItemID: r.ItemID, Quantity: r.Quantity, IdempotencyKey: r.IdempotencyKey,
		Status: billing.ReportStatus(r.Status), Error: r.Error, CreatedAt: r.CreatedAt.UTC(),
	}
	if r.SentAt != nil {
		t := r.SentAt.UTC()
		out.SentAt = &t
	}
	return out
}

type watermarkRow struct {
	ContractID      string    `gorm:"primaryKey"`
	LineKind        string    `gorm:"primaryKey"`
	PeriodStart     time.Time `gorm:"primaryKey"`
	Reported        int64
	ReportedThrough *time.Time
	UpdatedAt       time.Time
}

func (watermarkRow) TableName() string { return "billing_usage_watermarks" }

func watermarkFromRow(r *watermarkRow) billing.Watermark {
	w := billing.Watermark{ContractID: r.ContractID, Kind: billing.LineKind(r.LineKind), PeriodStart: r.PeriodStart.UTC(), Reported: r.Reported}
	if r.ReportedThrough != nil {
		w.Through = r.ReportedThrough.UTC()
	}
	return w
}

// Watermark implements billing.Store.
func (s *Store) Watermark(ctx context.Context, contractID string, kind billing.LineKind, periodStart time.Time) (billing.Watermark, error) {
	var rows []watermarkRow
	err := s.db.WithContext(ctx).Where("contract_id = ? AND line_kind = ? AND period_start = ?", contractID, string(kind), ts(periodStart)).
		Limit(1).Find(&rows).Error
	if err != nil {
		return billing.Watermark{}, relational.Translate(err, "usage watermark")
	}
	if len(rows) == 0 {
		return billing.Watermark{ContractID: contractID, Kind: kind, PeriodStart: ts(periodStart)}, nil
	}
	return watermarkFromRow(&rows[0]), nil
}

// LatestWatermark implements billing.Store.
func (s *Store) LatestWatermark(ctx context.Context, contractID string, kind billing.LineKind) (billing.Watermark, error) {
	var r watermarkRow
	err := s.db.WithContext(ctx).Where("contract_id = ? AND line_kind = ? AND reported_through IS NOT NULL", contractID, string(kind)).
		Order("period_start DESC").Take(&r).Error
	if err != nil {
		return billing.Watermark{}, relational.Translate(err, "usage watermark")
	}
	return watermarkFromRow(&r), nil
}

// lockWatermark returns the watermark row of a contract, kind and period,
// creating it (empty) if needed, locked until tx ends.
func (s *Store) lockWatermark(tx *gorm.DB, contractID string, kind billing.LineKind, periodStart, now time.Time) (*watermarkRow, error) {
	row := &watermarkRow{ContractID: contractID, LineKind: string(kind), PeriodStart: ts(periodStart), UpdatedAt: ts(now)}
	if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(row).Error; err != nil {
		return nil, err
	}
	q := tx.Where("contract_id = ? AND line_kind = ? AND period_start = ?", contractID, string(kind), ts(periodStart))
	if s.db.Dialector.Name() == "postgres" {
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	var r watermarkRow
	if err := q.Take(&r).Error; err != nil {
		return nil, err
	}
	return &r, nil
}

var errReportConflict = agentmarket.Errorf(agentmarket.Conflict, "usage_report_conflict",
	"the usage watermark moved or a report is pending: another reporter is at work")

// checkSeen fails with errReportConflict unless the watermark row is what
// the caller saw and no report of the contract and kind is pending.
func checkSeen(tx *gorm.DB, r *watermarkRow, seen billing.Watermark) error {
	got := watermarkFromRow(r)
	if got.Reported != seen.Reported || !got.Through.Equal(seen.Through) {
		return errReportConflict
	}
	var pending int64
	if err := tx.Model(&reportRow{}).Where("contract_id = ? AND line_kind = ? AND status = ?", seen.ContractID, string(seen.Kind), string(billing.ReportPending)).
		Count(&pending).Error; err != nil {
		return err
	}
	if pending > 0 {
		return errReportConflict
	}
	return nil
}

// AddReport implements billing.Store.
func (s *Store) AddReport(ctx context.Context, r *billing.UsageReport, seen billing.Watermark) error {
	if r.ContractID != seen.ContractID || r.Kind != seen.Kind || !r.PeriodStart.Equal(seen.PeriodStart) {
		return agentmarket.Errorf(agentmarket.Invalid, "invalid_usage_report", "the report and the watermark seen are not of the same contract, kind and period")
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		w, err := s.lockWatermark(tx, r.ContractID, r.Kind, r.PeriodStart, r.CreatedAt)
		if err != nil {
			return err
		}
		if err := checkSeen(tx, w, seen); err != nil {
			return err
		}
		row := &reportRow{ContractID: r.ContractID, LineKind: string(r.Kind), WindowStart: ts(r.Window.Start), WindowEnd: ts(r.Window.End),
			PeriodStart: ts(r.PeriodStart), ItemID: r.ItemID, Quantity: r.Quantity, IdempotencyKey: r.IdempotencyKey,
			Status: string(billing.ReportPending), CreatedAt: ts(r.CreatedAt)}
		return tx.Create(row).Error
	})
	if agentmarket.KindOf(relational.Translate(err, "usage report")) == agentmarket.Conflict {
		return errReportConflict
	}
	return relational.Translate(err, "usage report")
}

// SkipWindow implements billing.Store.
func (s *Store) SkipWindow(ctx context.Context, seen billing.Watermark, through time.Time) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		w, err := s.lockWatermark(tx, seen.ContractID, seen.Kind, seen.PeriodStart, through)
		if err != nil {
			return err
		}
		if err := checkSeen(tx, w, seen); err != nil {
			return err
		}
		return advance(tx, w, 0, through, through)
	})
	return relational.Translate(err, "usage watermark")
}

// advance adds quantity to a locked watermark row (saturating, like every
// sum of usage: a watermark past int64 stays at its largest value) and
// moves its Through to through unless it is past it already.
func advance(tx *gorm.DB, w *watermarkRow, quantity int64, through, now time.Time) error {
	newThrough := ts(through)
	if w.ReportedThrough != nil && w.ReportedThrough.After(newThrough) {
		newThrough = w.ReportedThrough.UTC()
	}
	return tx.Model(&watermarkRow{}).
		Where("contract_id = ? AND line_kind = ? AND period_start = ?", w.ContractID, w.LineKind, w.PeriodStart).
		Updates(map[string]any{"reported": agentmarket.AddSat(w.Reported, quantity), "reported_through": newThrough, "updated_at": ts(now)}).Error
}

func keyWhere(tx *gorm.DB, k billing.ReportKey) *gorm.DB {
	return tx.Where("contract_id = ? AND line_kind = ? AND window_start = ?", k.ContractID, string(k.Kind), ts(k.WindowStart))
}

// settle moves a pending report to status; counted adds its quantity to
// the watermark.
func (s *Store) settle(ctx context.Context, k billing.ReportKey, status billing.ReportStatus, at time.Time, updates map[string]any, counted bool) (bool, error) {
	done := false
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// The watermark is locked first, as AddReport and SkipWindow do.
		var r reportRow
		if err := keyWhere(tx, k).Take(&r).Error; err != nil {
			return err
		}
		w, err := s.lockWatermark(tx, r.ContractID, billing.LineKind(r.LineKind), r.PeriodStart, at)
		if err != nil {
			return err
		}
		updates["status"] = string(status)
		res := keyWhere(tx.Model(&reportRow{}), k).Where("status = ?", string(billing.ReportPending)).Updates(updates)
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		q := int64(0)
		if counted {
			q = r.Quantity
		}
		done = true
		return advance(tx, w, q, r.WindowEnd, at)
	})
	return done, relational.Translate(err, "usage report")
}

// MarkReportSent implements billing.Store.
func (s *Store) MarkReportSent(ctx context.Context, k billing.ReportKey, at time.Time) (bool, error) {
	return s.settle(ctx, k, billing.ReportSent, at, map[string]any{"sent_at": ts(at)}, true)
}

// MarkReportFailed implements billing.Store.
func (s *Store) MarkReportFailed(ctx context.Context, k billing.ReportKey, at time.Time, reason string) (bool, error) {
	if len(reason) > 1000 {
		reason = reason[:1000]
	}
	return s.settle(ctx, k, billing.ReportFailed, at, map[string]any{"error": reason}, false)
}

// PendingReports implements billing.Store.
func (s *Store) PendingReports(ctx context.Context, contractID string) ([]billing.UsageReport, error) {
	return s.Reports(ctx, billing.ReportQuery{ContractID: contractID, Status: billing.ReportPending})
}

// Reports implements billing.Store.
func (s *Store) Reports(ctx context.Context, q billing.ReportQuery) ([]billing.UsageReport, error) {
	db := s.db.WithContext(ctx)
	if q.ContractID != "" {
		db = db.Where("contract_id = ?", q.ContractID)
	}
	if !q.From.IsZero() {
		db = db.Where("window_start >= ?", ts(q.From))
	}
	if !q.To.IsZero() {
		db = db.Where("window_end <= ?", ts(q.To))
	}
	if q.Status != "" {
		db = db.Where("status = ?", string(q.Status))
	}
	var rows []reportRow
	if err := db.Order("contract_id ASC, line_kind ASC, window_start ASC").Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "usage report")
	}
	out := make([]billing.UsageReport, len(rows))
	for i := range rows {
		out[i] = reportFromRow(&rows[i])
	}
	return out, nil
}

// ---- webhook events ----

type webhookEventRow struct {
	EventID    string `gorm:"primaryKey"`
	EventType  string
	Created    time.Time
	ReceivedAt time.Time
	ContractID string
	Outcome    string
}

func (webhookEventRow) TableName() string { return "billing_webhook_events" }

type contractEventRow struct {
	ContractID  string `gorm:"primaryKey"`
	LastCreated time.Time
	LastEventID string
	UpdatedAt   time.Time
}

func (contractEventRow) TableName() string { return "billing_contract_events" }

// WebhookEventSeen implements billing.Store.
func (s *Store) WebhookEventSeen(ctx context.Context, eventID string) (bool, error) {
	var n int64
	if err := s.db.WithContext(ctx).Model(&webhookEventRow{}).Where("event_id = ?", eventID).Count(&n).Error; err != nil {
		return false, relational.Translate(err, "webhook event")
	}
	return n > 0, nil
}

// RecordWebhookEvent implements billing.Store.
func (s *Store) RecordWebhookEvent(ctx context.Context, e *billing.WebhookEvent) (bool, error) {
	recorded := false
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		row := &webhookEventRow{EventID: e.ID, EventType: e.Type, Created: ts(e.Created), ReceivedAt: ts(e.ReceivedAt),
			ContractID: e.ContractID, Outcome: string(e.Outcome)}
		res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(row)
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		recorded = true
		if e.Outcome != billing.WebhookApplied || e.ContractID == "" {
			return nil
		}
		var rows []contractEventRow
		q := tx.Where("contract_id = ?", e.ContractID)
		if s.db.Dialector.Name() == "postgres" {
			q = q.Clauses(clause.Locking{Strength: "UPDATE"})
		}
		if err := q.Limit(1).Find(&rows).Error; err != nil {
			return err
		}
		now := ts(e.ReceivedAt)
		if len(rows) == 0 {
			return tx.Create(&contractEventRow{ContractID: e.ContractID, LastCreated: ts(e.Created), LastEventID: e.ID, UpdatedAt: now}).Error
		}
		if !ts(e.Created).After(rows[0].LastCreated) {
			return nil
		}
		return tx.Model(&contractEventRow{}).Where("contract_id = ?", e.ContractID).
			Updates(map[string]any{"last_created": ts(e.Created), "last_event_id": e.ID, "updated_at": now}).Error
	})
	return recorded, relational.Translate(err, "webhook event")
}

// LastAppliedEvent implements billing.Store.
func (s *Store) LastAppliedEvent(ctx context.Context, contractID string) (time.Time, error) {
	var rows []contractEventRow
	if err := s.db.WithContext(ctx).Where("contract_id = ?", contractID).Limit(1).Find(&rows).Error; err != nil {
		return time.Time{}, relational.Translate(err, "webhook event")
	}
	if len(rows) == 0 {
		return time.Time{}, nil
	}
	return rows[0].LastCreated.UTC(), nil
}

// ---- invoices ----

type invoiceRow struct {
	ContractID          string    `gorm:"primaryKey"`
	PeriodStart         time.Time `gorm:"primaryKey"`
	PeriodEnd           time.Time
	ActiveStart         time.Time
	ActiveEnd           time.Time
	PlanVersion         int
	Currency            string
	MinorUnitDigits     int
	SubtotalMicros      int64
	SubtotalFractionNum int64
	SubtotalFractionDen int64
	TotalMinor          int64
	CreditAppliedMinor  int64
	Carried             string // billing.Invoice.CarriedMicros as "num/den"; "" for none
	Lines               string
	Parts               string
	CreatedAt           time.Time
}

func (invoiceRow) TableName() string { return "billing_invoices" }

// lineJSON is an invoice line as stored; the names are part of the
// schema.
type lineJSON struct {
	Kind            string `json:"kind"`
	Description     string `json:"description"`
	Used            int64  `json:"used"`
	Included        int64  `json:"included"`
	Quantity        int64  `json:"quantity"`
	UnitPriceMicros int64  `json:"unit_price_micros"`
	PerUnits        int64  `json:"per_units"`
	AmountMicros    int64  `json:"amount_micros"`
	FractionNum     int64  `json:"amount_fraction_num"`
	FractionDen     int64  `json:"amount_fraction_den"`
	AmountMinor     int64  `json:"amount_minor"`
	Part            int    `json:"part,omitempty"`
}

// partJSON is an invoice part as stored; the names are part of the schema.
type partJSON struct {
	PlanVersion int       `json:"plan_version"`
	ActiveStart time.Time `json:"active_start"`
	ActiveEnd   time.Time `json:"active_end"`
	Trial       bool      `json:"trial,omitempty"`
}

func invoiceToRow(inv *billing.LocalInvoice) (*invoiceRow, error) {
	lines := make([]lineJSON, len(inv.Invoice.Lines))
	for i, l := range inv.Invoice.Lines {
		lines[i] = lineJSON{Kind: string(l.Kind), Description: l.Description, Used: l.Used, Included: l.Included, Quantity: l.Quantity,
			UnitPriceMicros: l.UnitPriceMicros, PerUnits: l.PerUnits, AmountMicros: l.AmountMicros,
			FractionNum: l.AmountFraction.Num, FractionDen: l.AmountFraction.Den, AmountMinor: l.AmountMinor, Part: l.Part}
	}
	raw, err := json.Marshal(lines)
	if err != nil {
		return nil, agentmarket.Wrap(agentmarket.Internal, "invoice_encode_failed", err, "could not store the invoice")
	}
	var rawParts []byte
	if len(inv.Invoice.Parts) > 0 {
		parts := make([]partJSON, len(inv.Invoice.Parts))
		for i, p := range inv.Invoice.Parts {
			parts[i] = partJSON{PlanVersion: p.PlanVersion, ActiveStart: p.Active.Start.UTC(), ActiveEnd: p.Active.End.UTC(), Trial: p.Trial}
		}
		if rawParts, err = json.Marshal(parts); err != nil {
			return nil, agentmarket.Wrap(agentmarket.Internal, "invoice_encode_failed", err, "could not store the invoice")
		}
	}
	i := &inv.Invoice
	return &invoiceRow{ContractID: inv.ContractID, PeriodStart: ts(i.Period.Start), PeriodEnd: ts(i.Period.End),
		ActiveStart: ts(i.Active.Start), ActiveEnd: ts(i.Active.End), PlanVersion: i.PlanVersion, Currency: i.Currency,
		MinorUnitDigits: i.MinorUnitDigits, SubtotalMicros: i.SubtotalMicros,
		SubtotalFractionNum: i.SubtotalFraction.Num, SubtotalFractionDen: i.SubtotalFraction.Den,
		TotalMinor: i.TotalMinor, CreditAppliedMinor: i.CreditAppliedMinor, Carried: ratText(i.CarriedMicros), Lines: string(raw), Parts: string(rawParts), CreatedAt: ts(inv.CreatedAt)}, nil
}

func ratText(r *big.Rat) string {
	if r == nil {
		return ""
	}
	return r.String()
}

func invoiceFromRow(r *invoiceRow) (*billing.LocalInvoice, error) {
	var lines []lineJSON
	if err := json.Unmarshal([]byte(r.Lines), &lines); err != nil {
		return nil, agentmarket.Wrap(agentmarket.Internal, "invoice_decode_failed",
			fmt.Errorf("invoice of %s for %s: %w", r.ContractID, r.PeriodStart, err), "could not read the invoice")
	}
	inv := billing.Invoice{
		Currency: r.Currency, PlanVersion: r.PlanVersion,
		Period:           billing.Period{Start: r.PeriodStart.UTC(), End: r.PeriodEnd.UTC()},
		Active:           billing.Period{Start: r.ActiveStart.UTC(), End: r.ActiveEnd.UTC()},
		SubtotalMicros:   r.SubtotalMicros,
		SubtotalFraction: billing.Fraction{Num: r.SubtotalFractionNum, Den: r.SubtotalFractionDen},
		MinorUnitDigits:  r.MinorUnitDigits, TotalMinor: r.TotalMinor, CreditAppliedMinor: r.CreditAppliedMinor,
		Lines: make([]billing.Line, len(lines)),
	}
	if r.Carried != "" {
		c, ok := new(big.Rat).SetString(r.Carried)
		if !ok {
			return nil, agentmarket.Wrap(agentmarket.Internal, "invoice_decode_failed",
				fmt.Errorf("invoice of %s for %s: carry %q", r.ContractID, r.PeriodStart, r.Carried), "could not read the invoice")
		}
		inv.CarriedMicros = c
	}
	for i, l := range lines {
		inv.Lines[i] = billing.Line{Kind: billing.LineKind(l.Kind), Description: l.Description, Used: l.Used, Included: l.Included,
			Quantity: l.Quantity, UnitPriceMicros: l.UnitPriceMicros, PerUnits: l.PerUnits, AmountMicros: l.AmountMicros,
			AmountFraction: billing.Fraction{Num: l.FractionNum, Den: l.FractionDen}, AmountMinor: l.AmountMinor, Part: l.Part}
	}
	// Invoices stored before parts existed have none (Invoice.Parts is
	// nil): they are one part, the active span.
	if r.Parts != "" {
		var parts []partJSON
		if err := json.Unmarshal([]byte(r.Parts), &parts); err != nil {
			return nil, agentmarket.Wrap(agentmarket.Internal, "invoice_decode_failed",
				fmt.Errorf("invoice parts of %s for %s: %w", r.ContractID, r.PeriodStart, err), "could not read the invoice")
		}
		inv.Parts = make([]billing.PartInfo, len(parts))
		for i, p := range parts {
			inv.Parts[i] = billing.PartInfo{PlanVersion: p.PlanVersion, Active: billing.Period{Start: p.ActiveStart.UTC(), End: p.ActiveEnd.UTC()}, Trial: p.Trial}
		}
	}
	return &billing.LocalInvoice{ContractID: r.ContractID, Invoice: inv, CreatedAt: r.CreatedAt.UTC()}, nil
}

// SaveInvoice implements billing.Store.
func (s *Store) SaveInvoice(ctx context.Context, inv *billing.LocalInvoice) (bool, error) {
	row, err := invoiceToRow(inv)
	if err != nil {
		return false, err
	}
	res := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(row)
	if res.Error != nil {
		return false, relational.Translate(res.Error, "invoice")
	}
	return res.RowsAffected > 0, nil
}

// Invoice implements billing.Store.
func (s *Store) Invoice(ctx context.Context, contractID string, periodStart time.Time) (*billing.LocalInvoice, error) {
	var r invoiceRow
	if err := s.db.WithContext(ctx).Where("contract_id = ? AND period_start = ?", contractID, ts(periodStart)).Take(&r).Error; err != nil {
		return nil, relational.Translate(err, "invoice")
	}
	return invoiceFromRow(&r)
}

// Invoices implements billing.Store.
func (s *Store) Invoices(ctx context.Context, periodStart time.Time) ([]billing.LocalInvoice, error) {
	var rows []invoiceRow
	if err := s.db.WithContext(ctx).Where("period_start = ?", ts(periodStart)).Order("contract_id ASC").Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "invoice")
	}
	out := make([]billing.LocalInvoice, 0, len(rows))
	for i := range rows {
		inv, err := invoiceFromRow(&rows[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *inv)
	}
	return out, nil
}

// ---- helpers ----

// encodeKinds stores a map of line kind to provider id as a JSON object.
func encodeKinds(m map[billing.LineKind]string) (string, error) {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[string(k)] = v
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return "", agentmarket.Wrap(agentmarket.Internal, "billing_encode_failed", err, "could not store billing ids")
	}
	return string(raw), nil
}

func decodeKinds(s string) (map[billing.LineKind]string, error) {
	var in map[string]string
	if err := json.Unmarshal([]byte(s), &in); err != nil {
		return nil, agentmarket.Wrap(agentmarket.Internal, "billing_decode_failed", err, "could not read billing ids")
	}
	out := make(map[billing.LineKind]string, len(in))
	for k, v := range in {
		out[billing.LineKind(k)] = v
	}
	return out, nil
}

// ---- commitment charges ----

type commitmentRow struct {
	ContractID     string    `gorm:"primaryKey"`
	PeriodStart    time.Time `gorm:"primaryKey"`
	Currency       string
	AmountMinor    int64
	IdempotencyKey string
	Description    string
	CreatedAt      time.Time
	SentAt         *time.Time
}

func (commitmentRow) TableName() string { return "billing_commitment_charges" }

// Commitment charges and credit items are kept alike, each in its table.
const (
	commitmentTable = "billing_commitment_charges"
	creditItemTable = "billing_credit_items"
)

// AddCommitmentCharge implements billing.Store.
func (s *Store) AddCommitmentCharge(ctx context.Context, c *billing.CommitmentCharge) (*billing.CommitmentCharge, error) {
	return s.addCharge(ctx, commitmentTable, "commitment charge", c)
}

// MarkCommitmentChargeSent implements billing.Store.
func (s *Store) MarkCommitmentChargeSent(ctx context.Context, contractID string, periodStart, at time.Time) error {
	return s.markChargeSent(ctx, commitmentTable, "commitment charge", contractID, periodStart, at)
}

// CommitmentCharge implements billing.Store.
func (s *Store) CommitmentCharge(ctx context.Context, contractID string, periodStart time.Time) (*billing.CommitmentCharge, error) {
	return s.charge(ctx, commitmentTable, "commitment charge", contractID, periodStart)
}

// AddCreditItem implements billing.Store.
func (s *Store) AddCreditItem(ctx context.Context, c *billing.CommitmentCharge) (*billing.CommitmentCharge, error) {
	return s.addCharge(ctx, creditItemTable, "credit item", c)
}

// MarkCreditItemSent implements billing.Store.
func (s *Store) MarkCreditItemSent(ctx context.Context, contractID string, periodStart, at time.Time) error {
	return s.markChargeSent(ctx, creditItemTable, "credit item", contractID, periodStart, at)
}

// CreditItem implements billing.Store.
func (s *Store) CreditItem(ctx context.Context, contractID string, periodStart time.Time) (*billing.CommitmentCharge, error) {
	return s.charge(ctx, creditItemTable, "credit item", contractID, periodStart)
}

func (s *Store) addCharge(ctx context.Context, table, what string, c *billing.CommitmentCharge) (*billing.CommitmentCharge, error) {
	row := &commitmentRow{ContractID: c.ContractID, PeriodStart: ts(c.PeriodStart), Currency: c.Currency, AmountMinor: c.AmountMinor,
		IdempotencyKey: c.IdempotencyKey, Description: c.Description, CreatedAt: ts(c.CreatedAt), SentAt: tsp(c.SentAt)}
	if err := s.db.WithContext(ctx).Table(table).Clauses(clause.OnConflict{DoNothing: true}).Create(row).Error; err != nil {
		return nil, relational.Translate(err, what)
	}
	return s.charge(ctx, table, what, c.ContractID, c.PeriodStart)
}

func (s *Store) markChargeSent(ctx context.Context, table, what, contractID string, periodStart, at time.Time) error {
	err := s.db.WithContext(ctx).Table(table).Where("contract_id = ? AND period_start = ? AND sent_at IS NULL", contractID, ts(periodStart)).
		Update("sent_at", ts(at)).Error
	return relational.Translate(err, what)
}

func (s *Store) charge(ctx context.Context, table, what, contractID string, periodStart time.Time) (*billing.CommitmentCharge, error) {
	var r commitmentRow
	if err := s.db.WithContext(ctx).Table(table).Where("contract_id = ? AND period_start = ?", contractID, ts(periodStart)).Take(&r).Error; err != nil {
		return nil, relational.Translate(err, what)
	}
	return &billing.CommitmentCharge{ContractID: r.ContractID, PeriodStart: r.PeriodStart.UTC(), Currency: r.Currency, AmountMinor: r.AmountMinor,
		IdempotencyKey: r.IdempotencyKey, Description: r.Description, CreatedAt: r.CreatedAt.UTC(), SentAt: tsp(r.SentAt)}, nil
}

// SetSubscriptionItems implements billing.Store.
func (s *Store) SetSubscriptionItems(ctx context.Context, contractID string, refs billing.SubscriptionRefs) error {
	ids, err := encodeKinds(refs.MeteredItemIDs)
	if err != nil {
		return err
	}
	res := s.db.WithContext(ctx).Model(&subscriptionRow{}).Where("contract_id = ?", contractID).
		Updates(map[string]any{"flat_item_id": refs.FlatItemID, "metered_item_ids": ids})
	if res.Error != nil {
		return relational.Translate(res.Error, "subscription")
	}
	if res.RowsAffected == 0 {
		return relational.Translate(gorm.ErrRecordNotFound, "subscription")
	}
	return nil
}
