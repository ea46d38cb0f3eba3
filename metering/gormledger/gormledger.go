// Package gormledger keeps the per-task billing ledger (what has been
// billed per task so far) in the relational database through GORM, shared
// by every meter instance. A bound task's counters live on its binding
// (task_owners, contracts.TaskBilled: one row per task); keys without a
// binding (a bare message's "call:<row id>") in task_usage.
package gormledger

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

// Ledger implements metering.Ledger.
type Ledger struct {
	db    *gorm.DB
	clock agentmarket.Clock
}

var _ metering.BatchLedger = (*Ledger)(nil)

// New returns a ledger over db (migrated).
func New(db *gorm.DB, clock agentmarket.Clock) *Ledger { return &Ledger{db: db, clock: clock} }

type row struct {
	ListingID    string `gorm:"primaryKey"`
	TaskID       string `gorm:"primaryKey"`
	InputTokens  int64
	OutputTokens int64
	ComputeMs    int64
	UpdatedAt    time.Time
}

func (row) TableName() string { return "task_usage" }

// settledRow is the answer the ledger gave a usage row, kept so that the
// row settled again (a replay after a crash, a second settling) gets the
// same answer and bills nothing more.
type settledRow struct {
	RowID        string `gorm:"primaryKey"`
	InputTokens  int64
	OutputTokens int64
	ComputeMs    int64
	First        bool
	SettledAt    time.Time
}

func (settledRow) TableName() string { return "settled_bills" }

// Bill implements metering.Ledger. It is a compare-and-swap on the task's
// row, retried on conflict, so concurrent meters never bill an increase
// twice and the SQL is the same on PostgreSQL and SQLite.
func (l *Ledger) Bill(ctx context.Context, listingID, taskID string, cum, add metering.Counters) (metering.Counters, bool, error) {
	return l.bill(l.db.WithContext(ctx), listingID, taskID, cum, add)
}

// BillMany implements metering.BatchLedger: the whole batch in one
// transaction (one commit instead of one per call). A request with a
// RowID the ledger settled already gets that answer again; one it settles
// now has its answer recorded in the same transaction (settled_bills), so
// a row is billed at most once however often it is settled. If the
// transaction fails, each request is billed in a transaction of its own
// so one bad request cannot fail the others.
func (l *Ledger) BillMany(ctx context.Context, reqs []metering.BillRequest) []metering.BillResult {
	out := make([]metering.BillResult, len(reqs))
	err := l.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return l.billMany(tx, reqs, out)
	})
	if err == nil {
		return out
	}
	for i := range reqs {
		err := l.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			return l.billMany(tx, reqs[i:i+1], out[i:i+1])
		})
		if err != nil {
			out[i] = metering.BillResult{Err: err}
		}
	}
	return out
}

// settledChunk bounds the ids of one lookup of settled rows.
const settledChunk = 500

// billMany bills reqs in tx, each RowID once, and fills out.
func (l *Ledger) billMany(tx *gorm.DB, reqs []metering.BillRequest, out []metering.BillResult) error {
	var ids []string
	for _, r := range reqs {
		if r.RowID != "" {
			ids = append(ids, r.RowID)
		}
	}
	done := make(map[string]settledRow)
	for start := 0; start < len(ids); start += settledChunk {
		var found []settledRow
		if err := tx.Where("row_id IN ?", ids[start:min(start+settledChunk, len(ids))]).Find(&found).Error; err != nil {
			return relational.Translate(err, "settled usage")
		}
		for _, s := range found {
			done[s.RowID] = s
		}
	}
	var settled []settledRow
	now := l.clock.Now()
	for i, r := range reqs {
		if s, ok := done[r.RowID]; ok && r.RowID != "" {
			out[i] = metering.BillResult{Delta: metering.Counters{InputTokens: s.InputTokens, OutputTokens: s.OutputTokens, ComputeMs: s.ComputeMs}, First: s.First}
			continue
		}
		d, first, err := l.bill(tx, r.ListingID, r.TaskID, r.Cum, r.Add)
		if err != nil {
			return err
		}
		out[i] = metering.BillResult{Delta: d, First: first}
		if r.RowID != "" {
			s := settledRow{RowID: r.RowID, InputTokens: d.InputTokens, OutputTokens: d.OutputTokens, ComputeMs: d.ComputeMs, First: first, SettledAt: now}
			done[r.RowID] = s // the same row twice in one batch
			settled = append(settled, s)
		}
	}
	if len(settled) == 0 {
		return nil
	}
	return insertSettled(tx, settled)
}

// insertSettled records settled rows: every usage row is settled once,
// and GORM's batched create cost half as much again as the bill itself.
func insertSettled(tx *gorm.DB, settled []settledRow) error {
	rows := make([][]any, len(settled))
	for i, r := range settled {
		rows[i] = []any{r.RowID, r.InputTokens, r.OutputTokens, r.ComputeMs, r.First, r.SettledAt.UTC()}
	}
	err := relational.InsertRows(tx, "settled_bills", []string{"row_id", "input_tokens", "output_tokens", "compute_ms", "first", "settled_at"}, rows, 128)
	if err != nil {
		return relational.Translate(err, "settled usage")
	}
	return nil
}

// PruneSettled forgets the answers given to rows settled before before: a
// row is settled again only while it waits in a meter's spool, so these
// are kept well past any spool's backlog (the meter keeps them 30 days).
func (l *Ledger) PruneSettled(ctx context.Context, before time.Time) (int64, error) {
	res := l.db.WithContext(ctx).Where("settled_at < ?", before.UTC()).Delete(&settledRow{})
	return res.RowsAffected, relational.Translate(res.Error, "settled usage")
}

func (l *Ledger) bill(db *gorm.DB, listingID, taskID string, cum, add metering.Counters) (metering.Counters, bool, error) {
	d, first, bound, err := l.billBound(db, listingID, taskID, cum, add)
	if err != nil || bound {
		return d, first, err
	}
	return l.billUnbound(db, listingID, taskID, cum, add)
}

// billedRow is what a bound task has been billed (task_owners).
type billedRow struct {
	BilledInputTokens  int64
	BilledOutputTokens int64
	BilledComputeMs    int64
	BilledAt           *time.Time
}

// billBound bills a task bound in task_owners, where its counters live
// (contracts.TaskBilled): a compare-and-swap on its row, retried on
// conflict. bound is false when the task has no binding there.
func (l *Ledger) billBound(db *gorm.DB, listingID, taskID string, cum, add metering.Counters) (_ metering.Counters, first, bound bool, _ error) {
	for attempt := 0; attempt < 50; attempt++ {
		var r billedRow
		res := db.Table("task_owners").Select("billed_input_tokens, billed_output_tokens, billed_compute_ms, billed_at").
			Where("listing_id = ? AND task_id = ?", listingID, taskID).Limit(1).Find(&r)
		if res.Error != nil {
			return metering.Counters{}, false, false, relational.Translate(res.Error, "task usage")
		}
		if res.RowsAffected == 0 {
			return metering.Counters{}, false, false, nil
		}
		first := r.BilledAt == nil
		old := metering.Counters{InputTokens: r.BilledInputTokens, OutputTokens: r.BilledOutputTokens, ComputeMs: r.BilledComputeMs}
		next := old.Raise(cum, add)
		if next == old && !first {
			return metering.Counters{}, false, true, nil
		}
		q := db.Table("task_owners").Where("listing_id = ? AND task_id = ? AND billed_input_tokens = ? AND billed_output_tokens = ? AND billed_compute_ms = ?",
			listingID, taskID, old.InputTokens, old.OutputTokens, old.ComputeMs)
		if first {
			q = q.Where("billed_at IS NULL")
		} else {
			q = q.Where("billed_at IS NOT NULL")
		}
		res = q.Updates(map[string]any{"billed_input_tokens": next.InputTokens, "billed_output_tokens": next.OutputTokens,
			"billed_compute_ms": next.ComputeMs, "billed_at": gorm.Expr("COALESCE(billed_at, ?)", l.clock.Now().UTC())})
		if res.Error != nil {
			return metering.Counters{}, false, true, relational.Translate(res.Error, "task usage")
		}
		if res.RowsAffected == 1 {
			return next.Sub(old), first, true, nil
		}
		// Another meter moved the row first: read it again.
	}
	return metering.Counters{}, false, true, agentmarket.Errorf(agentmarket.Unavailable, "ledger_contention", "the task usage ledger is too busy")
}

// billUnbound bills a key with no binding: a bare message's call
// ("call:<row id>"), or a task the meter never bound. Such keys keep
// their counters in task_usage.
func (l *Ledger) billUnbound(db *gorm.DB, listingID, taskID string, cum, add metering.Counters) (metering.Counters, bool, error) {
	first := metering.Counters{}.Raise(cum, add)
	res := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&row{ListingID: listingID, TaskID: taskID,
		InputTokens: first.InputTokens, OutputTokens: first.OutputTokens, ComputeMs: first.ComputeMs, UpdatedAt: l.clock.Now()})
	if res.Error != nil {
		return metering.Counters{}, false, relational.Translate(res.Error, "task usage")
	}
	if res.RowsAffected == 1 {
		return first, true, nil
	}
	for attempt := 0; attempt < 50; attempt++ {
		var r row
		if err := db.Where("listing_id = ? AND task_id = ?", listingID, taskID).Take(&r).Error; err != nil {
			return metering.Counters{}, false, relational.Translate(err, "task usage")
		}
		old := metering.Counters{InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, ComputeMs: r.ComputeMs}
		next := old.Raise(cum, add)
		if next == old {
			return metering.Counters{}, false, nil
		}
		res := db.Model(&row{}).
			Where("listing_id = ? AND task_id = ? AND input_tokens = ? AND output_tokens = ? AND compute_ms = ?",
				listingID, taskID, old.InputTokens, old.OutputTokens, old.ComputeMs).
			Updates(map[string]any{"input_tokens": next.InputTokens, "output_tokens": next.OutputTokens,
				"compute_ms": next.ComputeMs, "updated_at": l.clock.Now()})
		if res.Error != nil {
			return metering.Counters{}, false, relational.Translate(res.Error, "task usage")
		}
		if res.RowsAffected == 1 {
			return next.Sub(old), false, nil
		}
		// Another meter moved the row first: read it again.
	}
	return metering.Counters{}, false, agentmarket.Errorf(agentmarket.Unavailable, "ledger_contention", "the task usage ledger is too busy")
}
