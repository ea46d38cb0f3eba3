package gormstore

import (
	"context"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

var _ contracts.NameStore = (*Store)(nil)

// UserByID implements contracts.NameStore.
func (s *Store) UserByID(ctx context.Context, id string) (*contracts.User, error) {
	var r userRow
	if err := s.db.WithContext(ctx).Where("id = ?", id).Take(&r).Error; err != nil {
		return nil, relational.Translate(err, "user")
	}
	return &contracts.User{ID: r.ID, OrgID: r.OrgID, Email: r.Email, Role: agentmarket.Role(r.Role), CreatedAt: r.CreatedAt.UTC()}, nil
}

// APIKeyByID implements contracts.NameStore.
func (s *Store) APIKeyByID(ctx context.Context, id string) (*contracts.APIKey, error) {
	var r keyRow
	if err := s.db.WithContext(ctx).Where("id = ?", id).Take(&r).Error; err != nil {
		return nil, relational.Translate(err, "api key")
	}
	return keyFromRow(&r), nil
}
