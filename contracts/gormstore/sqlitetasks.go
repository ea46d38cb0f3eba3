package gormstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/migrations/relational"
	"github.com/agentmarket/agentmarket/migrations/relational/sqlitec"
)

// On a SQLite file the meter's projections write a task's row through
// SQLite's C API (migrations/relational/sqlitec) rather than the
// database/sql driver, which prepares every statement again at each
// execution and binds parameters in quadratic time: about half of what a
// binding cost (BenchmarkProjectionWrites). The rows are the same, read
// back by GORM as before.

// taskWriter is BindTasks' own connection to the SQLite file.
type taskWriter struct {
	mu                sync.Mutex
	c                 *sqlitec.Conn
	ins, owner, raise sqlitec.Stmt
}

// insertTaskSQL inserts one binding unless the task is bound: Changes
// then says whether it did.
var insertTaskSQL = "INSERT INTO task_owners (" + bindCols + ") VALUES (?" + strings.Repeat(", ?", bindParams-1) +
	") ON CONFLICT (listing_id, task_id) DO NOTHING"

// errNoOwner is a binding the insert found and the read did not.
var errNoOwner = errors.New("a task bound a moment ago is gone")

// sqliteTimeFormat is how the database/sql driver (glebarez/go-sqlite)
// writes a time, which GORM reads back and queries compare as text: the
// writer writes the same.
const sqliteTimeFormat = "2006-01-02 15:04:05.999999999-07:00"

// taskWriterCheckpoint lets the WAL grow to 10,000 pages (40 MiB) before
// the writer's commit copies it into the database file, where SQLite's
// default is 1,000. A new task's row dirties a page at random in the
// primary key; between two checkpoints a page is written to the file once
// however many commits changed it, so a longer interval writes and fsyncs
// fewer pages per task (measured on 100k-160k random ids, batches of 256:
// 26.8, 26.1, 25.9 -> 21.8, 20.8, 19.9 us of CPU a row, alternating).
const taskWriterCheckpoint = "wal_autocheckpoint(10000)"

// WriteTasksDirect has the store bind tasks (BindTasks) through its own
// connection to the SQLite file at path, over SQLite's C API: for the
// meter's projections on the embedded database. Close releases it.
func (s *Store) WriteTasksDirect(path string) error {
	c, err := sqlitec.Open(path, slices.Concat(relational.SQLitePragmas, []string{taskWriterCheckpoint}))
	if err != nil {
		return err
	}
	w := &taskWriter{c: c}
	for _, st := range []struct {
		stmt *sqlitec.Stmt
		sql  string
	}{
		{&w.ins, insertTaskSQL},
		{&w.owner, "SELECT org_id FROM task_owners WHERE listing_id = ? AND task_id = ?"},
		{&w.raise, raiseBilledSQL},
	} {
		if *st.stmt, err = c.Prepare(st.sql); err != nil {
			c.Close()
			return err
		}
	}
	s.tasks = w
	return nil
}

// Close releases the store's own connection, if it has one.
func (s *Store) Close() error {
	if s.tasks == nil {
		return nil
	}
	s.tasks.mu.Lock()
	defer s.tasks.mu.Unlock()
	return s.tasks.c.Close()
}

// direct reports whether the writer can bind ts: every end a binding
// carries is one its row keeps (endOnBinding); the others take the
// driver's path, which writes their event rows.
func (w *taskWriter) direct(ts []contracts.TaskBinding) bool {
	for i := range ts {
		if e := ts[i].Ended; e != nil && !endOnBinding(e) {
			return false
		}
	}
	return true
}

// bind binds ts in one transaction, as bindMany does: a new binding is
// inserted with its bill and end; a known one's owner is read back, and
// its bill raised when it is the same org's.
func (w *taskWriter) bind(ctx context.Context, ts []contracts.TaskBinding, owners []string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return relational.Translate(w.c.Tx(func() error { return w.bindAll(ctx, ts, owners) }), "task")
}

// bindAll is bind's work, in its transaction.
func (w *taskWriter) bindAll(ctx context.Context, ts []contracts.TaskBinding, owners []string) error {
	c := w.c
	for i := range ts {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		t := &ts[i]
		if err := w.bindRow(t); err != nil {
			return err
		}
		if err := c.Step(w.ins); err != nil {
			return err
		}
		if c.Changes() == 1 {
			owners[i] = t.OrgID
			continue
		}
		owner, err := w.ownerOf(t.ListingID, t.TaskID)
		if err != nil {
			return err
		}
		owners[i] = owner
		if t.Billed != nil && owner == t.OrgID {
			if err := w.raiseBill(t); err != nil {
				return err
			}
		}
	}
	return nil
}

// bindRow binds t to the insert's parameters, in bindCols' order.
func (w *taskWriter) bindRow(t *contracts.TaskBinding) error {
	c, s := w.c, w.ins
	var endState, endTrace string
	if t.Ended != nil {
		endState, endTrace = t.Ended.State, t.Ended.TraceID
	}
	if err := c.Reserve(len(t.ListingID) + len(t.TaskID) + len(t.OrgID) + len(t.ContractID) + len(t.ContextID) + len(t.ParentListingID) +
		len(t.ParentTaskID) + len(endState) + len(endTrace) + len(t.Endpoint) + len(t.KeyID) + 4*len(sqliteTimeFormat)); err != nil {
		return err
	}
	c.BindText(s, 1, t.ListingID)
	c.BindText(s, 2, t.TaskID)
	c.BindText(s, 3, t.OrgID)
	c.BindText(s, 4, t.ContractID)
	c.BindText(s, 5, t.ContextID)
	c.BindText(s, 6, t.CreatedAt.UTC().Format(sqliteTimeFormat))
	c.BindText(s, 7, t.ParentListingID)
	c.BindText(s, 8, t.ParentTaskID)
	w.bindTime(9, t.DeadlineAt)
	if t.Ended != nil {
		w.bindTime(10, &t.Ended.At)
	} else {
		c.BindNull(s, 10)
	}
	c.BindText(s, 11, endState)
	c.BindText(s, 12, endTrace)
	var billed contracts.TaskBilled
	if t.Billed != nil {
		billed = *t.Billed
	}
	c.BindInt(s, 13, billed.InputTokens)
	c.BindInt(s, 14, billed.OutputTokens)
	c.BindInt(s, 15, billed.ComputeMs)
	if t.Billed != nil {
		w.bindTime(16, &t.Billed.At)
	} else {
		c.BindNull(s, 16)
	}
	c.BindText(s, 17, t.Endpoint)
	c.BindText(s, 18, t.KeyID)
	return c.Bound()
}

// bindTime binds an optional time to the insert's parameter i.
func (w *taskWriter) bindTime(i int32, t *time.Time) {
	if t == nil {
		w.c.BindNull(w.ins, i)
		return
	}
	w.c.BindText(w.ins, i, t.UTC().Format(sqliteTimeFormat))
}

// ownerOf reads a bound task's owner.
func (w *taskWriter) ownerOf(listingID, taskID string) (string, error) {
	c, s := w.c, w.owner
	if err := c.Reserve(len(listingID) + len(taskID)); err != nil {
		return "", err
	}
	c.BindText(s, 1, listingID)
	c.BindText(s, 2, taskID)
	if err := c.Bound(); err != nil {
		return "", err
	}
	ok, err := c.Row(s)
	if err != nil {
		return "", err
	}
	defer c.Reset(s)
	if !ok {
		return "", errNoOwner
	}
	return c.ColumnText(s, 0), nil
}

// raiseBill raises a known task's bill (raiseBilledSQL).
func (w *taskWriter) raiseBill(t *contracts.TaskBinding) error {
	c, s := w.c, w.raise
	b := t.Billed
	if err := c.Reserve(len(t.ListingID) + len(t.TaskID) + len(sqliteTimeFormat)); err != nil {
		return err
	}
	c.BindInt(s, 1, b.InputTokens)
	c.BindInt(s, 2, b.InputTokens)
	c.BindInt(s, 3, b.OutputTokens)
	c.BindInt(s, 4, b.OutputTokens)
	c.BindInt(s, 5, b.ComputeMs)
	c.BindInt(s, 6, b.ComputeMs)
	c.BindText(s, 7, b.At.UTC().Format(sqliteTimeFormat))
	c.BindText(s, 8, t.ListingID)
	c.BindText(s, 9, t.TaskID)
	if err := c.Bound(); err != nil {
		return err
	}
	return c.Step(s)
}
