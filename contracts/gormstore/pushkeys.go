package gormstore

import (
	"context"
	"time"

	"gorm.io/gorm/clause"

	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

var _ contracts.PushKeyStore = (*Store)(nil)

type pushKeyRow struct {
	Generation int64 `gorm:"primaryKey;autoIncrement:false"`
	ID         string
	Algorithm  string
	PublicKey  []byte
	Sealed     []byte
	CreatedAt  time.Time
	ActiveAt   time.Time
}

func (pushKeyRow) TableName() string { return "push_signing_keys" }

// AddPushKey implements contracts.PushKeyStore.
func (s *Store) AddPushKey(ctx context.Context, k contracts.PushKey) (bool, error) {
	row := &pushKeyRow{Generation: k.Generation, ID: k.ID, Algorithm: k.Algorithm, PublicKey: nonNil(k.Public), Sealed: nonNil(k.Sealed),
		CreatedAt: k.CreatedAt.UTC(), ActiveAt: k.ActiveAt.UTC()}
	// Only the generation is the conflict that means "rotated already": a
	// key ID held by another generation fails as a Conflict.
	res := s.db.WithContext(ctx).Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "generation"}}, DoNothing: true}).Create(row)
	if res.Error != nil {
		return false, relational.Translate(res.Error, "push signing key")
	}
	return res.RowsAffected == 1, nil
}

// PushKeys implements contracts.PushKeyStore: newest generation first.
func (s *Store) PushKeys(ctx context.Context) ([]contracts.PushKey, error) {
	var rows []pushKeyRow
	if err := s.db.WithContext(ctx).Order("generation DESC").Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "push signing key")
	}
	out := make([]contracts.PushKey, len(rows))
	for i, r := range rows {
		out[i] = contracts.PushKey{ID: r.ID, Generation: r.Generation, Algorithm: r.Algorithm, Public: r.PublicKey, Sealed: r.Sealed,
			CreatedAt: r.CreatedAt.UTC(), ActiveAt: r.ActiveAt.UTC()}
	}
	return out, nil
}

// DeletePushKeys implements contracts.PushKeyStore.
func (s *Store) DeletePushKeys(ctx context.Context, below int64) (int64, error) {
	res := s.db.WithContext(ctx).Where("generation < ?", below).Delete(&pushKeyRow{})
	if res.Error != nil {
		return 0, relational.Translate(res.Error, "push signing key")
	}
	return res.RowsAffected, nil
}
