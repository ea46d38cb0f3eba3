package gormstore

import (
	"context"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

var _ contracts.SessionStore = (*Store)(nil)

type sessionRow struct {
	IDHash     string `gorm:"primaryKey"`
	UserID     string
	KeyID      string
	OrgID      string
	Role       string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	LastSeenAt *time.Time
}

func (sessionRow) TableName() string { return "sessions" }

// CreateSession implements contracts.SessionStore.
func (s *Store) CreateSession(ctx context.Context, sess *contracts.Session) error {
	seen := sess.LastSeenAt
	if seen.IsZero() {
		seen = sess.CreatedAt
	}
	seen = seen.UTC()
	r := &sessionRow{IDHash: sess.IDHash, UserID: sess.UserID, KeyID: sess.KeyID, OrgID: sess.OrgID, Role: string(sess.Role),
		CreatedAt: sess.CreatedAt.UTC(), ExpiresAt: sess.ExpiresAt.UTC(), LastSeenAt: &seen}
	return relational.Translate(s.db.WithContext(ctx).Create(r).Error, "session")
}

// SessionByHash implements contracts.SessionStore.
func (s *Store) SessionByHash(ctx context.Context, idHash string) (*contracts.Session, error) {
	var r sessionRow
	if err := s.db.WithContext(ctx).Where("id_hash = ?", idHash).Take(&r).Error; err != nil {
		return nil, relational.Translate(err, "session")
	}
	sess := &contracts.Session{IDHash: r.IDHash, UserID: r.UserID, KeyID: r.KeyID, OrgID: r.OrgID, Role: agentmarket.Role(r.Role),
		CreatedAt: r.CreatedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC(), LastSeenAt: r.CreatedAt.UTC()}
	if r.LastSeenAt != nil {
		sess.LastSeenAt = r.LastSeenAt.UTC()
	}
	return sess, nil
}

// TouchSession implements contracts.SessionStore.
func (s *Store) TouchSession(ctx context.Context, idHash string, at time.Time) error {
	return relational.Translate(s.db.WithContext(ctx).Model(&sessionRow{}).Where("id_hash = ?", idHash).
		Update("last_seen_at", at.UTC()).Error, "session")
}

// DeleteSession implements contracts.SessionStore.
func (s *Store) DeleteSession(ctx context.Context, idHash string) error {
	return relational.Translate(s.db.WithContext(ctx).Where("id_hash = ?", idHash).Delete(&sessionRow{}).Error, "session")
}

// DeleteExpiredSessions implements contracts.SessionStore.
func (s *Store) DeleteExpiredSessions(ctx context.Context, t time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("expires_at < ?", t.UTC()).Delete(&sessionRow{})
	return res.RowsAffected, relational.Translate(res.Error, "session")
}
