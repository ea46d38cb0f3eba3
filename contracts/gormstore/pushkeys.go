package gormstore

import (
	"context"
	"time"

	"gorm.io/gorm/clause"

	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

var (
	_ contracts.PushKeyStore = (*Store)(nil)
	_ contracts.PushKeyStore = keyTable{}
)

// keyTable is a PushKeyStore over a table of signing keys: the push keys'
// (the Store's own methods) or the card keys' (CardKeys).
type keyTable struct {
	s     *Store
	table string
}

// CardKeys is the store of the keys proxied Agent Cards are signed with
// (a table of their own: a key signs for one purpose).
func (s *Store) CardKeys() contracts.PushKeyStore { return keyTable{s: s, table: "card_signing_keys"} }

// AuditKeys is the store of the keys the audit log's checkpoints are
// signed with (contracts/audit).
func (s *Store) AuditKeys() contracts.PushKeyStore {
	return keyTable{s: s, table: "audit_signing_keys"}
}

func (s *Store) pushKeys() keyTable { return keyTable{s: s, table: "push_signing_keys"} }

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
	return s.pushKeys().AddPushKey(ctx, k)
}

// PushKeys implements contracts.PushKeyStore: newest generation first.
func (s *Store) PushKeys(ctx context.Context) ([]contracts.PushKey, error) {
	return s.pushKeys().PushKeys(ctx)
}

// DeletePushKeys implements contracts.PushKeyStore.
func (s *Store) DeletePushKeys(ctx context.Context, below int64) (int64, error) {
	return s.pushKeys().DeletePushKeys(ctx, below)
}

// AddPushKey implements contracts.PushKeyStore.
func (t keyTable) AddPushKey(ctx context.Context, k contracts.PushKey) (bool, error) {
	s := t.s
	row := &pushKeyRow{Generation: k.Generation, ID: k.ID, Algorithm: k.Algorithm, PublicKey: nonNil(k.Public), Sealed: nonNil(k.Sealed),
		CreatedAt: k.CreatedAt.UTC(), ActiveAt: k.ActiveAt.UTC()}
	// Only the generation is the conflict that means "rotated already": a
	// key ID held by another generation fails as a Conflict.
	res := s.db.WithContext(ctx).Table(t.table).Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "generation"}}, DoNothing: true}).Create(row)
	if res.Error != nil {
		return false, relational.Translate(res.Error, "signing key")
	}
	return res.RowsAffected == 1, nil
}

// PushKeys implements contracts.PushKeyStore: newest generation first.
func (t keyTable) PushKeys(ctx context.Context) ([]contracts.PushKey, error) {
	var rows []pushKeyRow
	if err := t.s.db.WithContext(ctx).Table(t.table).Order("generation DESC").Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "signing key")
	}
	out := make([]contracts.PushKey, len(rows))
	for i, r := range rows {
		out[i] = contracts.PushKey{ID: r.ID, Generation: r.Generation, Algorithm: r.Algorithm, Public: r.PublicKey, Sealed: r.Sealed,
			CreatedAt: r.CreatedAt.UTC(), ActiveAt: r.ActiveAt.UTC()}
	}
	return out, nil
}

// DeletePushKeys implements contracts.PushKeyStore.
func (t keyTable) DeletePushKeys(ctx context.Context, below int64) (int64, error) {
	res := t.s.db.WithContext(ctx).Table(t.table).Where("generation < ?", below).Delete(&pushKeyRow{})
	if res.Error != nil {
		return 0, relational.Translate(res.Error, "signing key")
	}
	return res.RowsAffected, nil
}
