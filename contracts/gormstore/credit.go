package gormstore

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

var _ contracts.CreditStore = (*Store)(nil)

type creditAccountRow struct {
	OrgID            string `gorm:"primaryKey"`
	Currency         string `gorm:"primaryKey"`
	CreditedMicros   int64
	BurnedMicros     int64
	Required         bool
	LowBalanceMicros int64
	UpdatedAt        time.Time
}

func (creditAccountRow) TableName() string { return "credit_accounts" }

func (r *creditAccountRow) toAccount() contracts.CreditAccount {
	return contracts.CreditAccount{OrgID: r.OrgID, Currency: r.Currency, BalanceMicros: r.CreditedMicros - r.BurnedMicros,
		CreditedMicros: r.CreditedMicros, BurnedMicros: r.BurnedMicros, Required: r.Required, LowBalanceMicros: r.LowBalanceMicros,
		UpdatedAt: r.UpdatedAt.UTC()}
}

type creditMovementRow struct {
	ID           string `gorm:"primaryKey"`
	OrgID        string
	Currency     string
	Kind         string
	AmountMicros int64
	ContractID   string
	Ref          string
	Actor        string
	Note         string
	At           time.Time
}

func (creditMovementRow) TableName() string { return "credit_movements" }

func (r *creditMovementRow) toMovement() contracts.CreditMovement {
	return contracts.CreditMovement{ID: r.ID, OrgID: r.OrgID, Currency: r.Currency, Kind: contracts.CreditKind(r.Kind), AmountMicros: r.AmountMicros,
		ContractID: r.ContractID, Ref: r.Ref, Actor: r.Actor, Note: r.Note, At: r.At.UTC()}
}

// moveCredit adds a movement's amount to its account, creating it: a
// purchase, grant or refund moves what was credited, a burn what was
// burned.
func moveCredit(tx *gorm.DB, orgID, currency string, credited, burned int64, at time.Time) error {
	return tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "org_id"}, {Name: "currency"}},
		DoUpdates: clause.Assignments(map[string]any{
			"credited_micros": gorm.Expr("credit_accounts.credited_micros + ?", credited),
			"burned_micros":   gorm.Expr("credit_accounts.burned_micros + ?", burned),
			"updated_at":      at,
		})}).Create(&creditAccountRow{OrgID: orgID, Currency: currency, CreditedMicros: credited, BurnedMicros: burned, UpdatedAt: at}).Error
}

// AddCredit implements contracts.CreditStore.
func (s *Store) AddCredit(ctx context.Context, m *contracts.CreditMovement) (*contracts.CreditAccount, bool, error) {
	added := false
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if m.Ref != "" {
			var n int64
			if err := tx.Model(&creditMovementRow{}).Where("kind = ? AND ref = ?", string(m.Kind), m.Ref).Count(&n).Error; err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
		}
		if err := tx.Create(&creditMovementRow{ID: m.ID, OrgID: m.OrgID, Currency: m.Currency, Kind: string(m.Kind), AmountMicros: m.AmountMicros,
			ContractID: m.ContractID, Ref: m.Ref, Actor: m.Actor, Note: m.Note, At: m.At.UTC()}).Error; err != nil {
			return err
		}
		if err := moveCredit(tx, m.OrgID, m.Currency, m.AmountMicros, 0, m.At.UTC()); err != nil {
			return err
		}
		res := tx.Model(&orgRow{}).Where("id = ?", m.OrgID).Update("has_credit", true)
		if res.Error == nil && res.RowsAffected == 0 {
			return agentmarket.Errorf(agentmarket.NotFound, "org_not_found", "no org %q", m.OrgID)
		}
		added = true
		return res.Error
	})
	if err != nil {
		if agentmarket.KindOf(relational.Translate(err, "credit movement")) == agentmarket.Conflict {
			// The same purchase, credited by a concurrent delivery.
			a, err := s.CreditAccount(ctx, m.OrgID, m.Currency)
			return a, false, err
		}
		return nil, false, relational.Translate(err, "credit movement")
	}
	a, err := s.CreditAccount(ctx, m.OrgID, m.Currency)
	return a, added, err
}

// RecordBurns implements contracts.CreditStore.
func (s *Store) RecordBurns(ctx context.Context, burns []contracts.CreditBurn) error {
	if len(burns) == 0 {
		return nil
	}
	return relational.Translate(s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, b := range burns {
			if b.Micros == 0 {
				continue
			}
			if err := tx.Create(&creditMovementRow{ID: agentmarket.NewID("crm"), OrgID: b.OrgID, Currency: b.Currency, Kind: string(contracts.CreditBurned),
				AmountMicros: -b.Micros, ContractID: b.ContractID, Actor: "meter", At: b.At.UTC()}).Error; err != nil {
				return err
			}
			if err := moveCredit(tx, b.OrgID, b.Currency, 0, b.Micros, b.At.UTC()); err != nil {
				return err
			}
		}
		return nil
	}), "credit burn")
}

// CreditAccount implements contracts.CreditStore.
func (s *Store) CreditAccount(ctx context.Context, orgID, currency string) (*contracts.CreditAccount, error) {
	var r creditAccountRow
	if err := s.db.WithContext(ctx).Where("org_id = ? AND currency = ?", orgID, currency).Take(&r).Error; err != nil {
		return nil, relational.Translate(err, "credit account")
	}
	a := r.toAccount()
	return &a, nil
}

// CreditAccounts implements contracts.CreditStore.
func (s *Store) CreditAccounts(ctx context.Context, orgID string) ([]contracts.CreditAccount, error) {
	var rows []creditAccountRow
	q := s.db.WithContext(ctx).Order("org_id, currency")
	if orgID != "" {
		q = q.Where("org_id = ?", orgID)
	}
	if err := q.Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "credit account")
	}
	out := make([]contracts.CreditAccount, len(rows))
	for i := range rows {
		out[i] = rows[i].toAccount()
	}
	return out, nil
}

// CreditMovements implements contracts.CreditStore.
func (s *Store) CreditMovements(ctx context.Context, orgID, currency string, limit int) ([]contracts.CreditMovement, error) {
	var rows []creditMovementRow
	q := s.db.WithContext(ctx).Where("org_id = ?", orgID).Order("at DESC, id DESC").Limit(limit)
	if currency != "" {
		q = q.Where("currency = ?", currency)
	}
	if err := q.Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "credit movement")
	}
	out := make([]contracts.CreditMovement, len(rows))
	for i := range rows {
		out[i] = rows[i].toMovement()
	}
	return out, nil
}

// SetCreditSettings implements contracts.CreditStore.
func (s *Store) SetCreditSettings(ctx context.Context, orgID, currency string, required bool, lowMicros int64, at time.Time) (*contracts.CreditAccount, error) {
	res := s.db.WithContext(ctx).Model(&creditAccountRow{}).Where("org_id = ? AND currency = ?", orgID, currency).
		Updates(map[string]any{"required": required, "low_balance_micros": lowMicros, "updated_at": at.UTC()})
	if res.Error != nil {
		return nil, relational.Translate(res.Error, "credit account")
	}
	if res.RowsAffected == 0 {
		return nil, relational.Translate(gorm.ErrRecordNotFound, "credit account")
	}
	return s.CreditAccount(ctx, orgID, currency)
}

// CreditBurned implements contracts.CreditStore.
func (s *Store) CreditBurned(ctx context.Context, contractID string, from, to time.Time) (int64, error) {
	var sum *int64
	err := s.db.WithContext(ctx).Model(&creditMovementRow{}).Select("SUM(-amount_micros)").
		Where("contract_id = ? AND kind = ? AND at >= ? AND at < ?", contractID, string(contracts.CreditBurned), from.UTC(), to.UTC()).Scan(&sum).Error
	if err != nil || sum == nil {
		return 0, relational.Translate(err, "credit movement")
	}
	return *sum, nil
}
