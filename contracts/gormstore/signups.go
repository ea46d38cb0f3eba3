package gormstore

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

var _ contracts.PendingSignupStore = (*Store)(nil)

type pendingSignupRow struct {
	TokenHash string `gorm:"primaryKey"`
	Email     string
	CreatedAt time.Time
	ExpiresAt time.Time
}

func (pendingSignupRow) TableName() string { return "pending_signups" }

// CreatePendingSignup implements contracts.PendingSignupStore.
func (s *Store) CreatePendingSignup(ctx context.Context, p *contracts.PendingSignup) error {
	r := &pendingSignupRow{TokenHash: p.TokenHash, Email: p.Email, CreatedAt: p.CreatedAt.UTC(), ExpiresAt: p.ExpiresAt.UTC()}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// Sweeping here keeps the table small without a background job.
		if err := tx.Where("expires_at < ?", r.CreatedAt).Delete(&pendingSignupRow{}).Error; err != nil {
			return err
		}
		return tx.Create(r).Error
	})
	return relational.Translate(err, "pending sign-up")
}

// TakePendingSignup implements contracts.PendingSignupStore: the row is
// read and deleted in one transaction, and only the transaction whose
// delete removed it returns it, so two takes of one token never both
// succeed.
func (s *Store) TakePendingSignup(ctx context.Context, tokenHash string) (*contracts.PendingSignup, error) {
	var r pendingSignupRow
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("token_hash = ?", tokenHash).Take(&r).Error; err != nil {
			return err
		}
		res := tx.Where("token_hash = ?", tokenHash).Delete(&pendingSignupRow{})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return gorm.ErrRecordNotFound
		}
		return nil
	})
	if err != nil {
		return nil, relational.Translate(err, "pending sign-up")
	}
	return &contracts.PendingSignup{TokenHash: r.TokenHash, Email: r.Email, CreatedAt: r.CreatedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC()}, nil
}
