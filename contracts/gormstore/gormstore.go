// Package gormstore keeps organisations, users, API keys, casbin rules,
// contracts, the tasks the meter carries and their push notifications in
// SQL through GORM (PostgreSQL in production, SQLite embedded). The schema
// comes from migrations/, never from GORM.
package gormstore

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

// Store implements contracts.Store, contracts.PolicyStore and the other
// stores of package contracts (each asserted beside its methods).
type Store struct {
	db *gorm.DB
	// tasks, when set, binds tasks through its own connection to the
	// SQLite file (WriteTasksDirect).
	tasks *taskWriter
}

var (
	_ contracts.Store       = (*Store)(nil)
	_ contracts.PolicyStore = (*Store)(nil)
)

// New returns a store over db, whose schema the migrations have created.
func New(db *gorm.DB) *Store { return &Store{db: db} }

type orgRow struct {
	ID                  string `gorm:"primaryKey"`
	Name                string
	Platform            bool
	ConnectAccountID    string
	MonthlyBudgetMicros *int64
	RateLimits          string
	HasCredit           bool
	CreatedAt           time.Time
}

func orgFromRow(r *orgRow) *contracts.Org {
	return &contracts.Org{ID: r.ID, Name: r.Name, Platform: r.Platform, ConnectAccountID: r.ConnectAccountID,
		MonthlyBudgetMicros: r.MonthlyBudgetMicros, RateLimits: fromJSONColumn[agentmarket.RateLimits](r.RateLimits), HasCredit: r.HasCredit, CreatedAt: r.CreatedAt.UTC()}
}

// SetConnectAccount implements contracts.Store.
func (s *Store) SetConnectAccount(ctx context.Context, orgID, accountID string) (*contracts.Org, error) {
	return s.setOrg(ctx, orgID, "connect_account_id", accountID)
}

// SetOrgRateLimits implements contracts.Store.
func (s *Store) SetOrgRateLimits(ctx context.Context, orgID string, l agentmarket.RateLimits) (*contracts.Org, error) {
	return s.setOrg(ctx, orgID, "rate_limits", jsonColumn(l))
}

// SetKeyRateLimits implements contracts.Store.
func (s *Store) SetKeyRateLimits(ctx context.Context, orgID, id string, l agentmarket.RateLimits) (*contracts.APIKey, error) {
	var out *contracts.APIKey
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&keyRow{}).Where("id = ? AND org_id = ?", id, orgID).Update("rate_limits", jsonColumn(l))
		if res.Error != nil {
			return res.Error
		}
		var r keyRow
		if err := tx.Where("id = ? AND org_id = ?", id, orgID).Take(&r).Error; err != nil {
			return err
		}
		out = keyFromRow(&r)
		return nil
	})
	return out, relational.Translate(err, "api key")
}

// jsonColumn is v as a TEXT column holds it: "" for the zero value, else
// JSON; fromJSONColumn reads it back (anything else: the zero value).
func jsonColumn[T comparable](v T) string {
	var zero T
	if v == zero {
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func fromJSONColumn[T any](s string) T {
	var v T
	if s == "" || json.Unmarshal([]byte(s), &v) != nil {
		var zero T
		return zero
	}
	return v
}

// SetOrgBudget implements contracts.Store.
func (s *Store) SetOrgBudget(ctx context.Context, orgID string, budget *int64) (*contracts.Org, error) {
	return s.setOrg(ctx, orgID, "monthly_budget_micros", budget)
}

// setOrg sets one column of an org and reads the org back.
func (s *Store) setOrg(ctx context.Context, orgID, column string, v any) (*contracts.Org, error) {
	res := s.db.WithContext(ctx).Model(&orgRow{}).Where("id = ?", orgID).Update(column, v)
	if res.Error != nil {
		return nil, relational.Translate(res.Error, "org")
	}
	if res.RowsAffected == 0 {
		return nil, relational.Translate(gorm.ErrRecordNotFound, "org")
	}
	return s.GetOrg(ctx, orgID)
}

func (orgRow) TableName() string { return "orgs" }

type userRow struct {
	ID           string `gorm:"primaryKey"`
	OrgID        string
	Email        string
	PasswordHash string
	Role         string
	CreatedAt    time.Time
}

func (userRow) TableName() string { return "users" }

type keyRow struct {
	ID                  string `gorm:"primaryKey"`
	OrgID               string
	Name                string
	Prefix              string
	Hash                string
	Role                string
	MonthlyBudgetMicros *int64
	AlertThresholds     string
	Tags                string
	RateLimits          string
	CreatedAt           time.Time
	RevokedAt           *time.Time
}

func (keyRow) TableName() string { return "api_keys" }

type ruleRow struct {
	ID    int64 `gorm:"primaryKey;autoIncrement"`
	Ptype string
	V0    string
	V1    string
	V2    string
	V3    string
	V4    string
	V5    string
}

func (ruleRow) TableName() string { return "casbin_rules" }

func keyToRow(k *contracts.APIKey) *keyRow {
	r := &keyRow{ID: k.ID, OrgID: k.OrgID, Name: k.Name, Prefix: k.Prefix, Hash: k.Hash, Role: string(k.Role),
		MonthlyBudgetMicros: k.MonthlyBudgetMicros, AlertThresholds: encodeThresholds(k.AlertThresholds), Tags: string(k.Tags),
		RateLimits: jsonColumn(k.RateLimits), CreatedAt: k.CreatedAt.UTC()}
	if k.RevokedAt != nil {
		t := k.RevokedAt.UTC()
		r.RevokedAt = &t
	}
	return r
}

func keyFromRow(r *keyRow) *contracts.APIKey {
	k := &contracts.APIKey{ID: r.ID, OrgID: r.OrgID, Name: r.Name, Prefix: r.Prefix, Hash: r.Hash, Role: agentmarket.Role(r.Role),
		MonthlyBudgetMicros: r.MonthlyBudgetMicros, AlertThresholds: decodeThresholds(r.AlertThresholds),
		Tags: agentmarket.Tags(r.Tags), RateLimits: fromJSONColumn[agentmarket.RateLimits](r.RateLimits), CreatedAt: r.CreatedAt.UTC()}
	if r.RevokedAt != nil {
		t := r.RevokedAt.UTC()
		k.RevokedAt = &t
	}
	return k
}

// CreateOrg implements contracts.Store.
func (s *Store) CreateOrg(ctx context.Context, o *contracts.Org, u *contracts.User, k *contracts.APIKey) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if u != nil {
			var n int64
			if err := tx.Model(&userRow{}).Where("email = ?", strings.ToLower(u.Email)).Count(&n).Error; err != nil {
				return err
			}
			if n > 0 {
				return agentmarket.Errorf(agentmarket.Conflict, "email_taken", "an account with this e-mail already exists")
			}
		}
		if err := tx.Create(&orgRow{ID: o.ID, Name: o.Name, Platform: o.Platform, CreatedAt: o.CreatedAt.UTC()}).Error; err != nil {
			return err
		}
		if u != nil {
			if err := tx.Create(&userRow{ID: u.ID, OrgID: u.OrgID, Email: strings.ToLower(u.Email), PasswordHash: u.PasswordHash, Role: string(u.Role), CreatedAt: u.CreatedAt.UTC()}).Error; err != nil {
				return err
			}
		}
		if k != nil {
			return tx.Create(keyToRow(k)).Error
		}
		return nil
	})
	return relational.Translate(err, "org")
}

// GetOrg implements contracts.Store.
func (s *Store) GetOrg(ctx context.Context, id string) (*contracts.Org, error) {
	var r orgRow
	if err := s.db.WithContext(ctx).Where("id = ?", id).Take(&r).Error; err != nil {
		return nil, relational.Translate(err, "org")
	}
	return orgFromRow(&r), nil
}

// PlatformOrg implements contracts.Store.
func (s *Store) PlatformOrg(ctx context.Context) (*contracts.Org, error) {
	var r orgRow
	if err := s.db.WithContext(ctx).Where("platform = ?", true).Order("created_at ASC").Take(&r).Error; err != nil {
		return nil, relational.Translate(err, "org")
	}
	return orgFromRow(&r), nil
}

// GetUserByEmail implements contracts.Store.
func (s *Store) GetUserByEmail(ctx context.Context, email string) (*contracts.User, error) {
	var r userRow
	if err := s.db.WithContext(ctx).Where("email = ?", strings.ToLower(email)).Take(&r).Error; err != nil {
		return nil, relational.Translate(err, "user")
	}
	return &contracts.User{ID: r.ID, OrgID: r.OrgID, Email: r.Email, PasswordHash: r.PasswordHash, Role: agentmarket.Role(r.Role), CreatedAt: r.CreatedAt.UTC()}, nil
}

// CreateAPIKey implements contracts.Store.
func (s *Store) CreateAPIKey(ctx context.Context, k *contracts.APIKey) error {
	return relational.Translate(s.db.WithContext(ctx).Create(keyToRow(k)).Error, "api key")
}

// CreateAPIKeyFrom implements contracts.Store. The update's condition on
// the budget read makes two keys minted at once from the same parent take
// the budget once: the second finds it changed.
func (s *Store) CreateAPIKeyFrom(ctx context.Context, k *contracts.APIKey, parentID string, parentBudget int64) error {
	var give int64
	if k.MonthlyBudgetMicros != nil {
		give = *k.MonthlyBudgetMicros
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&keyRow{}).
			Where("id = ? AND org_id = ? AND revoked_at IS NULL AND monthly_budget_micros = ?", parentID, k.OrgID, parentBudget).
			Update("monthly_budget_micros", max(parentBudget-give, 0))
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return agentmarket.Errorf(agentmarket.Conflict, "budget_changed", "the minting key was revoked or its budget changed meanwhile; try again")
		}
		return tx.Create(keyToRow(k)).Error
	})
	return relational.Translate(err, "api key")
}

// APIKeyByHash implements contracts.Store.
func (s *Store) APIKeyByHash(ctx context.Context, hash string) (*contracts.APIKey, error) {
	var r keyRow
	if err := s.db.WithContext(ctx).Where("hash = ?", hash).Take(&r).Error; err != nil {
		return nil, relational.Translate(err, "api key")
	}
	return keyFromRow(&r), nil
}

// ListAPIKeys implements contracts.Store.
func (s *Store) ListAPIKeys(ctx context.Context, orgID string) ([]contracts.APIKey, error) {
	var rows []keyRow
	if err := s.db.WithContext(ctx).Where("org_id = ?", orgID).Order("created_at ASC, id ASC").Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "api key")
	}
	out := make([]contracts.APIKey, len(rows))
	for i := range rows {
		out[i] = *keyFromRow(&rows[i])
	}
	return out, nil
}

// RevokeAPIKey implements contracts.Store.
func (s *Store) RevokeAPIKey(ctx context.Context, orgID, id string, t time.Time) (*contracts.APIKey, error) {
	var out *contracts.APIKey
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var r keyRow
		if err := tx.Where("id = ? AND org_id = ?", id, orgID).Take(&r).Error; err != nil {
			return err
		}
		if r.RevokedAt == nil {
			ut := t.UTC()
			r.RevokedAt = &ut
			if err := tx.Model(&keyRow{}).Where("id = ?", id).Update("revoked_at", ut).Error; err != nil {
				return err
			}
		}
		out = keyFromRow(&r)
		return nil
	})
	return out, relational.Translate(err, "api key")
}

// LoadRules implements contracts.PolicyStore.
func (s *Store) LoadRules(ctx context.Context) ([]contracts.Rule, error) {
	var rows []ruleRow
	if err := s.db.WithContext(ctx).Order("id ASC").Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "policy")
	}
	out := make([]contracts.Rule, len(rows))
	for i, r := range rows {
		out[i] = contracts.Rule{PType: r.Ptype, V: [6]string{r.V0, r.V1, r.V2, r.V3, r.V4, r.V5}}
	}
	return out, nil
}

func ruleToRow(r contracts.Rule) ruleRow {
	return ruleRow{Ptype: r.PType, V0: r.V[0], V1: r.V[1], V2: r.V[2], V3: r.V[3], V4: r.V[4], V5: r.V[5]}
}

// AddRules implements contracts.PolicyStore.
func (s *Store) AddRules(ctx context.Context, rules []contracts.Rule) error {
	if len(rules) == 0 {
		return nil
	}
	return relational.Translate(addRules(s.db.WithContext(ctx), rules), "policy")
}

func addRules(tx *gorm.DB, rules []contracts.Rule) error {
	if len(rules) == 0 {
		return nil
	}
	rows := make([]ruleRow, len(rules))
	for i, r := range rules {
		rows[i] = ruleToRow(r)
	}
	return tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&rows).Error
}

// RemoveRules implements contracts.PolicyStore.
func (s *Store) RemoveRules(ctx context.Context, rules []contracts.Rule) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return removeRules(tx, rules) })
	return relational.Translate(err, "policy")
}

func removeRules(tx *gorm.DB, rules []contracts.Rule) error {
	for _, r := range rules {
		row := ruleToRow(r)
		if err := tx.Where("ptype = ? AND v0 = ? AND v1 = ? AND v2 = ? AND v3 = ? AND v4 = ? AND v5 = ?",
			row.Ptype, row.V0, row.V1, row.V2, row.V3, row.V4, row.V5).Delete(&ruleRow{}).Error; err != nil {
			return err
		}
	}
	return nil
}

// RemoveFilteredRules implements contracts.PolicyStore.
func (s *Store) RemoveFilteredRules(ctx context.Context, ptype string, fieldIndex int, values ...string) error {
	db := s.db.WithContext(ctx).Where("ptype = ?", ptype)
	for i, v := range values {
		idx := fieldIndex + i
		if v == "" || idx > 5 {
			continue
		}
		db = db.Where("v"+string(rune('0'+idx))+" = ?", v)
	}
	return relational.Translate(db.Delete(&ruleRow{}).Error, "policy")
}
