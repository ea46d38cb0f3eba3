package gormstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

var (
	_ contracts.ContractStore   = (*Store)(nil)
	_ contracts.BatchTaskOwners = (*Store)(nil)
)

type contractRow struct {
	ID                  string `gorm:"primaryKey"`
	BuyerOrgID          string
	ListingID           string
	SellerOrgID         string
	PlanVersion         int
	Status              string
	MonthlyBudgetMicros *int64
	CreatedAt           time.Time
	UpdatedAt           time.Time
	CanceledAt          *time.Time
	PastDueAt           *time.Time
	// The time budgets in milliseconds, 0 for none: a budget finer than a
	// millisecond means nothing to a network call.
	RequestTimeoutMs int64
	TaskTimeoutMs    int64
	MaxPauseMs       int64
	TrialEnd         *time.Time
	CancelAtTrialEnd bool
	OfferID          string
	CancelAt         *time.Time
	AlertThresholds  string
	Tags             string
	RateLimits       string
	SessionCaps      string
	Fallbacks        string // listing ids, comma-separated
}

func (contractRow) TableName() string { return "contracts" }

func contractFromRow(r *contractRow) *contracts.Contract {
	c := &contracts.Contract{ID: r.ID, BuyerOrgID: r.BuyerOrgID, ListingID: r.ListingID, SellerOrgID: r.SellerOrgID,
		PlanVersion: r.PlanVersion, Status: contracts.ContractStatus(r.Status), MonthlyBudgetMicros: r.MonthlyBudgetMicros,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		Budgets: contracts.TimeBudgets{RequestTimeout: time.Duration(r.RequestTimeoutMs) * time.Millisecond,
			TaskTimeout: time.Duration(r.TaskTimeoutMs) * time.Millisecond, MaxPause: time.Duration(r.MaxPauseMs) * time.Millisecond}}
	if r.CanceledAt != nil {
		t := r.CanceledAt.UTC()
		c.CanceledAt = &t
	}
	if r.PastDueAt != nil {
		t := r.PastDueAt.UTC()
		c.PastDueAt = &t
	}
	c.TrialEnd, c.CancelAtTrialEnd, c.OfferID, c.CancelAt = utcPtr(r.TrialEnd), r.CancelAtTrialEnd, r.OfferID, utcPtr(r.CancelAt)
	c.AlertThresholds, c.Tags = decodeThresholds(r.AlertThresholds), agentmarket.Tags(r.Tags)
	c.RateLimits, c.SessionCaps = fromJSONColumn[agentmarket.RateLimits](r.RateLimits), fromJSONColumn[contracts.SessionCaps](r.SessionCaps)
	if r.Fallbacks != "" {
		c.Fallbacks = strings.Split(r.Fallbacks, ",")
	}
	return c
}

// CreateContract implements contracts.ContractStore.
func (s *Store) CreateContract(ctx context.Context, c *contracts.Contract, grant []contracts.Rule) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		row := &contractRow{ID: c.ID, BuyerOrgID: c.BuyerOrgID, ListingID: c.ListingID, SellerOrgID: c.SellerOrgID,
			PlanVersion: c.PlanVersion, Status: string(c.Status), MonthlyBudgetMicros: c.MonthlyBudgetMicros,
			CreatedAt: c.CreatedAt.UTC(), UpdatedAt: c.UpdatedAt.UTC(),
			RequestTimeoutMs: c.Budgets.RequestTimeout.Milliseconds(), TaskTimeoutMs: c.Budgets.TaskTimeout.Milliseconds(),
			MaxPauseMs: c.Budgets.MaxPause.Milliseconds(), TrialEnd: utcPtr(c.TrialEnd), CancelAtTrialEnd: c.CancelAtTrialEnd,
			OfferID: c.OfferID, AlertThresholds: encodeThresholds(c.AlertThresholds), Tags: string(c.Tags),
			RateLimits: jsonColumn(c.RateLimits), SessionCaps: jsonColumn(c.SessionCaps), Fallbacks: strings.Join(c.Fallbacks, ",")}
		if err := tx.Create(row).Error; err != nil {
			return err
		}
		return addRules(tx, grant)
	})
	return relational.Translate(err, "contract")
}

// GetContract implements contracts.ContractStore.
func (s *Store) GetContract(ctx context.Context, id string) (*contracts.Contract, error) {
	var r contractRow
	if err := s.db.WithContext(ctx).Where("id = ?", id).Take(&r).Error; err != nil {
		return nil, notFoundAs(relational.Translate(err, "subscription"), "subscription_not_found", "no subscription %q", id)
	}
	return contractFromRow(&r), nil
}

// OpenContract implements contracts.ContractStore.
func (s *Store) OpenContract(ctx context.Context, buyerOrgID, listingID string) (*contracts.Contract, error) {
	var r contractRow
	err := s.db.WithContext(ctx).Where("buyer_org_id = ? AND listing_id = ? AND status <> ?", buyerOrgID, listingID, string(contracts.ContractCanceled)).
		Take(&r).Error
	if err != nil {
		return nil, notFoundAs(relational.Translate(err, "contract"), "not_subscribed", "no subscription to listing %q", listingID)
	}
	return contractFromRow(&r), nil
}

// ListContracts implements contracts.ContractStore.
func (s *Store) ListContracts(ctx context.Context, buyerOrgID string) ([]contracts.Contract, error) {
	var rows []contractRow
	if err := s.db.WithContext(ctx).Where("buyer_org_id = ?", buyerOrgID).Order("created_at ASC, id ASC").Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "contract")
	}
	out := make([]contracts.Contract, len(rows))
	for i := range rows {
		out[i] = *contractFromRow(&rows[i])
	}
	return out, nil
}

// SetContractStatus implements contracts.ContractStore.
func (s *Store) SetContractStatus(ctx context.Context, id string, status contracts.ContractStatus, at time.Time, grant, revoke []contracts.Rule) (*contracts.Contract, error) {
	var out *contracts.Contract
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		updates := map[string]any{"status": string(status), "updated_at": at.UTC()}
		switch status {
		case contracts.ContractCanceled:
			updates["canceled_at"] = at.UTC()
		case contracts.ContractActive:
			updates["past_due_at"] = nil
		}
		if status == contracts.ContractPastDue {
			// The grace period runs from the first failure, not the last.
			if err := tx.Model(&contractRow{}).Where("id = ? AND past_due_at IS NULL", id).Update("past_due_at", at.UTC()).Error; err != nil {
				return err
			}
		}
		res := tx.Model(&contractRow{}).Where("id = ?", id).Updates(updates)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return gorm.ErrRecordNotFound
		}
		if err := removeRules(tx, revoke); err != nil {
			return err
		}
		if err := addRules(tx, grant); err != nil {
			return err
		}
		return reread(tx, id, &out)
	})
	return out, relational.Translate(err, "contract")
}

// SetContractBudgets implements contracts.ContractStore.
func (s *Store) SetContractBudgets(ctx context.Context, id string, b contracts.TimeBudgets, at time.Time) (*contracts.Contract, error) {
	return s.updateContract(ctx, id, map[string]any{
		"request_timeout_ms": b.RequestTimeout.Milliseconds(), "task_timeout_ms": b.TaskTimeout.Milliseconds(),
		"max_pause_ms": b.MaxPause.Milliseconds(), "updated_at": at.UTC(),
	})
}

// SetContractLimits implements contracts.ContractStore.
func (s *Store) SetContractLimits(ctx context.Context, id string, l agentmarket.RateLimits, caps contracts.SessionCaps, at time.Time) (*contracts.Contract, error) {
	return s.updateContract(ctx, id, map[string]any{"rate_limits": jsonColumn(l), "session_caps": jsonColumn(caps), "updated_at": at.UTC()})
}

// updateContract changes a contract's columns and reads it back; NotFound
// (subscription_not_found) for an unknown id.
func (s *Store) updateContract(ctx context.Context, id string, updates map[string]any) (*contracts.Contract, error) {
	var out *contracts.Contract
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&contractRow{}).Where("id = ?", id).Updates(updates)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return gorm.ErrRecordNotFound
		}
		return reread(tx, id, &out)
	})
	if err != nil {
		return nil, notFoundAs(relational.Translate(err, "subscription"), "subscription_not_found", "no subscription %q", id)
	}
	return out, nil
}

// reread reads a contract back inside the transaction that changed it.
func reread(tx *gorm.DB, id string, out **contracts.Contract) error {
	var r contractRow
	if err := tx.Where("id = ?", id).Take(&r).Error; err != nil {
		return err
	}
	*out = contractFromRow(&r)
	return nil
}

// HadTrial implements contracts.ContractStore.
func (s *Store) HadTrial(ctx context.Context, buyerOrgID, listingID string) (bool, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&contractRow{}).Where("buyer_org_id = ? AND listing_id = ? AND trial_end IS NOT NULL", buyerOrgID, listingID).
		Count(&n).Error
	return n > 0, relational.Translate(err, "contract")
}

// TrialingContracts implements contracts.ContractStore.
func (s *Store) TrialingContracts(ctx context.Context) ([]contracts.Contract, error) {
	return s.findContracts(ctx, "id ASC", "status = ?", string(contracts.ContractTrialing))
}

var errTrialOver = agentmarket.Errorf(agentmarket.Conflict, "trial_over", "the subscription is not in a trial")

// EndTrial implements contracts.ContractStore.
func (s *Store) EndTrial(ctx context.Context, id string, end time.Time, status contracts.ContractStatus, at time.Time, revoke []contracts.Rule) (*contracts.Contract, error) {
	var out *contracts.Contract
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		updates := map[string]any{"status": string(status), "trial_end": end.UTC(), "updated_at": at.UTC()}
		if status == contracts.ContractCanceled {
			updates["canceled_at"] = end.UTC()
		}
		res := tx.Model(&contractRow{}).Where("id = ? AND status = ?", id, string(contracts.ContractTrialing)).Updates(updates)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			var n int64
			if err := tx.Model(&contractRow{}).Where("id = ?", id).Count(&n).Error; err != nil {
				return err
			}
			if n == 0 {
				return gorm.ErrRecordNotFound
			}
			return errTrialOver
		}
		if err := removeRules(tx, revoke); err != nil {
			return err
		}
		return reread(tx, id, &out)
	})
	if err != nil {
		return nil, notFoundAs(relational.Translate(err, "subscription"), "subscription_not_found", "no subscription %q", id)
	}
	return out, nil
}

// SetCancelAtTrialEnd implements contracts.ContractStore.
func (s *Store) SetCancelAtTrialEnd(ctx context.Context, id string, cancel bool, at time.Time) (*contracts.Contract, error) {
	var out *contracts.Contract
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&contractRow{}).Where("id = ? AND status = ?", id, string(contracts.ContractTrialing)).
			Updates(map[string]any{"cancel_at_trial_end": cancel, "updated_at": at.UTC()})
		if res.Error != nil {
			return res.Error
		}
		if err := reread(tx, id, &out); err != nil || res.RowsAffected > 0 {
			return err
		}
		return errTrialOver
	})
	if err != nil {
		return nil, notFoundAs(relational.Translate(err, "subscription"), "subscription_not_found", "no subscription %q", id)
	}
	return out, nil
}

// OverdueContracts implements contracts.ContractStore.
func (s *Store) OverdueContracts(ctx context.Context, cutoff time.Time) ([]contracts.Contract, error) {
	return s.findContracts(ctx, "past_due_at ASC, id ASC", "status = ? AND past_due_at IS NOT NULL AND past_due_at <= ?", string(contracts.ContractPastDue), cutoff.UTC())
}

type taskOwnerRow struct {
	ListingID       string `gorm:"primaryKey"`
	TaskID          string `gorm:"primaryKey"`
	OrgID           string
	ContractID      string
	ContextID       string
	CreatedAt       time.Time
	ParentListingID string
	ParentTaskID    string
	DeadlineAt      *time.Time
	// The task's life (TaskLife): written by its methods, and by a bind
	// only for ended_at (a task created and ended in one call).
	PausedSince   *time.Time
	PauseCancelAt *time.Time
	EndedAt       *time.Time
	// EndedState and EndedTraceID are the end of a task created and ended
	// in one call, kept here rather than as an event row (bindMany).
	EndedState   string
	EndedTraceID string
	StalledSince *time.Time
	LeaseUntil   *time.Time
	// A requested cancel (RequestCancel) and the sweeps' attempts.
	CancelRequestedAt *time.Time
	CancelActor       string
	CancelReason      string
	CancelTraceID     string
	SweepAttempts     int
	ReusedAt          *time.Time
	// What the task has been billed so far (RaiseBilled).
	BilledInputTokens  int64
	BilledOutputTokens int64
	BilledComputeMs    int64
	BilledAt           *time.Time
	// Endpoint is the agent endpoint holding the task ("" for a listing
	// with one).
	Endpoint string
	KeyID    string
}

func (r *taskOwnerRow) binding() contracts.TaskBinding {
	b := contracts.TaskBinding{ListingID: r.ListingID, TaskID: r.TaskID, OrgID: r.OrgID, ContractID: r.ContractID, ContextID: r.ContextID,
		CreatedAt: r.CreatedAt.UTC(), ParentListingID: r.ParentListingID, ParentTaskID: r.ParentTaskID, DeadlineAt: utcPtr(r.DeadlineAt),
		ReusedAt: utcPtr(r.ReusedAt), Endpoint: r.Endpoint, KeyID: r.KeyID}
	if r.BilledAt != nil {
		b.Billed = &contracts.TaskBilled{InputTokens: r.BilledInputTokens, OutputTokens: r.BilledOutputTokens, ComputeMs: r.BilledComputeMs,
			At: r.BilledAt.UTC()}
	}
	return b
}

// utcPtr copies an optional time in UTC.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func (taskOwnerRow) TableName() string { return "task_owners" }

// BindTask implements contracts.TaskOwners.
func (s *Store) BindTask(ctx context.Context, t contracts.TaskBinding) (string, error) {
	return bindTask(s.db.WithContext(ctx), t)
}

// BindTasks implements contracts.BatchTaskOwners: one transaction for the
// batch, or each binding on its own if the transaction fails.
func (s *Store) BindTasks(ctx context.Context, ts []contracts.TaskBinding) ([]string, []error) {
	owners, errs := make([]string, len(ts)), make([]error, len(ts))
	if s.tasks != nil && s.tasks.direct(ts) && s.tasks.bind(ctx, ts, owners) == nil {
		return owners, errs
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for start := 0; start < len(ts); start += bindChunk {
			end := min(start+bindChunk, len(ts))
			if err := bindMany(tx, ts[start:end], owners[start:end]); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		return owners, errs
	}
	for i, t := range ts {
		owners[i], errs[i] = s.BindTask(ctx, t)
	}
	return owners, errs
}

// bindChunk is the most bindings one statement of bindMany carries. The
// pure-Go SQLite driver binds a statement's parameters in time quadratic
// in their number (each is looked up among all of them): 32 bindings (320
// parameters) cost a batch of 256 about 15 % less than 128 did, and 16 no
// less (BenchmarkProjectionWrites).
const bindChunk = 32

// bindCols are task_owners' columns a binding writes, in bindMany's order.
const bindCols = "listing_id, task_id, org_id, contract_id, context_id, created_at, parent_listing_id, parent_task_id, deadline_at, ended_at, " +
	"ended_state, ended_trace_id, billed_input_tokens, billed_output_tokens, billed_compute_ms, billed_at, endpoint, key_id"

// bindParams is how many parameters one binding takes (bindCols).
const bindParams = 18

// bindSQLs[n] binds n tasks unless they are bound, and returns the keys
// of those it bound (RETURNING: PostgreSQL and SQLite ≥ 3.35 alike). The
// pure-Go SQLite driver parses a statement on every execution, prepared
// or not, so one statement for many rows is what keeps a batch cheap;
// chunk sizes are powers of two, so there are few statements to cache.
var bindSQLs = func() map[int]string {
	m := make(map[int]string)
	for n := 1; n <= bindChunk; n *= 2 {
		var b strings.Builder
		b.WriteString("INSERT INTO task_owners (" + bindCols + ") VALUES ")
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?" + strings.Repeat(", ?", bindParams-1) + ")")
		}
		b.WriteString(" ON CONFLICT (listing_id, task_id) DO NOTHING RETURNING listing_id, task_id")
		m[n] = b.String()
	}
	return m
}()

// bindMany binds tasks in tx; owners[i] is the org recorded for ts[i]:
// its own when the task was new, else the first binder's (read back).
func bindMany(tx *gorm.DB, ts []contracts.TaskBinding, owners []string) error {
	type key struct{ listing, task string }
	bound := make(map[key]bool, len(ts))
	for start := 0; start < len(ts); {
		n := bindChunk
		for n > len(ts)-start {
			n /= 2
		}
		args := make([]any, 0, bindParams*n)
		for _, t := range ts[start : start+n] {
			var ended *time.Time
			var endState, endTrace string
			if t.Ended != nil {
				ended = utcPtr(&t.Ended.At)
				if endOnBinding(t.Ended) {
					endState, endTrace = t.Ended.State, t.Ended.TraceID
				}
			}
			var billed contracts.TaskBilled
			var billedAt *time.Time
			if t.Billed != nil {
				billed, billedAt = *t.Billed, utcPtr(&t.Billed.At)
			}
			args = append(args, t.ListingID, t.TaskID, t.OrgID, t.ContractID, t.ContextID, t.CreatedAt.UTC(), t.ParentListingID, t.ParentTaskID, utcPtr(t.DeadlineAt), ended,
				endState, endTrace, billed.InputTokens, billed.OutputTokens, billed.ComputeMs, billedAt, t.Endpoint, t.KeyID)
		}
		rows, err := tx.Raw(bindSQLs[n], args...).Rows()
		if err != nil {
			return relational.Translate(err, "task")
		}
		for rows.Next() {
			var k key
			if err := rows.Scan(&k.listing, &k.task); err != nil {
				rows.Close()
				return relational.Translate(err, "task")
			}
			bound[k] = true
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return relational.Translate(err, "task")
		}
		start += n
	}
	var events []*taskEventRow
	var raise []contracts.TaskBill
	for i, t := range ts {
		k := key{t.ListingID, t.TaskID}
		if bound[k] {
			owners[i] = t.OrgID // the first sight: no need to read it back
			bound[k] = false    // the same task twice in one batch: the second reads the first back
			if t.Ended != nil && !endOnBinding(t.Ended) {
				e := *t.Ended
				e.ListingID, e.TaskID = t.ListingID, t.TaskID
				if e.Kind == "" {
					e.Kind = contracts.TaskEnded
				}
				events = append(events, eventToRow(e))
			}
			continue
		}
		var got taskOwnerRow
		if err := tx.Where("listing_id = ? AND task_id = ?", t.ListingID, t.TaskID).Take(&got).Error; err != nil {
			return relational.Translate(err, "task")
		}
		owners[i] = got.OrgID
		if t.Billed != nil && got.OrgID == t.OrgID {
			// Bound before (a replay, or bound at once and billed now): its
			// bill is raised as RaiseBilled would.
			raise = append(raise, contracts.TaskBill{ListingID: t.ListingID, TaskID: t.TaskID, Billed: *t.Billed})
		}
	}
	if err := raiseBilled(tx, raise); err != nil {
		return err
	}
	return insertEvents(tx, events)
}

// insertEvents writes task events: the projections end a task per call,
// and GORM's batched create (which reads each row's sequence number back)
// cost about as much as the task's binding itself.
func insertEvents(tx *gorm.DB, events []*taskEventRow) error {
	rows := make([][]any, len(events))
	for i, e := range events {
		rows[i] = []any{e.ID, e.ListingID, e.TaskID, e.Kind, e.State, e.OccurredAt.UTC(), e.Actor, e.Reason, e.TraceID}
	}
	err := relational.InsertRows(tx, "task_events", []string{"id", "listing_id", "task_id", "kind", "state", "occurred_at", "actor", "reason", "trace_id"}, rows, 32)
	if err != nil {
		return relational.Translate(err, "task event")
	}
	return nil
}

// endOnBinding reports whether a new binding's end is kept on its row
// (ended_state, ended_trace_id) rather than as an event row: a plain end,
// as the agent reported it, with nothing else to say (no actor, reason or
// id of its own). TaskRecord shows it as that event (boundEnd).
func endOnBinding(e *contracts.TaskEvent) bool {
	return (e.Kind == "" || e.Kind == contracts.TaskEnded) && e.ID == "" && e.Actor == "" && e.Reason == "" && e.State != ""
}

// boundEnd is the TaskEnded event of a task whose end is kept on its row;
// its id is the same at every reading.
func boundEnd(r *taskOwnerRow) contracts.TaskEvent {
	sum := sha256.Sum256([]byte(r.ListingID + "\x00" + r.TaskID))
	return contracts.TaskEvent{ID: "tev_end_" + hex.EncodeToString(sum[:10]), ListingID: r.ListingID, TaskID: r.TaskID, Kind: contracts.TaskEnded,
		State: r.EndedState, At: r.EndedAt.UTC(), TraceID: r.EndedTraceID}
}

func bindTask(db *gorm.DB, t contracts.TaskBinding) (string, error) {
	owners := make([]string, 1)
	err := bindMany(db, []contracts.TaskBinding{t}, owners)
	return owners[0], err
}

// raiseBilledSQL raises one task's billed counters (CASE rather than
// GREATEST or MAX: the one spelling PostgreSQL and SQLite share).
const raiseBilledSQL = `UPDATE task_owners SET
	billed_input_tokens = CASE WHEN billed_input_tokens < ? THEN ? ELSE billed_input_tokens END,
	billed_output_tokens = CASE WHEN billed_output_tokens < ? THEN ? ELSE billed_output_tokens END,
	billed_compute_ms = CASE WHEN billed_compute_ms < ? THEN ? ELSE billed_compute_ms END,
	billed_at = COALESCE(billed_at, ?)
 WHERE listing_id = ? AND task_id = ?`

// RaiseBilled implements contracts.BatchTaskOwners, in one transaction.
func (s *Store) RaiseBilled(ctx context.Context, bills []contracts.TaskBill) error {
	if len(bills) == 0 {
		return nil
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return raiseBilled(tx, bills) })
	return relational.Translate(err, "task")
}

func raiseBilled(tx *gorm.DB, bills []contracts.TaskBill) error {
	for _, b := range bills {
		c := b.Billed
		if err := tx.Exec(raiseBilledSQL, c.InputTokens, c.InputTokens, c.OutputTokens, c.OutputTokens, c.ComputeMs, c.ComputeMs,
			c.At.UTC(), b.ListingID, b.TaskID).Error; err != nil {
			return relational.Translate(err, "task")
		}
	}
	return nil
}

// TaskOwner implements contracts.TaskOwners.
func (s *Store) TaskOwner(ctx context.Context, listingID, taskID string) (*contracts.TaskBinding, error) {
	var r taskOwnerRow
	if err := s.db.WithContext(ctx).Where("listing_id = ? AND task_id = ?", listingID, taskID).Take(&r).Error; err != nil {
		return nil, relational.Translate(err, "task")
	}
	b := r.binding()
	return &b, nil
}

// MarkTaskReused implements contracts.TaskOwners.
func (s *Store) MarkTaskReused(ctx context.Context, listingID, taskID string, at time.Time) error {
	res := s.db.WithContext(ctx).Model(&taskOwnerRow{}).Where("listing_id = ? AND task_id = ? AND reused_at IS NULL", listingID, taskID).
		Update("reused_at", at.UTC())
	if res.Error != nil {
		return relational.Translate(res.Error, "task")
	}
	if res.RowsAffected == 0 {
		_, err := s.TaskOwner(ctx, listingID, taskID) // marked already, or unseen
		return err
	}
	return nil
}

func notFoundAs(err error, code, format string, args ...any) error {
	if agentmarket.KindOf(err) == agentmarket.NotFound {
		return agentmarket.Errorf(agentmarket.NotFound, code, format, args...)
	}
	return err
}

// findContracts lists the contracts matching a condition, in order.
func (s *Store) findContracts(ctx context.Context, order string, cond string, args ...any) ([]contracts.Contract, error) {
	var rows []contractRow
	if err := s.db.WithContext(ctx).Where(cond, args...).Order(order).Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "contract")
	}
	out := make([]contracts.Contract, len(rows))
	for i := range rows {
		out[i] = *contractFromRow(&rows[i])
	}
	return out, nil
}

// ContractsBetween returns the contracts active for at least part of
// [from, to): created before to and not canceled before from, by id.
func (s *Store) ContractsBetween(ctx context.Context, from, to time.Time) ([]contracts.Contract, error) {
	return s.findContracts(ctx, "id ASC", "created_at < ? AND (canceled_at IS NULL OR canceled_at >= ?)", to.UTC(), from.UTC())
}
