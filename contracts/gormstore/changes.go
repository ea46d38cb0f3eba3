package gormstore

import (
	"context"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

var _ contracts.PlanChangeStore = (*Store)(nil)

type planChangeRow struct {
	ContractID  string `gorm:"primaryKey"`
	Seq         int    `gorm:"primaryKey"`
	ChangedAt   time.Time
	FromVersion int
	ToVersion   int
	OfferID     string
}

func (planChangeRow) TableName() string { return "contract_plan_changes" }

var errPlanChanged = agentmarket.Errorf(agentmarket.Conflict, "plan_changed", "the subscription's plan changed meanwhile; try again")

// ChangePlan implements contracts.PlanChangeStore.
func (s *Store) ChangePlan(ctx context.Context, ch contracts.PlanChange) (*contracts.Contract, error) {
	var out *contracts.Contract
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&planChangeRow{}).Where("contract_id = ?", ch.ContractID).Count(&n).Error; err != nil {
			return err
		}
		if n != int64(ch.Seq-1) {
			return errPlanChanged
		}
		res := tx.Model(&contractRow{}).Where("id = ? AND plan_version = ?", ch.ContractID, ch.FromVersion).
			Updates(map[string]any{"plan_version": ch.ToVersion, "updated_at": ch.At.UTC()})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return errPlanChanged
		}
		if err := tx.Create(&planChangeRow{ContractID: ch.ContractID, Seq: ch.Seq, ChangedAt: ch.At.UTC(), FromVersion: ch.FromVersion,
			ToVersion: ch.ToVersion, OfferID: ch.OfferID}).Error; err != nil {
			return err
		}
		return reread(tx, ch.ContractID, &out)
	})
	if err != nil {
		return nil, notFoundAs(relational.Translate(err, "subscription"), "subscription_not_found", "no subscription %q", ch.ContractID)
	}
	return out, nil
}

// PlanChanges implements contracts.PlanChangeStore.
func (s *Store) PlanChanges(ctx context.Context, contractID string) ([]contracts.PlanChange, error) {
	var rows []planChangeRow
	if err := s.db.WithContext(ctx).Where("contract_id = ?", contractID).Order("seq ASC").Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "plan change")
	}
	out := make([]contracts.PlanChange, len(rows))
	for i, r := range rows {
		out[i] = contracts.PlanChange{ContractID: r.ContractID, Seq: r.Seq, At: r.ChangedAt.UTC(), FromVersion: r.FromVersion, ToVersion: r.ToVersion,
			OfferID: r.OfferID}
	}
	return out, nil
}

// SetCancelAt implements contracts.PlanChangeStore.
func (s *Store) SetCancelAt(ctx context.Context, id string, cancelAt *time.Time, at time.Time) (*contracts.Contract, error) {
	return s.updateContract(ctx, id, map[string]any{"cancel_at": utcPtr(cancelAt), "updated_at": at.UTC()})
}

// SetContractTags implements contracts.PlanChangeStore.
func (s *Store) SetContractTags(ctx context.Context, id string, tags agentmarket.Tags, at time.Time) (*contracts.Contract, error) {
	return s.updateContract(ctx, id, map[string]any{"tags": string(tags), "updated_at": at.UTC()})
}

// SetContractFallbacks implements contracts.PlanChangeStore.
func (s *Store) SetContractFallbacks(ctx context.Context, id string, listingIDs []string, at time.Time) (*contracts.Contract, error) {
	return s.updateContract(ctx, id, map[string]any{"fallbacks": strings.Join(listingIDs, ","), "updated_at": at.UTC()})
}

// DueCancellations implements contracts.PlanChangeStore.
func (s *Store) DueCancellations(ctx context.Context, now time.Time) ([]contracts.Contract, error) {
	return s.findContracts(ctx, "id ASC", "cancel_at IS NOT NULL AND cancel_at <= ? AND status <> ?", now.UTC(), string(contracts.ContractCanceled))
}
