package gormstore

import (
	"context"
	"slices"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

var _ contracts.TaskLife = (*Store)(nil)

type taskEventRow struct {
	Seq        int64 `gorm:"primaryKey;autoIncrement"`
	ID         string
	ListingID  string
	TaskID     string
	Kind       string
	State      string
	OccurredAt time.Time
	Actor      string
	Reason     string
	TraceID    string
}

func (taskEventRow) TableName() string { return "task_events" }

func eventToRow(e contracts.TaskEvent) *taskEventRow {
	if e.ID == "" {
		e.ID = agentmarket.NewID("tev")
	}
	return &taskEventRow{ID: e.ID, ListingID: e.ListingID, TaskID: e.TaskID, Kind: string(e.Kind), State: e.State,
		OccurredAt: e.At.UTC(), Actor: e.Actor, Reason: e.Reason, TraceID: e.TraceID}
}

func eventFromRow(r *taskEventRow) contracts.TaskEvent {
	return contracts.TaskEvent{ID: r.ID, ListingID: r.ListingID, TaskID: r.TaskID, Kind: contracts.TaskEventKind(r.Kind), State: r.State,
		At: r.OccurredAt.UTC(), Actor: r.Actor, Reason: r.Reason, TraceID: r.TraceID}
}

// claimLock makes concurrent PostgreSQL claimers skip the rows another one
// is leasing instead of queueing behind it. SQLite's dialector drops the
// clause: its immediate transactions already admit one writer at a time.
var claimLock = clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"}

// TaskPaused implements contracts.TaskLife.
func (s *Store) TaskPaused(ctx context.Context, e contracts.TaskEvent, cancelAt *time.Time) (bool, error) {
	if err := eventKind(&e, contracts.TaskPaused); err != nil {
		return false, err
	}
	return s.taskChange(ctx, e, "paused_since IS NULL AND ended_at IS NULL",
		map[string]any{"paused_since": e.At.UTC(), "pause_cancel_at": utcPtr(cancelAt)})
}

// TaskResumed implements contracts.TaskLife.
func (s *Store) TaskResumed(ctx context.Context, e contracts.TaskEvent) (bool, error) {
	if err := eventKind(&e, contracts.TaskResumed); err != nil {
		return false, err
	}
	return s.taskChange(ctx, e, "paused_since IS NOT NULL",
		map[string]any{"paused_since": nil, "pause_cancel_at": nil})
}

// TaskEnded implements contracts.TaskLife.
func (s *Store) TaskEnded(ctx context.Context, e contracts.TaskEvent) (bool, error) {
	if err := eventKind(&e, contracts.TaskEnded, contracts.TaskCanceled, contracts.TaskLost); err != nil {
		return false, err
	}
	return s.taskChange(ctx, e, "ended_at IS NULL",
		map[string]any{"ended_at": e.At.UTC(), "paused_since": nil, "pause_cancel_at": nil, "stalled_since": nil})
}

// TaskStalled implements contracts.TaskLife.
func (s *Store) TaskStalled(ctx context.Context, e contracts.TaskEvent) (bool, error) {
	if err := eventKind(&e, contracts.TaskStalled); err != nil {
		return false, err
	}
	return s.taskChange(ctx, e, "stalled_since IS NULL AND ended_at IS NULL", map[string]any{"stalled_since": e.At.UTC()})
}

// TaskProgressed implements contracts.TaskLife.
func (s *Store) TaskProgressed(ctx context.Context, e contracts.TaskEvent) (bool, error) {
	if err := eventKind(&e, contracts.TaskProgressed); err != nil {
		return false, err
	}
	return s.taskChange(ctx, e, "stalled_since IS NOT NULL", map[string]any{"stalled_since": nil})
}

// eventKind gives an event without a kind the first of kinds, and refuses
// one whose kind is not among them.
func eventKind(e *contracts.TaskEvent, kinds ...contracts.TaskEventKind) error {
	if e.Kind == "" {
		e.Kind = kinds[0]
		return nil
	}
	for _, k := range kinds {
		if e.Kind == k {
			return nil
		}
	}
	return agentmarket.Errorf(agentmarket.Invalid, "invalid_task_event", "a %q event cannot record this change", e.Kind)
}

// taskChange applies updates to the task when it is in the state cond
// describes and records e in the same transaction; a task in another state
// is left alone, with no event.
func (s *Store) taskChange(ctx context.Context, e contracts.TaskEvent, cond string, updates map[string]any) (bool, error) {
	changed := false
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		changed = false
		res := tx.Model(&taskOwnerRow{}).Where("listing_id = ? AND task_id = ? AND "+cond, e.ListingID, e.TaskID).Updates(updates)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			var n int64
			if err := tx.Model(&taskOwnerRow{}).Where("listing_id = ? AND task_id = ?", e.ListingID, e.TaskID).Count(&n).Error; err != nil {
				return err
			}
			if n == 0 {
				return gorm.ErrRecordNotFound
			}
			return nil
		}
		changed = true
		return tx.Create(eventToRow(e)).Error
	})
	if err != nil {
		return false, relational.Translate(err, "task")
	}
	return changed, nil
}

// TaskRecord implements contracts.TaskLife.
func (s *Store) TaskRecord(ctx context.Context, listingID, taskID string) (*contracts.TaskRecord, error) {
	var r taskOwnerRow
	var events []taskEventRow
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("listing_id = ? AND task_id = ?", listingID, taskID).Take(&r).Error; err != nil {
			return err
		}
		return tx.Where("listing_id = ? AND task_id = ?", listingID, taskID).Order("occurred_at ASC, seq ASC").Find(&events).Error
	})
	if err != nil {
		return nil, relational.Translate(err, "task")
	}
	rec := &contracts.TaskRecord{TaskBinding: r.binding(), PausedSince: utcPtr(r.PausedSince), PauseCancelAt: utcPtr(r.PauseCancelAt), StalledSince: utcPtr(r.StalledSince),
		EndedAt: utcPtr(r.EndedAt), Events: make([]contracts.TaskEvent, 0, len(events)+1)}
	for i := range events {
		rec.Events = append(rec.Events, eventFromRow(&events[i]))
	}
	if r.EndedAt != nil && r.EndedState != "" {
		// Ended by the call that created it: its end is on its row. The
		// order is by time, as the rows' (ties: the end last).
		e := boundEnd(&r)
		i := len(rec.Events)
		for i > 0 && rec.Events[i-1].At.After(e.At) {
			i--
		}
		rec.Events = slices.Insert(rec.Events, i, e)
	}
	return rec, nil
}

// findTasksSQL finds a task by its id alone without an index on the id
// (migration 0063): the listings that have tasks are walked on the primary
// key (listing_id, task_id), one seek each (a loose index scan), and the id
// is looked up under each. A lookup costs a few seeks per listing with
// tasks; a new task's row costs one random B-tree write instead of two.
const findTasksSQL = `WITH RECURSIVE l(id) AS (
  SELECT MIN(listing_id) FROM task_owners
  UNION ALL
  SELECT (SELECT MIN(listing_id) FROM task_owners WHERE listing_id > l.id) FROM l WHERE l.id IS NOT NULL
)
SELECT * FROM task_owners WHERE listing_id IN (SELECT id FROM l WHERE id IS NOT NULL) AND task_id = ?
ORDER BY created_at DESC, listing_id ASC LIMIT ?`

// FindTasks implements contracts.TaskLife.
func (s *Store) FindTasks(ctx context.Context, taskID string, limit int) ([]contracts.TaskBinding, error) {
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	var rows []taskOwnerRow
	err := s.db.WithContext(ctx).Raw(findTasksSQL, taskID, limit).Scan(&rows).Error
	if err != nil {
		return nil, relational.Translate(err, "task")
	}
	out := make([]contracts.TaskBinding, len(rows))
	for i := range rows {
		out[i] = rows[i].binding()
	}
	return out, nil
}

// ChildTasks implements contracts.TaskLife.
func (s *Store) ChildTasks(ctx context.Context, parentListingID, parentTaskID string) ([]contracts.TaskBinding, error) {
	if parentTaskID == "" {
		return nil, nil // "" marks a task with no parent, not a parent
	}
	var rows []taskOwnerRow
	err := s.db.WithContext(ctx).Where("parent_task_id = ? AND (parent_listing_id = ? OR parent_listing_id = '') AND ended_at IS NULL", parentTaskID, parentListingID).
		Order("created_at ASC, listing_id ASC, task_id ASC").Find(&rows).Error
	if err != nil {
		return nil, relational.Translate(err, "task")
	}
	out := make([]contracts.TaskBinding, len(rows))
	for i := range rows {
		out[i] = rows[i].binding()
	}
	return out, nil
}

// RequestCancel implements contracts.TaskLife.
func (s *Store) RequestCancel(ctx context.Context, listingID, taskID, actor, reason, traceID string, at time.Time) error {
	res := s.db.WithContext(ctx).Model(&taskOwnerRow{}).
		Where("listing_id = ? AND task_id = ? AND ended_at IS NULL AND cancel_requested_at IS NULL", listingID, taskID).
		Updates(map[string]any{"cancel_requested_at": at.UTC(), "cancel_actor": actor, "cancel_reason": reason, "cancel_trace_id": traceID})
	if res.Error != nil {
		return relational.Translate(res.Error, "task")
	}
	if res.RowsAffected == 0 {
		var n int64
		if err := s.db.WithContext(ctx).Model(&taskOwnerRow{}).Where("listing_id = ? AND task_id = ?", listingID, taskID).Count(&n).Error; err != nil {
			return relational.Translate(err, "task")
		}
		if n == 0 {
			return agentmarket.Errorf(agentmarket.NotFound, "task_not_found", "no task %q on listing %q", taskID, listingID)
		}
	}
	return nil
}

// DueTasks implements contracts.TaskLife.
func (s *Store) DueTasks(ctx context.Context, now, leaseUntil time.Time, limit int) ([]contracts.DueTask, error) {
	if limit <= 0 {
		return nil, nil
	}
	now, leaseUntil = now.UTC(), leaseUntil.UTC()
	var out []contracts.DueTask
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		out = nil
		var rows []taskOwnerRow
		err := tx.Clauses(claimLock).
			Where("ended_at IS NULL AND (cancel_requested_at <= ? OR pause_cancel_at <= ? OR deadline_at <= ?) AND (lease_until IS NULL OR lease_until <= ?)", now, now, now, now).
			Order("created_at ASC, listing_id ASC, task_id ASC").Limit(limit).Find(&rows).Error
		if err != nil {
			return err
		}
		for i := range rows {
			r := &rows[i]
			// The same conditions again: only the claimer whose update
			// lands takes the task.
			res := tx.Model(&taskOwnerRow{}).
				Where("listing_id = ? AND task_id = ? AND ended_at IS NULL AND (lease_until IS NULL OR lease_until <= ?)", r.ListingID, r.TaskID, now).
				Updates(map[string]any{"lease_until": leaseUntil, "sweep_attempts": gorm.Expr("sweep_attempts + 1")})
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 0 {
				continue
			}
			why := "deadline"
			switch {
			case r.CancelRequestedAt != nil && !r.CancelRequestedAt.After(now):
				why = "requested"
			case r.PauseCancelAt != nil && !r.PauseCancelAt.After(now):
				why = "pause"
			}
			out = append(out, contracts.DueTask{TaskBinding: r.binding(), Why: why, PausedSince: utcPtr(r.PausedSince),
				CancelActor: r.CancelActor, CancelReason: r.CancelReason, CancelTraceID: r.CancelTraceID, Attempts: r.SweepAttempts + 1})
		}
		return nil
	})
	if err != nil {
		return nil, relational.Translate(err, "task")
	}
	return out, nil
}

// PruneEvents implements contracts.TaskLife.
func (s *Store) PruneEvents(ctx context.Context, before time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Exec(`DELETE FROM task_events WHERE EXISTS (SELECT 1 FROM task_owners o
		WHERE o.listing_id = task_events.listing_id AND o.task_id = task_events.task_id AND o.ended_at IS NOT NULL AND o.ended_at < ?)`, before.UTC())
	if res.Error != nil {
		return 0, relational.Translate(res.Error, "task")
	}
	return res.RowsAffected, nil
}
