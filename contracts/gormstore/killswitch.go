package gormstore

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

var _ contracts.SwitchStore = (*Store)(nil)

type switchRow struct {
	ID               string `gorm:"primaryKey"`
	Scope            string
	TargetID         string
	ListingID        string
	OrgID            string
	Reason           string
	SetBy            string
	SetByOrg         string
	ByOperator       bool
	SetAt            time.Time
	LiftedAt         *time.Time
	LiftedBy         string
	LiftedByOperator bool
	LiftReason       string
}

func (switchRow) TableName() string { return "kill_switches" }

type switchVersionRow struct {
	ID      int `gorm:"primaryKey"`
	Version int64
}

func (switchVersionRow) TableName() string { return "kill_switch_version" }

func switchToRow(s *contracts.Switch) *switchRow {
	return &switchRow{ID: s.ID, Scope: string(s.Scope), TargetID: s.TargetID, ListingID: s.ListingID, OrgID: s.OrgID, Reason: s.Reason,
		SetBy: s.SetBy, SetByOrg: s.SetByOrg, ByOperator: s.ByOperator, SetAt: s.SetAt.UTC(), LiftedAt: utcPtr(s.LiftedAt),
		LiftedBy: s.LiftedBy, LiftedByOperator: s.LiftedByOperator, LiftReason: s.LiftReason}
}

func (r *switchRow) toSwitch() contracts.Switch {
	return contracts.Switch{ID: r.ID, Scope: contracts.SwitchScope(r.Scope), TargetID: r.TargetID, ListingID: r.ListingID, OrgID: r.OrgID,
		Reason: r.Reason, SetBy: r.SetBy, SetByOrg: r.SetByOrg, ByOperator: r.ByOperator, SetAt: r.SetAt.UTC(), LiftedAt: utcPtr(r.LiftedAt),
		LiftedBy: r.LiftedBy, LiftedByOperator: r.LiftedByOperator, LiftReason: r.LiftReason}
}

func bumpSwitchVersion(tx *gorm.DB) error {
	return tx.Model(&switchVersionRow{}).Where("id = 1").Update("version", gorm.Expr("version + 1")).Error
}

// CreateSwitch implements contracts.SwitchStore.
func (s *Store) CreateSwitch(ctx context.Context, sw *contracts.Switch) error {
	_, err := s.createSwitch(ctx, sw, false, "")
	return err
}

// TakeOverSwitch implements contracts.SwitchStore.
func (s *Store) TakeOverSwitch(ctx context.Context, sw *contracts.Switch, liftReason string) (*contracts.Switch, error) {
	return s.createSwitch(ctx, sw, true, liftReason)
}

// createSwitch stores sw; with takeOver, it first lifts, in the same
// transaction, the active switch of the same target an org set (the one
// unique index allows one active switch per target).
func (s *Store) createSwitch(ctx context.Context, sw *contracts.Switch, takeOver bool, liftReason string) (*contracts.Switch, error) {
	var taken *contracts.Switch
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if takeOver {
			var r switchRow
			err := tx.Where("scope = ? AND listing_id = ? AND target_id = ? AND lifted_at IS NULL AND by_operator = ?",
				string(sw.Scope), sw.ListingID, sw.TargetID, false).Take(&r).Error
			switch {
			case err == nil:
				lift := map[string]any{"lifted_at": sw.SetAt.UTC(), "lifted_by": sw.SetBy, "lifted_by_operator": true, "lift_reason": liftReason}
				if err := tx.Model(&switchRow{}).Where("id = ? AND lifted_at IS NULL", r.ID).Updates(lift).Error; err != nil {
					return err
				}
				if err := tx.Where("id = ?", r.ID).Take(&r).Error; err != nil {
					return err
				}
				t := r.toSwitch()
				taken = &t
			case !errors.Is(err, gorm.ErrRecordNotFound):
				return err
			}
		}
		if err := tx.Create(switchToRow(sw)).Error; err != nil {
			return err
		}
		return bumpSwitchVersion(tx)
	})
	if err != nil {
		if agentmarket.KindOf(relational.Translate(err, "kill switch")) == agentmarket.Conflict {
			return nil, agentmarket.Errorf(agentmarket.Conflict, "kill_switch_on", "this %s is already switched off", sw.Scope)
		}
		return nil, relational.Translate(err, "kill switch")
	}
	return taken, nil
}

// LiftSwitch implements contracts.SwitchStore.
func (s *Store) LiftSwitch(ctx context.Context, id, by string, byOperator bool, reason string, at time.Time) (*contracts.Switch, error) {
	var out contracts.Switch
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&switchRow{}).Where("id = ? AND lifted_at IS NULL", id).
			Updates(map[string]any{"lifted_at": at.UTC(), "lifted_by": by, "lifted_by_operator": byOperator, "lift_reason": reason})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return agentmarket.Errorf(agentmarket.NotFound, "kill_switch_not_on", "no kill switch %q is on", id)
		}
		var r switchRow
		if err := tx.Where("id = ?", id).Take(&r).Error; err != nil {
			return err
		}
		out = r.toSwitch()
		return bumpSwitchVersion(tx)
	})
	if err != nil {
		return nil, relational.Translate(err, "kill switch")
	}
	return &out, nil
}

// GetSwitch implements contracts.SwitchStore.
func (s *Store) GetSwitch(ctx context.Context, id string) (*contracts.Switch, error) {
	var r switchRow
	if err := s.db.WithContext(ctx).Where("id = ?", id).Take(&r).Error; err != nil {
		return nil, relational.Translate(err, "kill switch")
	}
	sw := r.toSwitch()
	return &sw, nil
}

// ListSwitches implements contracts.SwitchStore.
func (s *Store) ListSwitches(ctx context.Context, orgID string, activeOnly bool, limit int) ([]contracts.Switch, error) {
	q := s.db.WithContext(ctx).Model(&switchRow{})
	if orgID != "" {
		q = q.Where("org_id = ?", orgID)
	}
	if activeOnly {
		q = q.Where("lifted_at IS NULL")
	}
	var rows []switchRow
	if err := q.Order("set_at DESC, id DESC").Limit(limit).Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "kill switch")
	}
	out := make([]contracts.Switch, len(rows))
	for i := range rows {
		out[i] = rows[i].toSwitch()
	}
	return out, nil
}

// SwitchTargetOrg implements contracts.SwitchStore.
func (s *Store) SwitchTargetOrg(ctx context.Context, scope contracts.SwitchScope, listingID, targetID string) (string, error) {
	var q string
	args := []any{targetID}
	switch scope {
	case contracts.SwitchListing:
		q = "SELECT seller_org_id FROM listings WHERE id = ?"
	case contracts.SwitchSellerOrg, contracts.SwitchBuyerOrg:
		q = "SELECT id FROM orgs WHERE id = ?"
	case contracts.SwitchAPIKey:
		q = "SELECT org_id FROM api_keys WHERE id = ?"
	case contracts.SwitchTask:
		q, args = "SELECT org_id FROM task_owners WHERE listing_id = ? AND task_id = ?", []any{listingID, targetID}
	default:
		return "", agentmarket.Errorf(agentmarket.Invalid, "invalid_kill_switch", "unknown scope %q", scope)
	}
	var orgs []string
	if err := s.db.WithContext(ctx).Raw(q, args...).Scan(&orgs).Error; err != nil {
		return "", relational.Translate(err, "kill switch")
	}
	if len(orgs) == 0 {
		return "", agentmarket.Errorf(agentmarket.NotFound, "not_found", "no %s %q", scope, targetID)
	}
	return orgs[0], nil
}

// SwitchVersion implements contracts.SwitchReader.
func (s *Store) SwitchVersion(ctx context.Context) (int64, error) {
	var r switchVersionRow
	if err := s.db.WithContext(ctx).Where("id = 1").Take(&r).Error; err != nil {
		return 0, relational.Translate(err, "kill switch version")
	}
	return r.Version, nil
}

// ActiveSwitches implements contracts.SwitchReader.
func (s *Store) ActiveSwitches(ctx context.Context) ([]contracts.Switch, int64, error) {
	var out []contracts.Switch
	var version int64
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var v switchVersionRow
		if err := tx.Where("id = 1").Take(&v).Error; err != nil {
			return err
		}
		var rows []switchRow
		if err := tx.Where("lifted_at IS NULL").Find(&rows).Error; err != nil {
			return err
		}
		version, out = v.Version, make([]contracts.Switch, len(rows))
		for i := range rows {
			out[i] = rows[i].toSwitch()
		}
		return nil
	})
	if err != nil {
		return nil, 0, relational.Translate(err, "kill switch")
	}
	return out, version, nil
}

// RequestSwitchCancels implements contracts.SwitchReader.
func (s *Store) RequestSwitchCancels(ctx context.Context, sw *contracts.Switch, at time.Time) (int64, error) {
	q := s.db.WithContext(ctx).Model(&taskOwnerRow{}).Where("ended_at IS NULL AND cancel_requested_at IS NULL")
	switch sw.Scope {
	case contracts.SwitchListing:
		q = q.Where("listing_id = ?", sw.TargetID)
	case contracts.SwitchSellerOrg:
		q = q.Where("listing_id IN (SELECT id FROM listings WHERE seller_org_id = ?)", sw.TargetID)
	case contracts.SwitchBuyerOrg:
		q = q.Where("org_id = ?", sw.TargetID)
	case contracts.SwitchTask:
		q = q.Where("listing_id = ? AND task_id = ?", sw.ListingID, sw.TargetID)
	case contracts.SwitchAPIKey:
		// The key's open tasks: those its calls created (key_id, recorded
		// since migration 0091; older tasks have none).
		q = q.Where("key_id = ?", sw.TargetID)
	default:
		return 0, nil
	}
	res := q.Updates(map[string]any{"cancel_requested_at": at.UTC(), "cancel_actor": contracts.CanceledByKillSwitch, "cancel_reason": sw.CancelReason(), "cancel_trace_id": ""})
	if res.Error != nil {
		return 0, relational.Translate(res.Error, "task")
	}
	return res.RowsAffected, nil
}
