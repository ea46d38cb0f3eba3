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

var _ contracts.PushStore = (*Store)(nil)

type pushConfigRow struct {
	ListingID  string `gorm:"primaryKey"`
	TaskID     string `gorm:"primaryKey"`
	ConfigID   string `gorm:"primaryKey"`
	OrgID      string
	APIKeyID   string `gorm:"column:api_key_id"`
	Version    string
	URL        string `gorm:"column:url"`
	Sealed     []byte
	AuthScheme string
	CallbackID string
	SecretHash string
	CreatedAt  time.Time
}

func (pushConfigRow) TableName() string { return "push_configs" }

func pushConfigFromRow(r *pushConfigRow) *contracts.PushConfig {
	return &contracts.PushConfig{ListingID: r.ListingID, TaskID: r.TaskID, ConfigID: r.ConfigID, OrgID: r.OrgID, APIKeyID: r.APIKeyID,
		Version: r.Version, URL: r.URL, Sealed: r.Sealed, AuthScheme: r.AuthScheme, CallbackID: r.CallbackID, SecretHash: r.SecretHash,
		CreatedAt: r.CreatedAt.UTC()}
}

type deliveryRow struct {
	Seq           int64 `gorm:"primaryKey;autoIncrement"`
	ID            string
	ListingID     string
	TaskID        string
	ConfigID      string
	OrgID         string
	Destination   string
	Kind          string
	Covers        int
	SupersededBy  string
	Body          []byte
	Status        string
	Attempts      int
	NextAttemptAt time.Time
	LeaseUntil    *time.Time
	LastStatus    int
	LastError     string
	CreatedAt     time.Time
	DeliveredAt   *time.Time
}

func (deliveryRow) TableName() string { return "push_deliveries" }

func deliveryFromRow(r *deliveryRow) contracts.Delivery {
	return contracts.Delivery{ID: r.ID, Seq: r.Seq, ListingID: r.ListingID, TaskID: r.TaskID, ConfigID: r.ConfigID, OrgID: r.OrgID,
		Destination: r.Destination, Kind: contracts.DeliveryKind(r.Kind), Covers: r.Covers, SupersededBy: r.SupersededBy, Body: r.Body, Status: contracts.DeliveryStatus(r.Status), Attempts: r.Attempts, NextAttemptAt: r.NextAttemptAt.UTC(),
		LastStatus: r.LastStatus, LastError: r.LastError, CreatedAt: r.CreatedAt.UTC(), DeliveredAt: utcPtr(r.DeliveredAt)}
}

// nonNil keeps empty bytes out of NULL (the driver sends a nil slice as
// NULL, and the columns are NOT NULL).
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// SavePushConfig implements contracts.PushStore. A replace rewrites every
// field, CreatedAt included. A callback id another config holds is a
// Conflict.
func (s *Store) SavePushConfig(ctx context.Context, c contracts.PushConfig) error {
	row := &pushConfigRow{ListingID: c.ListingID, TaskID: c.TaskID, ConfigID: c.ConfigID, OrgID: c.OrgID, APIKeyID: c.APIKeyID,
		Version: c.Version, URL: c.URL, Sealed: nonNil(c.Sealed), AuthScheme: c.AuthScheme, CallbackID: c.CallbackID,
		SecretHash: c.SecretHash, CreatedAt: c.CreatedAt.UTC()}
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "listing_id"}, {Name: "task_id"}, {Name: "config_id"}},
		DoUpdates: clause.AssignmentColumns([]string{"org_id", "api_key_id", "version", "url", "sealed", "auth_scheme", "callback_id", "secret_hash", "created_at"}),
	}).Create(row).Error
	return relational.Translate(err, "push config")
}

// PushConfig implements contracts.PushStore.
func (s *Store) PushConfig(ctx context.Context, listingID, taskID, configID string) (*contracts.PushConfig, error) {
	var r pushConfigRow
	if err := s.db.WithContext(ctx).Where("listing_id = ? AND task_id = ? AND config_id = ?", listingID, taskID, configID).Take(&r).Error; err != nil {
		return nil, relational.Translate(err, "push config")
	}
	return pushConfigFromRow(&r), nil
}

// PushConfigs implements contracts.PushStore: oldest first.
func (s *Store) PushConfigs(ctx context.Context, listingID, taskID string) ([]contracts.PushConfig, error) {
	var rows []pushConfigRow
	err := s.db.WithContext(ctx).Where("listing_id = ? AND task_id = ?", listingID, taskID).Order("created_at ASC, config_id ASC").Find(&rows).Error
	if err != nil {
		return nil, relational.Translate(err, "push config")
	}
	out := make([]contracts.PushConfig, len(rows))
	for i := range rows {
		out[i] = *pushConfigFromRow(&rows[i])
	}
	return out, nil
}

// PushCallback implements contracts.PushStore.
func (s *Store) PushCallback(ctx context.Context, callbackID string) (*contracts.PushConfig, error) {
	var r pushConfigRow
	if err := s.db.WithContext(ctx).Where("callback_id = ?", callbackID).Take(&r).Error; err != nil {
		return nil, relational.Translate(err, "push config")
	}
	return pushConfigFromRow(&r), nil
}

// pushConfigDeletionRow remembers that a config existed: a second delete
// of it succeeds, while an id the task never had stays unknown.
type pushConfigDeletionRow struct {
	ListingID string `gorm:"primaryKey"`
	TaskID    string `gorm:"primaryKey"`
	ConfigID  string `gorm:"primaryKey"`
}

func (pushConfigDeletionRow) TableName() string { return "push_config_deletions" }

// DeletePushConfig implements contracts.PushStore. Delivered and failed
// deliveries stay, for the buyer's history.
func (s *Store) DeletePushConfig(ctx context.Context, listingID, taskID, configID string) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		const key = "listing_id = ? AND task_id = ? AND config_id = ?"
		res := tx.Where(key, listingID, taskID, configID).Delete(&pushConfigRow{})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			var deleted int64
			if err := tx.Model(&pushConfigDeletionRow{}).Where(key, listingID, taskID, configID).Count(&deleted).Error; err != nil {
				return err
			}
			if deleted == 0 {
				return gorm.ErrRecordNotFound
			}
			return nil // deleted before: nothing more to do
		}
		err := tx.Clauses(clause.OnConflict{DoNothing: true}).
			Create(&pushConfigDeletionRow{ListingID: listingID, TaskID: taskID, ConfigID: configID}).Error
		if err != nil {
			return err
		}
		if err := tx.Where(key, listingID, taskID, configID).Delete(&pushConfigCapsRow{}).Error; err != nil {
			return err
		}
		return tx.Where(key+" AND status = ?", listingID, taskID, configID, string(contracts.DeliveryPending)).Delete(&deliveryRow{}).Error
	})
	return relational.Translate(err, "push config")
}

// pendingRow is the row of a delivery enqueued: pending whatever its
// Status; a zero NextAttemptAt makes it due at CreatedAt.
func pendingRow(d *contracts.Delivery) *deliveryRow {
	next := d.NextAttemptAt
	if next.IsZero() {
		next = d.CreatedAt
	}
	return &deliveryRow{ID: d.ID, ListingID: d.ListingID, TaskID: d.TaskID, ConfigID: d.ConfigID, OrgID: d.OrgID, Destination: d.Destination,
		Kind: string(d.Kind), Body: nonNil(d.Body), Status: string(contracts.DeliveryPending), Attempts: d.Attempts, NextAttemptAt: next.UTC(), CreatedAt: d.CreatedAt.UTC()}
}

// Enqueue implements contracts.PushStore.
func (s *Store) Enqueue(ctx context.Context, d contracts.Delivery) (bool, error) {
	row := pendingRow(&d)
	inserted := false
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "id"}}, DoNothing: true}).Create(row)
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		inserted = true
		if d.Kind != contracts.DeliveryStatusUpdate && d.Kind != contracts.DeliveryState {
			return nil
		}
		return supersede(tx, row)
	})
	if err != nil {
		return false, relational.Translate(err, "delivery")
	}
	return inserted, nil
}

// supersede marks the pending status updates of row's config before it,
// not leased, superseded by it, and counts them in its covers. The update
// comes first: a concurrent Enqueue that took some of them already (its
// update waited on theirs) does not count them again.
func supersede(tx *gorm.DB, row *deliveryRow) error {
	res := tx.Model(&deliveryRow{}).
		Where("listing_id = ? AND task_id = ? AND config_id = ? AND status = ? AND kind = ? AND seq < ? AND (lease_until IS NULL OR lease_until <= ?)",
			row.ListingID, row.TaskID, row.ConfigID, string(contracts.DeliveryPending), string(contracts.DeliveryStatusUpdate), row.Seq, row.CreatedAt).
		Updates(map[string]any{"status": string(contracts.DeliverySuperseded), "superseded_by": row.ID, "lease_until": nil})
	if res.Error != nil || res.RowsAffected == 0 {
		return res.Error
	}
	var covered int64
	err := tx.Model(&deliveryRow{}).Select("COALESCE(SUM(covers + 1), 0)").Where("superseded_by = ?", row.ID).Scan(&covered).Error
	if err != nil {
		return err
	}
	return tx.Model(&deliveryRow{}).Where("seq = ?", row.Seq).Update("covers", covered).Error
}

// ClaimDeliveries implements contracts.PushStore.
func (s *Store) ClaimDeliveries(ctx context.Context, now, leaseUntil time.Time, limit int, skip contracts.ClaimSkip) ([]contracts.Delivery, error) {
	if limit <= 0 {
		return nil, nil
	}
	now, leaseUntil = now.UTC(), leaseUntil.UTC()
	pending := string(contracts.DeliveryPending)
	var out []contracts.Delivery
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		out = nil
		var rows []deliveryRow
		// A delivery waits while an older one of its config is pending,
		// leased or not, due or not: a config's notifications go in order.
		q := tx.Clauses(claimLock).
			Where("status = ? AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until <= ?)", pending, now, now)
		if len(skip.Destinations) > 0 {
			q = q.Where("destination NOT IN ?", skip.Destinations)
		}
		if len(skip.Orgs) > 0 {
			q = q.Where("org_id NOT IN ?", skip.Orgs)
		}
		for _, od := range skip.OrgDestinations {
			q = q.Where("NOT (org_id = ? AND destination = ?)", od[0], od[1])
		}
		err := q.Where(`NOT EXISTS (SELECT 1 FROM push_deliveries older WHERE older.listing_id = push_deliveries.listing_id
				AND older.task_id = push_deliveries.task_id AND older.config_id = push_deliveries.config_id
				AND older.status = ? AND older.seq < push_deliveries.seq)`, pending).
			Order("seq ASC").Limit(limit).Find(&rows).Error
		if err != nil {
			return err
		}
		for i := range rows {
			r := &rows[i]
			res := tx.Model(&deliveryRow{}).
				Where("seq = ? AND status = ? AND (lease_until IS NULL OR lease_until <= ?)", r.Seq, pending, now).
				Update("lease_until", leaseUntil)
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 1 {
				out = append(out, deliveryFromRow(r))
			}
		}
		return nil
	})
	if err != nil {
		return nil, relational.Translate(err, "delivery")
	}
	return out, nil
}

// DeliveryAttempted implements contracts.PushStore. next is kept only for
// a delivery left pending.
func (s *Store) DeliveryAttempted(ctx context.Context, id string, status contracts.DeliveryStatus, attempts int, next time.Time, httpStatus int, errText string, at time.Time) error {
	updates := map[string]any{"status": string(status), "attempts": attempts, "last_status": httpStatus, "last_error": errText, "lease_until": nil}
	switch status {
	case contracts.DeliveryPending:
		updates["next_attempt_at"] = next.UTC()
	case contracts.DeliveryDelivered:
		updates["delivered_at"] = at.UTC()
	case contracts.DeliveryFailed:
	default:
		return agentmarket.Errorf(agentmarket.Invalid, "invalid_delivery_status", "unknown delivery status %q", status)
	}
	// Only a pending delivery takes an attempt: a worker whose lease ran
	// out while another delivered it must not put it back to pending.
	res := s.db.WithContext(ctx).Model(&deliveryRow{}).Where("id = ? AND status = ?", id, string(contracts.DeliveryPending)).Updates(updates)
	if res.Error != nil {
		return relational.Translate(res.Error, "delivery")
	}
	if res.RowsAffected == 0 {
		var n int64
		if err := s.db.WithContext(ctx).Model(&deliveryRow{}).Where("id = ?", id).Count(&n).Error; err != nil {
			return relational.Translate(err, "delivery")
		}
		if n == 0 {
			return relational.Translate(gorm.ErrRecordNotFound, "delivery")
		}
	}
	return nil
}

// Deliveries implements contracts.PushStore: newest first.
func (s *Store) Deliveries(ctx context.Context, q contracts.DeliveryQuery) ([]contracts.Delivery, error) {
	if q.OrgID == "" {
		return nil, agentmarket.Errorf(agentmarket.Invalid, "org_required", "deliveries are listed per organisation")
	}
	switch {
	case q.Limit <= 0:
		q.Limit = 100
	case q.Limit > 1000:
		q.Limit = 1000
	}
	db := s.db.WithContext(ctx).Where("org_id = ?", q.OrgID)
	if q.Status != "" {
		db = db.Where("status = ?", string(q.Status))
	}
	if q.TaskID != "" {
		db = db.Where("task_id = ?", q.TaskID)
	}
	var rows []deliveryRow
	if err := db.Order("seq DESC").Limit(q.Limit).Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "delivery")
	}
	out := make([]contracts.Delivery, len(rows))
	for i := range rows {
		out[i] = deliveryFromRow(&rows[i])
	}
	return out, nil
}

// RetryDelivery implements contracts.PushStore. The attempts made so far
// are kept: the delivery's history stays true, and the caller decides how
// many more to allow.
func (s *Store) RetryDelivery(ctx context.Context, orgID, id string, now time.Time) error {
	res := s.db.WithContext(ctx).Model(&deliveryRow{}).
		Where("id = ? AND org_id = ? AND status = ?", id, orgID, string(contracts.DeliveryFailed)).
		Updates(map[string]any{"status": string(contracts.DeliveryPending), "next_attempt_at": now.UTC(), "lease_until": nil, "attempts": 0})
	if res.Error != nil {
		return relational.Translate(res.Error, "delivery")
	}
	if res.RowsAffected == 0 {
		return agentmarket.Errorf(agentmarket.NotFound, "delivery_not_found", "no failed delivery %q", id)
	}
	return nil
}

// PruneDeliveries implements contracts.PushStore.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("status IN ? AND created_at < ?",
		[]string{string(contracts.DeliveryDelivered), string(contracts.DeliveryFailed), string(contracts.DeliverySuperseded)}, before.UTC()).Delete(&deliveryRow{})
	if res.Error != nil {
		return 0, relational.Translate(res.Error, "delivery")
	}
	return res.RowsAffected, nil
}
