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

// toMilli and fromMilli store a rate a second as an integer of
// thousandths (the API takes at most three decimals).
func toMilli(perSecond float64) int64 { return int64(math.Round(perSecond * 1000)) }

func fromMilli(milli int64) float64 { return float64(milli) / 1000 }

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
		PerSecondMilli: toMilli(c.PerSecond), UpdatedAt: c.UpdatedAt.UTC()}
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
			PerSecond: fromMilli(r.PerSecondMilli), UpdatedAt: r.UpdatedAt.UTC()}
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

type pushConfigCapsRow struct {
	ListingID      string `gorm:"primaryKey"`
	TaskID         string `gorm:"primaryKey"`
	ConfigID       string `gorm:"primaryKey"`
	OrgID          string
	PerSecondMilli int64
	UpdatedAt      time.Time
}

func (pushConfigCapsRow) TableName() string { return "push_config_caps" }

// SavePushConfigCaps implements contracts.PushCapsStore.
func (s *Store) SavePushConfigCaps(ctx context.Context, c contracts.PushConfigCaps) error {
	r := pushConfigCapsRow{ListingID: c.ListingID, TaskID: c.TaskID, ConfigID: c.ConfigID, OrgID: c.OrgID,
		PerSecondMilli: toMilli(c.PerSecond), UpdatedAt: c.UpdatedAt.UTC()}
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "listing_id"}, {Name: "task_id"}, {Name: "config_id"}},
		DoUpdates: clause.AssignmentColumns([]string{"org_id", "per_second_milli", "updated_at"}),
	}).Create(&r).Error
	return relational.Translate(err, "push caps")
}

// PushConfigCaps implements contracts.PushCapsStore: the config's row
// gives its destination, and a config that is gone lists nothing.
func (s *Store) PushConfigCaps(ctx context.Context, orgID string) ([]contracts.PushConfigCaps, error) {
	var rows []struct {
		ListingID, TaskID, ConfigID, OrgID string
		PerSecondMilli                     int64
		UpdatedAt                          time.Time
		URL                                string
	}
	err := s.db.WithContext(ctx).Table("push_config_caps AS c").
		Select("c.listing_id, c.task_id, c.config_id, c.org_id, c.per_second_milli, c.updated_at, p.url").
		Joins("JOIN push_configs p ON p.listing_id = c.listing_id AND p.task_id = c.task_id AND p.config_id = c.config_id AND p.org_id = c.org_id").
		Where("c.org_id = ?", orgID).Order("c.listing_id, c.task_id, c.config_id").Scan(&rows).Error
	if err != nil {
		return nil, relational.Translate(err, "push caps")
	}
	out := make([]contracts.PushConfigCaps, len(rows))
	for i, r := range rows {
		out[i] = contracts.PushConfigCaps{OrgID: r.OrgID, ListingID: r.ListingID, TaskID: r.TaskID, ConfigID: r.ConfigID,
			PerSecond: fromMilli(r.PerSecondMilli), Destination: contracts.Destination(r.URL), UpdatedAt: r.UpdatedAt.UTC()}
	}
	return out, nil
}

// DeletePushConfigCaps implements contracts.PushCapsStore.
func (s *Store) DeletePushConfigCaps(ctx context.Context, orgID, listingID, taskID, configID string) error {
	res := s.db.WithContext(ctx).Where("org_id = ? AND listing_id = ? AND task_id = ? AND config_id = ?", orgID, listingID, taskID, configID).
		Delete(&pushConfigCapsRow{})
	if res.Error != nil {
		return relational.Translate(res.Error, "push caps")
	}
	if res.RowsAffected == 0 {
		return agentmarket.Errorf(agentmarket.NotFound, "push_caps_not_found", "no push caps of yours for config %q of task %q on listing %q", configID, taskID, listingID)
	}
	return nil
}
