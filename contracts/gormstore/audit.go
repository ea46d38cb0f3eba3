package gormstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/agentmarket/agentmarket/contracts/audit"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

var _ audit.Store = (*Store)(nil)

type auditRow struct {
	Seq         int64 `gorm:"primaryKey;autoIncrement:false"`
	At          time.Time
	ActorOrgID  string
	ActorUserID string
	ActorKeyID  string
	ActorRole   string
	Operator    bool
	ActorIP     string `gorm:"column:actor_ip"`
	Via         string
	Action      string
	ObjectType  string
	ObjectID    string
	OrgID       string
	BeforeJSON  string `gorm:"column:before_json"`
	AfterJSON   string `gorm:"column:after_json"`
	RequestID   string
	PrevHash    string
	Hash        string
}

func (auditRow) TableName() string { return "audit_entries" }

func auditToRow(e *audit.Entry) *auditRow {
	return &auditRow{Seq: e.Seq, At: e.At.UTC(), ActorOrgID: e.ActorOrgID, ActorUserID: e.ActorUserID, ActorKeyID: e.ActorKeyID,
		ActorRole: e.ActorRole, Operator: e.Operator, ActorIP: e.ActorIP, Via: e.Via, Action: e.Action, ObjectType: e.ObjectType,
		ObjectID: e.ObjectID, OrgID: e.OrgID, BeforeJSON: rawOrNull(e.Before), AfterJSON: rawOrNull(e.After), RequestID: e.RequestID,
		PrevHash: e.PrevHash, Hash: e.Hash}
}

func rawOrNull(b json.RawMessage) string {
	if len(b) == 0 {
		return "null"
	}
	return string(b)
}

func auditFromRow(r *auditRow) audit.Entry {
	return audit.Entry{Seq: r.Seq, At: r.At.UTC(), ActorOrgID: r.ActorOrgID, ActorUserID: r.ActorUserID, ActorKeyID: r.ActorKeyID,
		ActorRole: r.ActorRole, Operator: r.Operator, ActorIP: r.ActorIP, Via: r.Via, Action: r.Action, ObjectType: r.ObjectType,
		ObjectID: r.ObjectID, OrgID: r.OrgID, Before: json.RawMessage(r.BeforeJSON), After: json.RawMessage(r.AfterJSON),
		RequestID: r.RequestID, PrevHash: r.PrevHash, Hash: r.Hash}
}

type auditHeadRow struct {
	ID   int `gorm:"primaryKey"`
	Seq  int64
	Hash string
}

func (auditHeadRow) TableName() string { return "audit_chain_head" }

type checkpointRow struct {
	Seq   int64 `gorm:"primaryKey;autoIncrement:false"`
	Hash  string
	At    time.Time
	Prune bool
	KeyID string
	JWS   string `gorm:"column:jws"`
}

func (checkpointRow) TableName() string { return "audit_checkpoints" }

// AppendAudit implements audit.Store. The transaction first updates the
// head row to itself: that takes the row's lock on PostgreSQL and the
// database's write lock on SQLite before anything is read, so a second
// appender (in this process or another) waits, then reads the head the
// first one left.
func (s *Store) AppendAudit(ctx context.Context, next func(audit.Head) (*audit.Entry, error)) (*audit.Entry, error) {
	var out *audit.Entry
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("UPDATE audit_chain_head SET seq = seq WHERE id = 1").Error; err != nil {
			return err
		}
		var h auditHeadRow
		if err := tx.Take(&h, 1).Error; err != nil {
			return err
		}
		e, err := next(audit.Head{Seq: h.Seq, Hash: h.Hash})
		if err != nil {
			return err
		}
		if e.Seq != h.Seq+1 {
			return fmt.Errorf("audit entry %d does not follow the head %d", e.Seq, h.Seq)
		}
		if err := tx.Create(auditToRow(e)).Error; err != nil {
			return err
		}
		if err := tx.Model(&auditHeadRow{}).Where("id = 1").Updates(map[string]any{"seq": e.Seq, "hash": e.Hash}).Error; err != nil {
			return err
		}
		out = e
		return nil
	})
	if err != nil {
		return nil, relational.Translate(err, "audit entry")
	}
	return out, nil
}

// AuditHead implements audit.Store.
func (s *Store) AuditHead(ctx context.Context) (audit.Head, error) {
	var h auditHeadRow
	if err := s.db.WithContext(ctx).Take(&h, 1).Error; err != nil {
		return audit.Head{}, relational.Translate(err, "audit head")
	}
	return audit.Head{Seq: h.Seq, Hash: h.Hash}, nil
}

// AuditEntries implements audit.Store.
func (s *Store) AuditEntries(ctx context.Context, f audit.Filter) ([]audit.Entry, error) {
	q := s.db.WithContext(ctx).Model(&auditRow{})
	if f.Actor != "" {
		q = q.Where("actor_org_id = ? OR actor_user_id = ? OR actor_key_id = ?", f.Actor, f.Actor, f.Actor)
	}
	if prefix, ok := strings.CutSuffix(f.Action, "."); ok {
		q = q.Where("action LIKE ? ESCAPE '\\'", likeEscape(prefix)+".%")
	} else if f.Action != "" {
		q = q.Where("action = ?", f.Action)
	}
	if f.ObjectType != "" {
		q = q.Where("object_type = ?", f.ObjectType)
	}
	if f.ObjectID != "" {
		q = q.Where("object_id = ?", f.ObjectID)
	}
	if !f.From.IsZero() {
		q = q.Where("at >= ?", f.From.UTC())
	}
	if !f.To.IsZero() {
		q = q.Where("at < ?", f.To.UTC())
	}
	if f.Org != "" {
		q = q.Where("org_id = ? OR actor_org_id = ?", f.Org, f.Org)
	}
	if f.Before > 0 {
		q = q.Where("seq < ?", f.Before)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = audit.DefaultLimit
	}
	var rows []auditRow
	if err := q.Order("seq DESC").Limit(limit).Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "audit entry")
	}
	return auditEntries(rows), nil
}

func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

func auditEntries(rows []auditRow) []audit.Entry {
	out := make([]audit.Entry, len(rows))
	for i := range rows {
		out[i] = auditFromRow(&rows[i])
	}
	return out
}

// WalkAudit implements audit.Store.
func (s *Store) WalkAudit(ctx context.Context, after int64, limit int) ([]audit.Entry, error) {
	var rows []auditRow
	if err := s.db.WithContext(ctx).Where("seq > ?", after).Order("seq").Limit(limit).Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "audit entry")
	}
	return auditEntries(rows), nil
}

// LastAuditBefore implements audit.Store.
func (s *Store) LastAuditBefore(ctx context.Context, t time.Time) (int64, error) {
	var seq *int64
	if err := s.db.WithContext(ctx).Model(&auditRow{}).Where("at < ?", t.UTC()).Select("MAX(seq)").Scan(&seq).Error; err != nil {
		return 0, relational.Translate(err, "audit entry")
	}
	if seq == nil {
		return 0, nil
	}
	return *seq, nil
}

// AddCheckpoint implements audit.Store.
func (s *Store) AddCheckpoint(ctx context.Context, c audit.Checkpoint) error {
	row := &checkpointRow{Seq: c.Seq, Hash: c.Hash, At: c.At.UTC(), Prune: c.Prune, KeyID: c.KeyID, JWS: c.JWS}
	conflict := clause.OnConflict{Columns: []clause.Column{{Name: "seq"}}, DoNothing: true}
	if c.Prune {
		conflict = clause.OnConflict{Columns: []clause.Column{{Name: "seq"}}, DoUpdates: clause.AssignmentColumns([]string{"hash", "at", "prune", "key_id", "jws"})}
	}
	err := s.db.WithContext(ctx).Clauses(conflict).Create(row).Error
	return relational.Translate(err, "audit checkpoint")
}

// Checkpoints implements audit.Store.
func (s *Store) Checkpoints(ctx context.Context) ([]audit.Checkpoint, error) {
	var rows []checkpointRow
	if err := s.db.WithContext(ctx).Order("seq").Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "audit checkpoint")
	}
	out := make([]audit.Checkpoint, len(rows))
	for i, r := range rows {
		out[i] = audit.Checkpoint{Seq: r.Seq, Hash: r.Hash, At: r.At.UTC(), Prune: r.Prune, KeyID: r.KeyID, JWS: r.JWS}
	}
	return out, nil
}

// PruneAudit implements audit.Store.
func (s *Store) PruneAudit(ctx context.Context, through int64) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var anchors int64
		if err := tx.Model(&checkpointRow{}).Where("seq = ?", through).Count(&anchors).Error; err != nil {
			return err
		}
		if anchors == 0 {
			return fmt.Errorf("no audit checkpoint at %d to anchor the prune", through)
		}
		res := tx.Where("seq <= ?", through).Delete(&auditRow{})
		if res.Error != nil {
			return res.Error
		}
		n = res.RowsAffected
		return tx.Where("seq < ?", through).Delete(&checkpointRow{}).Error
	})
	if err != nil {
		return 0, relational.Translate(err, "audit entry")
	}
	return n, nil
}
