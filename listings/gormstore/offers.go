package gormstore

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

var _ listings.OfferStore = (*Store)(nil)

type offerRow struct {
	ID          string `gorm:"primaryKey"`
	ListingID   string
	SellerOrgID string
	BuyerOrgID  string
	PlanVersion int
	ExpiresAt   time.Time
	Status      string
	ContractID  string
	CreatedAt   time.Time
	DecidedAt   *time.Time
}

func (offerRow) TableName() string { return "listing_offers" }

// NextPlanVersion implements listings.Store.
func (s *Store) NextPlanVersion(ctx context.Context, listingID string) (int, error) {
	var v *int
	if err := s.db.WithContext(ctx).Model(&planRow{}).Where("listing_id = ?", listingID).Select("MAX(version)").Scan(&v).Error; err != nil {
		return 0, relational.Translate(err, "plan")
	}
	if v == nil {
		return 1, nil
	}
	return *v + 1, nil
}

// privateVersion refuses to make a private plan version a listing's.
func privateVersion(tx *gorm.DB, listingID string, version int) error {
	var n int64
	if err := tx.Model(&planRow{}).Where("listing_id = ? AND version = ? AND buyer_org_id <> ''", listingID, version).Count(&n).Error; err != nil {
		return err
	}
	if n > 0 {
		return agentmarket.Errorf(agentmarket.Conflict, "plan_version_taken", "plan version %d of listing %q is a private offer's; try again", version, listingID)
	}
	return nil
}

// CreateOffer implements listings.OfferStore.
func (s *Store) CreateOffer(ctx context.Context, o *listings.Offer) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(planToRow(o.ListingID, o.Plan)).Error; err != nil {
			return err
		}
		return tx.Create(&offerRow{ID: o.ID, ListingID: o.ListingID, SellerOrgID: o.SellerOrgID, BuyerOrgID: o.BuyerOrgID,
			PlanVersion: o.Plan.Version, ExpiresAt: o.ExpiresAt.UTC(), Status: string(o.Status), ContractID: o.ContractID,
			CreatedAt: o.CreatedAt.UTC(), DecidedAt: utcPtr(o.DecidedAt)}).Error
	})
	return relational.Translate(err, "offer")
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func (s *Store) offersWithPlans(db *gorm.DB, rows []offerRow) ([]listings.Offer, error) {
	out := make([]listings.Offer, len(rows))
	for i, r := range rows {
		var p planRow
		if err := db.Where("listing_id = ? AND version = ?", r.ListingID, r.PlanVersion).Take(&p).Error; err != nil {
			return nil, relational.Translate(err, "plan")
		}
		out[i] = listings.Offer{ID: r.ID, ListingID: r.ListingID, SellerOrgID: r.SellerOrgID, BuyerOrgID: r.BuyerOrgID, Plan: planFromRow(&p),
			ExpiresAt: r.ExpiresAt.UTC(), Status: listings.OfferStatus(r.Status), ContractID: r.ContractID, CreatedAt: r.CreatedAt.UTC(),
			DecidedAt: utcPtr(r.DecidedAt)}
	}
	return out, nil
}

// GetOffer implements listings.OfferStore.
func (s *Store) GetOffer(ctx context.Context, id string) (*listings.Offer, error) {
	db := s.db.WithContext(ctx)
	var r offerRow
	if err := db.Where("id = ?", id).Take(&r).Error; err != nil {
		return nil, relational.Translate(err, "offer")
	}
	out, err := s.offersWithPlans(db, []offerRow{r})
	if err != nil {
		return nil, err
	}
	return &out[0], nil
}

// ListOffers implements listings.OfferStore.
func (s *Store) ListOffers(ctx context.Context, q listings.OfferQuery) ([]listings.Offer, error) {
	db := s.db.WithContext(ctx)
	tx := db.Model(&offerRow{})
	switch {
	case q.SellerOrgID != "":
		tx = tx.Where("seller_org_id = ?", q.SellerOrgID)
	case q.BuyerOrgID != "":
		tx = tx.Where("buyer_org_id = ?", q.BuyerOrgID)
	default:
		return nil, agentmarket.Errorf(agentmarket.Invalid, "invalid_offer_query", "offers are listed for a seller or a buyer")
	}
	if q.ListingID != "" {
		tx = tx.Where("listing_id = ?", q.ListingID)
	}
	var rows []offerRow
	if err := tx.Order("created_at DESC, id DESC").Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "offer")
	}
	return s.offersWithPlans(db, rows)
}

// DecideOffer implements listings.OfferStore.
func (s *Store) DecideOffer(ctx context.Context, id string, status listings.OfferStatus, contractID string, at time.Time) (*listings.Offer, error) {
	res := s.db.WithContext(ctx).Model(&offerRow{}).Where("id = ? AND status = ?", id, string(listings.OfferOpen)).
		Updates(map[string]any{"status": string(status), "contract_id": contractID, "decided_at": at.UTC()})
	if res.Error != nil {
		return nil, relational.Translate(res.Error, "offer")
	}
	o, err := s.GetOffer(ctx, id)
	if err != nil {
		return nil, err
	}
	if res.RowsAffected == 0 {
		return nil, agentmarket.Errorf(agentmarket.Conflict, "offer_not_open", "offer %q is %s", id, o.Status)
	}
	return o, nil
}
