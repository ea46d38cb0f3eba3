package gormstore

import (
	"context"
	"math"
	"time"

	"gorm.io/gorm/clause"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

var _ contracts.PushCapsStore = (*Store)(nil)

type pushCapsRow struct {
	OrgID          string `gorm:"primaryKey"`
	Destination    string `gorm:"primaryKey"`
	MaxInFlight    int
	PerSecondMilli int64
	UpdatedAt      time.Time
}

func (pushCapsRow) TableName() string { return "push_caps" }

// SavePushCaps implements contracts.PushCapsStore.
func (s *Store) SavePushCaps(ctx context.Context, c contracts.PushCaps) error {
	r := pushCapsRow{OrgID: c.OrgID, Destination: c.Destination, MaxInFlight: c.MaxInFlight,
		PerSecondMilli: int64(math.Round(c.PerSecond * 1000)), UpdatedAt: c.UpdatedAt.UTC()}
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "org_id"}, {Name: "destination"}},
		DoUpdates: clause.AssignmentColumns([]string{"max_in_flight", "per_second_milli", "updated_at"}),
	}).Create(&r).Error
	return relational.Translate(err, "push caps")
}

// PushCaps implements contracts.PushCapsStore.
func (s *Store) PushCaps(ctx context.Context, orgID string) ([]contracts.PushCaps, error) {
	var rows []pushCapsRow
	if err := s.db.WithContext(ctx).Where("org_id = ?", orgID).Order("destination").Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "push caps")
	}
	out := make([]contracts.PushCaps, len(rows))
	for i, r := range rows {
		out[i] = contracts.PushCaps{OrgID: r.OrgID, Destination: r.Destination, MaxInFlight: r.MaxInFlight,
			PerSecond: float64(r.PerSecondMilli) / 1000, UpdatedAt: r.UpdatedAt.UTC()}
	}
	return out, nil
}

// DeletePushCaps implements contracts.PushCapsStore.
func (s *Store) DeletePushCaps(ctx context.Context, orgID, destination string) error {
	res := s.db.WithContext(ctx).Where("org_id = ? AND destination = ?", orgID, destination).Delete(&pushCapsRow{})
	if res.Error != nil {
		return relational.Translate(res.Error, "push caps")
	}
	if res.RowsAffected == 0 {
		return agentmarket.Errorf(agentmarket.NotFound, "push_caps_not_found", "no push caps of yours for %s", destination)
	}
	return nil
}
