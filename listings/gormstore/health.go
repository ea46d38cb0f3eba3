package gormstore

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

var _ listings.HealthStore = (*Store)(nil)

type endpointHealthRow struct {
	ListingID string `gorm:"primaryKey"`
	URL       string `gorm:"primaryKey;column:url"`
	Up        bool
	Since     time.Time
	Cause     string
}

func (endpointHealthRow) TableName() string { return "listing_endpoint_health" }

// Probeable implements listings.HealthStore.
func (s *Store) Probeable(ctx context.Context, afterID string, limit int) ([]*listings.Listing, error) {
	var rows []listingRow
	err := s.db.WithContext(ctx).Where("status = ? AND id > ?", string(listings.StatusPublished), afterID).
		Order("id ASC").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, relational.Translate(err, "listing")
	}
	return s.withPlans(ctx, rows)
}

// SetEndpoints implements listings.HealthStore.
func (s *Store) SetEndpoints(ctx context.Context, listingID string, eps []listings.EndpointHealth) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&listingRow{}).Where("id = ?", listingID).Count(&n).Error; err != nil {
			return err
		}
		if n == 0 {
			return gorm.ErrRecordNotFound
		}
		if err := tx.Where("listing_id = ?", listingID).Delete(&endpointHealthRow{}).Error; err != nil {
			return err
		}
		if len(eps) == 0 {
			return nil
		}
		rows := make([]endpointHealthRow, len(eps))
		for i, e := range eps {
			rows[i] = endpointHealthRow{ListingID: listingID, URL: e.URL, Up: e.Up, Since: e.Since.UTC(), Cause: e.Cause}
		}
		return tx.Create(&rows).Error
	})
	return relational.Translate(err, "listing")
}

// endpointsOf reads the endpoints' health of the listings with ids, by
// listing, in URL order.
func (s *Store) endpointsOf(ctx context.Context, ids []string) (map[string][]listings.EndpointHealth, error) {
	var rows []endpointHealthRow
	if err := s.db.WithContext(ctx).Where("listing_id IN ?", ids).Order("listing_id, url").Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "listing")
	}
	out := make(map[string][]listings.EndpointHealth, len(ids))
	for _, r := range rows {
		out[r.ListingID] = append(out[r.ListingID], listings.EndpointHealth{URL: r.URL, Up: r.Up, Since: r.Since.UTC(), Cause: r.Cause})
	}
	return out, nil
}
