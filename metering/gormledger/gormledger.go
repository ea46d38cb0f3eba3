// Package gormledger keeps the per-task billing ledger (what has been
// billed per task so far) in the relational database through GORM, shared
// by every meter instance.
package gormledger

import (
	"context"
	"strings"
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

// raise is what the task's counters become: max(billed, cum) + add, each
// sum saturating (agentmarket.AddSat), so a counter at the top of the
// int64 range stays there instead of wrapping to a negative one, which
// the next call would bill as an increase of almost 2^63.
func raise(old, cum, add metering.Counters) metering.Counters {
	return metering.Counters{
		InputTokens:  agentmarket.AddSat(max(old.InputTokens, cum.InputTokens), add.InputTokens),
		OutputTokens: agentmarket.AddSat(max(old.OutputTokens, cum.OutputTokens), add.OutputTokens),
		ComputeMs:    agentmarket.AddSat(max(old.ComputeMs, cum.ComputeMs), add.ComputeMs),
	}
}

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
	firsts, err := l.insertFirsts(tx, reqs, done)
	if err != nil {
		return err
	}
	for i, r := range reqs {
		if s, ok := done[r.RowID]; ok && r.RowID != "" {
			out[i] = metering.BillResult{Delta: metering.Counters{InputTokens: s.InputTokens, OutputTokens: s.OutputTokens, ComputeMs: s.ComputeMs}, First: s.First}
			continue
		}
		var d metering.Counters
		var first bool
		if firsts[i] {
			d, first = raise(metering.Counters{}, r.Cum, r.Add), true
		} else if d, first, err = l.bill(tx, r.ListingID, r.TaskID, r.Cum, r.Add); err != nil {
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

// firstChunk is the most tasks one statement of insertFirsts inserts.
const firstChunk = 128

// firstSQLs[n] inserts n tasks' first bills unless the tasks are billed,
// and returns the keys of those it inserted. One statement for many rows:
// the pure-Go SQLite driver parses a statement on every execution.
var firstSQLs = func() map[int]string {
	m := make(map[int]string)
	for n := 1; n <= firstChunk; n *= 2 {
		var b strings.Builder
		b.WriteString("INSERT INTO task_usage (listing_id, task_id, input_tokens, output_tokens, compute_ms, updated_at) VALUES ")
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?, ?)")
		}
		b.WriteString(" ON CONFLICT (listing_id, task_id) DO NOTHING RETURNING listing_id, task_id")
		m[n] = b.String()
	}
	return m
}()

// insertFirsts bills, in a few statements, the first request of each task
// of the batch that is not settled already, as the task's first bill when
// the ledger has no row for it: firsts[i] says request i was billed so
// (its answer is raise(0, cum, add), first). The others are billed one by
// one, in order, by bill.
func (l *Ledger) insertFirsts(tx *gorm.DB, reqs []metering.BillRequest, done map[string]settledRow) ([]bool, error) {
	type key struct{ listing, task string }
	firsts := make([]bool, len(reqs))
	seen := make(map[key]bool, len(reqs))
	var idx []int
	for i, r := range reqs {
		k := key{r.ListingID, r.TaskID}
		if _, ok := done[r.RowID]; (ok && r.RowID != "") || seen[k] {
			continue
		}
		seen[k] = true
		idx = append(idx, i)
	}
	inserted := make(map[key]bool, len(idx))
	now := l.clock.Now()
	for start := 0; start < len(idx); {
		n := firstChunk
		for n > len(idx)-start {
			n /= 2
		}
		args := make([]any, 0, 6*n)
		for _, i := range idx[start : start+n] {
			r := reqs[i]
			c := raise(metering.Counters{}, r.Cum, r.Add)
			args = append(args, r.ListingID, r.TaskID, c.InputTokens, c.OutputTokens, c.ComputeMs, now)
		}
		rows, err := tx.Raw(firstSQLs[n], args...).Rows()
		if err != nil {
			return nil, relational.Translate(err, "task usage")
		}
		for rows.Next() {
			var k key
			if err := rows.Scan(&k.listing, &k.task); err != nil {
				rows.Close()
				return nil, relational.Translate(err, "task usage")
			}
			inserted[k] = true
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, relational.Translate(err, "task usage")
		}
		start += n
	}
	for _, i := range idx {
		firsts[i] = inserted[key{reqs[i].ListingID, reqs[i].TaskID}]
	}
	return firsts, nil
}

// PruneSettled forgets the answers given to rows settled before before: a
// row is settled again only while it waits in a meter's spool, so these
// are kept well past any spool's backlog (the meter keeps them 30 days).
func (l *Ledger) PruneSettled(ctx context.Context, before time.Time) (int64, error) {
	res := l.db.WithContext(ctx).Where("settled_at < ?", before.UTC()).Delete(&settledRow{})
	return res.RowsAffected, relational.Translate(res.Error, "settled usage")
}

func (l *Ledger) bill(db *gorm.DB, listingID, taskID string, cum, add metering.Counters) (metering.Counters, bool, error) {
	// Most calls bill a task for the first time: try the insert first, so
	// they take one statement instead of two.
	first := raise(metering.Counters{}, cum, add)
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
		next := raise(old, cum, add)
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
