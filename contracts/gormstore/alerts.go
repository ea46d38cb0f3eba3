package gormstore

import (
	"context"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

var _ contracts.AlertStore = (*Store)(nil)

// encodeThresholds stores thresholds as "50,80,100"; nil is "".
func encodeThresholds(th []int) string {
	parts := make([]string, len(th))
	for i, p := range th {
		parts[i] = strconv.Itoa(p)
	}
	return strings.Join(parts, ",")
}

func decodeThresholds(s string) []int {
	if s == "" {
		return nil
	}
	var out []int
	for _, p := range strings.Split(s, ",") {
		if n, err := strconv.Atoi(p); err == nil {
			out = append(out, n)
		}
	}
	return out
}

type alertRow struct {
	ID           string `gorm:"primaryKey"`
	OrgID        string
	BudgetKind   string
	BudgetID     string
	PeriodStart  time.Time
	Percent      int
	BudgetMicros int64
	SpentMicros  int64
	CreatedAt    time.Time
}

func (alertRow) TableName() string { return "spend_alerts" }

type orgAlertRow struct {
	OrgID      string `gorm:"primaryKey"`
	Thresholds string
	UpdatedAt  time.Time
}

func (orgAlertRow) TableName() string { return "org_alert_settings" }

// BudgetedKeys implements contracts.AlertStore.
func (s *Store) BudgetedKeys(ctx context.Context) ([]contracts.APIKey, error) {
	var rows []keyRow
	if err := s.db.WithContext(ctx).Where("monthly_budget_micros IS NOT NULL AND revoked_at IS NULL").Order("id ASC").Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "api key")
	}
	out := make([]contracts.APIKey, len(rows))
	for i := range rows {
		out[i] = *keyFromRow(&rows[i])
	}
	return out, nil
}

// BudgetedContracts implements contracts.AlertStore.
func (s *Store) BudgetedContracts(ctx context.Context) ([]contracts.Contract, error) {
	return s.findContracts(ctx, "id ASC", "monthly_budget_micros IS NOT NULL AND status <> ?", string(contracts.ContractCanceled))
}

// OrgAlertThresholds implements contracts.AlertStore.
func (s *Store) OrgAlertThresholds(ctx context.Context, orgID string) ([]int, error) {
	var rows []orgAlertRow
	if err := s.db.WithContext(ctx).Where("org_id = ?", orgID).Limit(1).Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "alert settings")
	}
	if len(rows) == 0 {
		return nil, nil
	}
	return decodeThresholds(rows[0].Thresholds), nil
}

// SetOrgAlertThresholds implements contracts.AlertStore.
func (s *Store) SetOrgAlertThresholds(ctx context.Context, orgID string, th []int, at time.Time) error {
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "org_id"}},
		DoUpdates: clause.AssignmentColumns([]string{"thresholds", "updated_at"})}).
		Create(&orgAlertRow{OrgID: orgID, Thresholds: encodeThresholds(th), UpdatedAt: at.UTC()}).Error
	return relational.Translate(err, "alert settings")
}

// SetBudgetAlertThresholds implements contracts.AlertStore.
func (s *Store) SetBudgetAlertThresholds(ctx context.Context, orgID string, kind contracts.BudgetKind, id string, th []int) error {
	var res *gorm.DB
	if kind == contracts.BudgetAPIKey {
		res = s.db.WithContext(ctx).Model(&keyRow{}).Where("id = ? AND org_id = ?", id, orgID).Update("alert_thresholds", encodeThresholds(th))
	} else {
		res = s.db.WithContext(ctx).Model(&contractRow{}).Where("id = ? AND buyer_org_id = ?", id, orgID).Update("alert_thresholds", encodeThresholds(th))
	}
	if res.Error != nil {
		return relational.Translate(res.Error, "budget")
	}
	if res.RowsAffected == 0 {
		return relational.Translate(gorm.ErrRecordNotFound, "budget")
	}
	return nil
}

// RecordAlert implements contracts.AlertStore.
func (s *Store) RecordAlert(ctx context.Context, a *contracts.Alert, d *contracts.Delivery) (bool, error) {
	recorded := false
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "id"}}, DoNothing: true}).Create(&alertRow{ID: a.ID, OrgID: a.OrgID,
			BudgetKind: string(a.Kind), BudgetID: a.Subject, PeriodStart: a.PeriodStart.UTC(), Percent: a.Percent, BudgetMicros: a.BudgetMicros,
			SpentMicros: a.SpentMicros, CreatedAt: a.CreatedAt.UTC()})
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		recorded = true
		if d == nil {
			return nil
		}
		return tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "id"}}, DoNothing: true}).Create(pendingRow(d)).Error
	})
	if err != nil {
		return false, relational.Translate(err, "alert")
	}
	return recorded, nil
}

// Alerts implements contracts.AlertStore.
func (s *Store) Alerts(ctx context.Context, orgID string, periodStart time.Time) ([]contracts.Alert, error) {
	var rows []alertRow
	if err := s.db.WithContext(ctx).Where("org_id = ? AND period_start = ?", orgID, periodStart.UTC()).Order("created_at DESC, percent DESC, id ASC").
		Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "alert")
	}
	out := make([]contracts.Alert, len(rows))
	for i, r := range rows {
		out[i] = contracts.Alert{ID: r.ID, OrgID: r.OrgID, Kind: contracts.BudgetKind(r.BudgetKind), Subject: r.BudgetID, PeriodStart: r.PeriodStart.UTC(),
			Percent: r.Percent, BudgetMicros: r.BudgetMicros, SpentMicros: r.SpentMicros, CreatedAt: r.CreatedAt.UTC()}
	}
	return out, nil
}
