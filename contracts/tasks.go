package contracts

import (
	"context"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket"
)

// TimeBudgets are a contract's own time limits on its calls and tasks;
// zero fields take the listing's (and then the meter's) limits. A buyer
// may only tighten what the listing allows: the meter applies the smaller.
type TimeBudgets struct {
	// RequestTimeout is the per-hop budget: how long one non-streaming
	// call may wait for the agent.
	RequestTimeout time.Duration
	// TaskTimeout is the end-to-end budget: how long a task may live from
	// its creation before the meter cancels it at the agent. A delegated
	// task (one naming a parent task) never outlives its parent's budget.
	TaskTimeout time.Duration
	// MaxPause is the longest a task may stay in input-required or
	// auth-required before the meter cancels it at the agent.
	MaxPause time.Duration
}

// TaskEventKind is what happened to a task.
type TaskEventKind string

const (
	TaskPaused   TaskEventKind = "paused"   // the task entered input-required or auth-required
	TaskResumed  TaskEventKind = "resumed"  // the buyer answered a paused task
	TaskCanceled TaskEventKind = "canceled" // the task was canceled through the meter (by whom and why in the event)
	TaskEnded    TaskEventKind = "ended"    // the meter saw the task reach a terminal state
	// TaskLost: the agent answered TaskNotFound for a task the meter had
	// bound (it forgot it, say in a restart): the task is over for the
	// buyer, and its listing counts it (listings.Listing.LostTasks).
	TaskLost TaskEventKind = "lost"
	// TaskStalled: the task showed no progress (no status change, artifact
	// or message) for longer than its listing's stall_after; TaskProgressed:
	// progress after a stall.
	TaskStalled    TaskEventKind = "stalled"
	TaskProgressed TaskEventKind = "progressed"
)

// Who canceled a task, when it was not a buyer's key.
const (
	CanceledByMeter   = "meter"   // a pause or a time budget ran out
	CanceledByCascade = "cascade" // the parent task was canceled
)

// TaskEvent is one moment of a task's life as the meter saw it.
type TaskEvent struct {
	ID        string
	ListingID string
	TaskID    string
	Kind      TaskEventKind
	// State is the A2A state seen with the event ("input-required",
	// "canceled", ...), in the 0.3 spelling; "" when none.
	State string
	At    time.Time
	// Actor is who caused it: "key:<api key id>" for a buyer's call,
	// CanceledByMeter, CanceledByCascade, or "" when the agent did.
	Actor   string
	Reason  string
	TraceID string
}

// TaskRecord is a task's binding and where it is in its life.
type TaskRecord struct {
	TaskBinding
	// PausedSince is when the open pause began; nil when not paused.
	PausedSince *time.Time
	// PauseCancelAt is when the meter cancels the task if the open pause
	// lasts; nil when not paused or no pause limit applies.
	PauseCancelAt *time.Time
	// EndedAt is when the task was seen terminal (or canceled); nil while
	// it may still run.
	EndedAt *time.Time
	// StalledSince is when the meter marked the task stalled: the last
	// progress it saw was longer ago than the listing's stall_after; nil
	// when not stalled.
	StalledSince *time.Time
	Events       []TaskEvent // oldest first
}

// DueTask is a task the meter must cancel: a cancel was requested (a
// cascade), or its pause or its end-to-end budget ran out.
type DueTask struct {
	TaskBinding
	// Why is "requested", "pause" or "deadline" (in that order when
	// several hold).
	Why         string
	PausedSince *time.Time
	// Who asked, why, and under which trace, for a requested cancel.
	CancelActor, CancelReason, CancelTraceID string
	// Attempts counts the sweeps that leased the task, this one included.
	Attempts int
}

// TaskLife records the life of the tasks the meter carries (pauses,
// resumes, cancellations, ends) and finds those whose time is up. Shared by
// every meter instance through the database.
type TaskLife interface {
	// TaskPaused opens a pause unless one is open, recording a TaskPaused
	// event; cancelAt (nil: never) is when the meter cancels the task if
	// it is still paused. Reports whether a pause was opened.
	TaskPaused(ctx context.Context, e TaskEvent, cancelAt *time.Time) (bool, error)
	// TaskResumed closes the open pause, recording a TaskResumed event;
	// reports whether one was open.
	TaskResumed(ctx context.Context, e TaskEvent) (bool, error)
	// TaskEnded records the end of a task (a TaskEnded, TaskCanceled or
	// TaskLost event) unless it has already ended, closes any pause and
	// stall, and takes the task out of DueTasks. Reports whether this call
	// ended it.
	TaskEnded(ctx context.Context, e TaskEvent) (bool, error)
	// TaskStalled marks a task that has not ended stalled since e.At
	// unless it is, recording a TaskStalled event; reports whether it
	// marked it. NotFound for an unknown task.
	TaskStalled(ctx context.Context, e TaskEvent) (bool, error)
	// TaskProgressed clears a task's stall, recording a TaskProgressed
	// event; reports whether it was stalled.
	TaskProgressed(ctx context.Context, e TaskEvent) (bool, error)
	// TaskRecord returns a task's binding, life and events, or NotFound.
	TaskRecord(ctx context.Context, listingID, taskID string) (*TaskRecord, error)
	// FindTasks finds bound tasks by their id alone (the parent a
	// delegated task names; agents choose ids, so several listings may
	// have one): at most limit, most recently bound first. None is not an
	// error.
	FindTasks(ctx context.Context, taskID string, limit int) ([]TaskBinding, error)
	// ChildTasks returns the tasks that have not ended and name the given
	// task as their parent: on its listing, or unresolved (a parent the
	// meter had not bound yet when the child was created:
	// ParentListingID ""). The caller decides which unresolved ones are
	// really its children.
	ChildTasks(ctx context.Context, parentListingID, parentTaskID string) ([]TaskBinding, error)
	// RequestCancel records that the meter must cancel a task (actor and
	// reason as its TaskCanceled event will say), unless the task ended or
	// a cancel is already requested: durable before it is tried, so that a
	// failed attempt or a restart does not lose it. It is due (DueTasks)
	// from at: the caller tries first. NotFound for an unknown task.
	RequestCancel(ctx context.Context, listingID, taskID, actor, reason, traceID string, at time.Time) error
	// PruneEvents deletes the events of tasks that ended before before
	// (the task's binding stays: ownership is forever) and returns how many
	// went.
	PruneEvents(ctx context.Context, before time.Time) (int64, error)
	// DueTasks leases up to limit tasks, not ended, whose cancel was
	// requested, or whose pause cancel time or deadline is at or before
	// now; a leased task is not returned again before leaseUntil (so
	// several meters do not cancel it twice). Each lease counts an attempt.
	DueTasks(ctx context.Context, now, leaseUntil time.Time, limit int) ([]DueTask, error)
}

// PushConfig is a buyer's push-notification config for one task, as the
// meter keeps it: the buyer's webhook, and the callback the meter
// registered with the agent in its place.
type PushConfig struct {
	ListingID string
	TaskID    string
	ConfigID  string
	OrgID     string
	APIKeyID  string
	// Version is the A2A version the buyer set it in ("0.3" or "1.0"):
	// notifications are delivered in that version.
	Version string
	URL     string
	// Sealed holds the buyer's token and authentication credentials,
	// encrypted (the meter seals and opens it; the store keeps bytes).
	Sealed     []byte
	AuthScheme string
	// CallbackID names the meter's callback URL registered with the
	// agent; SecretHash is the SHA-256 (hex) of the per-task secret the
	// agent must present on every notification.
	CallbackID string
	SecretHash string
	CreatedAt  time.Time
}

// DeliveryStatus is where a push delivery is.
type DeliveryStatus string

const (
	DeliveryPending   DeliveryStatus = "pending"
	DeliveryDelivered DeliveryStatus = "delivered"
	DeliveryFailed    DeliveryStatus = "failed" // given up after the last attempt, or refused (SSRF)
	// DeliverySuperseded: a status update not sent, because a later
	// status of the same task and config (SupersededBy) carries the
	// newer state.
	DeliverySuperseded DeliveryStatus = "superseded"
)

// DeliveryKind says what a delivery carries, as far as coalescing goes:
// push is a signal (the receiver asks for the task), so a status update
// a later status of the same config supersedes carries nothing the later
// one does not. Artifacts, messages and terminal states are never
// superseded.
type DeliveryKind string

const (
	DeliveryOther DeliveryKind = "" // never superseded, supersedes nothing
	// DeliveryStatusUpdate is a status update to a state that is not
	// terminal: superseded by a later status update or task of its config.
	DeliveryStatusUpdate DeliveryKind = "status"
	// DeliveryState is a terminal status update or a task: it supersedes
	// the status updates before it and is never superseded.
	DeliveryState DeliveryKind = "state"
)

// Delivery is one notification to one buyer webhook. Its ID is stable (a
// digest of the callback and the notification), so an agent's retry of
// the same notification is the same delivery, and the buyer sees the same
// id on every attempt.
type Delivery struct {
	ID        string
	Seq       int64 // assigned by the store: the order deliveries of a config go out in
	ListingID string
	TaskID    string
	ConfigID  string
	OrgID     string
	// Destination is the webhook server's (Destination of the config's
	// URL when it was enqueued): deliveries are claimed and capped per
	// destination.
	Destination string
	Kind        DeliveryKind
	// Covers counts the status updates of the config this delivery stands
	// for besides itself (those it superseded, and theirs); SupersededBy
	// names the delivery that superseded this one.
	Covers       int
	SupersededBy string
	Body         []byte
	Status       DeliveryStatus
	Attempts     int
	// NextAttemptAt is when a pending delivery may be tried next.
	NextAttemptAt time.Time
	LastStatus    int // the webhook's last HTTP status; 0 when it was not reached
	LastError     string
	CreatedAt     time.Time
	DeliveredAt   *time.Time
}

// DeliveryQuery selects deliveries for the API.
type DeliveryQuery struct {
	OrgID  string // required
	Status DeliveryStatus
	TaskID string
	Limit  int // default 100, at most 1000
}

// PushStore keeps push configs and the delivery outbox. Deliveries are
// durable before the agent's notification is acknowledged, so a meter
// restart loses none.
// ClaimSkip is what a claim of the outbox leaves alone: deliveries to
// these destinations, of these orgs, and of these orgs to these
// destinations.
type ClaimSkip struct {
	Destinations []string
	Orgs         []string
	// OrgDestinations: deliveries of an org ([0]) to a destination ([1]),
	// where the org's own caps (PushCaps) hold enough of them waiting.
	OrgDestinations [][2]string
}

type PushStore interface {
	// SavePushConfig creates or replaces the config (listing, task, config id).
	SavePushConfig(ctx context.Context, c PushConfig) error
	PushConfig(ctx context.Context, listingID, taskID, configID string) (*PushConfig, error)
	PushConfigs(ctx context.Context, listingID, taskID string) ([]PushConfig, error)
	// PushCallback finds the config of a meter callback id, or NotFound.
	PushCallback(ctx context.Context, callbackID string) (*PushConfig, error)
	// DeletePushConfig removes a config and drops its pending
	// deliveries and its caps (PushConfigCaps). The store remembers which configs it deleted: deleting
	// one again succeeds and changes nothing (A2A 1.0 makes the delete
	// idempotent); NotFound only for a config the task never had.
	DeletePushConfig(ctx context.Context, listingID, taskID, configID string) error

	// Enqueue stores a pending delivery unless one with its ID exists;
	// reports whether it was new. A new delivery of kind
	// DeliveryStatusUpdate or DeliveryState supersedes, in the same
	// transaction, the pending status updates (DeliveryStatusUpdate) of
	// its config that are not leased at d.CreatedAt: they become
	// DeliverySuperseded, SupersededBy d, and d covers them (and what they
	// covered).
	Enqueue(ctx context.Context, d Delivery) (bool, error)
	// ClaimDeliveries leases up to limit pending deliveries whose next
	// attempt is due at now: only the oldest pending delivery of each
	// config, so a config's notifications arrive in order. A claimed
	// delivery is not claimed again before leaseUntil. Deliveries to the
	// destinations skip names, and of the orgs it names, are left alone
	// (the meter holds enough of theirs, or they asked it to wait).
	ClaimDeliveries(ctx context.Context, now, leaseUntil time.Time, limit int, skip ClaimSkip) ([]Delivery, error)
	// DeliveryAttempted records an attempt: delivered (status
	// DeliveryDelivered), to be retried at next (DeliveryPending), or given
	// up (DeliveryFailed). It clears the lease. An attempt on a delivery no
	// longer pending (another meter finished it) changes nothing.
	DeliveryAttempted(ctx context.Context, id string, status DeliveryStatus, attempts int, next time.Time, httpStatus int, errText string, at time.Time) error
	Deliveries(ctx context.Context, q DeliveryQuery) ([]Delivery, error)
	// PruneDeliveries deletes the delivered, failed and superseded
	// deliveries created before before (pending ones stay, whatever their
	// age) and returns how many went.
	PruneDeliveries(ctx context.Context, before time.Time) (int64, error)
	// RetryDelivery puts a failed delivery of orgID back to pending, due
	// at now, with its attempts counted from 0 again (a full new schedule);
	// NotFound when orgID has no such failed delivery. Delivered and failed
	// deliveries stay as history when their config is deleted.
	RetryDelivery(ctx context.Context, orgID, id string, now time.Time) error
}

// BudgetsInput is how the API carries a contract's time budgets, in
// milliseconds; 0 or absent keeps the listing's.
type BudgetsInput struct {
	RequestTimeoutMs *int64 `json:"request_timeout_ms"`
	TaskTimeoutMs    *int64 `json:"task_timeout_ms"`
	MaxPauseMs       *int64 `json:"max_pause_ms"`
}

// Bounds of a contract's budgets (the same as a listing's).
const (
	maxRequestBudget = 10 * time.Minute
	maxTaskBudget    = 7 * 24 * time.Hour
	maxPauseBudget   = 24 * time.Hour
)

func (in *BudgetsInput) parse(fe *agentmarket.Fields) TimeBudgets {
	var b TimeBudgets
	if in == nil {
		return b
	}
	ms := func(field string, v *int64, min, max time.Duration, dst *time.Duration) {
		fe.Millis("budgets."+field, "the listing's", v, min, max, dst)
	}
	ms("request_timeout_ms", in.RequestTimeoutMs, 100*time.Millisecond, maxRequestBudget, &b.RequestTimeout)
	ms("task_timeout_ms", in.TaskTimeoutMs, time.Second, maxTaskBudget, &b.TaskTimeout)
	ms("max_pause_ms", in.MaxPauseMs, time.Second, maxPauseBudget, &b.MaxPause)
	return b
}

// Tasks lets buyers and sellers see the life of their tasks and the push
// deliveries of their webhooks.
type Tasks struct {
	Life TaskLife
	Push PushStore
	// Listings tells who sells a listing (its seller may see its tasks).
	Listings ListingSource
	Clock    agentmarket.Clock
}

// Task returns a task's record to its owner, or to the listing's seller;
// anyone else gets NotFound, as for a task that does not exist.
func (s *Tasks) Task(ctx context.Context, actor agentmarket.Actor, listingID, taskID string) (*TaskRecord, error) {
	notFound := agentmarket.Errorf(agentmarket.NotFound, "task_not_found", "no task %q on listing %q", taskID, listingID)
	r, err := s.Life.TaskRecord(ctx, listingID, taskID)
	if err != nil {
		if agentmarket.KindOf(err) == agentmarket.NotFound {
			return nil, notFound
		}
		return nil, err
	}
	if r.OrgID == actor.OrgID || actor.Operator {
		return r, nil
	}
	if terms, err := s.Listings.ListingTerms(ctx, actor, listingID); err == nil && terms.SellerOrgID == actor.OrgID {
		// The seller sees what happened, not which of the buyer's keys
		// did it, nor the buyer's words.
		for i := range r.Events {
			if strings.HasPrefix(r.Events[i].Actor, "key:") || strings.HasPrefix(r.Events[i].Actor, "org:") {
				r.Events[i].Actor, r.Events[i].Reason = "buyer", ""
			}
		}
		return r, nil
	}
	return nil, notFound
}

// Deliveries lists the actor's org's push deliveries.
func (s *Tasks) Deliveries(ctx context.Context, actor agentmarket.Actor, q DeliveryQuery) ([]Delivery, error) {
	var fe agentmarket.Fields
	switch q.Status {
	case "", DeliveryPending, DeliveryDelivered, DeliveryFailed:
	default:
		fe.Add("status", "enum", "status must be pending, delivered or failed")
	}
	if q.Limit < 0 || q.Limit > 1000 {
		fe.Add("limit", "range", "limit must be between 1 and 1000")
	}
	if err := fe.Err("invalid_query", "the delivery query is not valid"); err != nil {
		return nil, err
	}
	if q.Limit == 0 {
		q.Limit = 100
	}
	q.OrgID = actor.OrgID
	return s.Push.Deliveries(ctx, q)
}

// RetryDelivery sends a failed delivery of the actor's org again.
func (s *Tasks) RetryDelivery(ctx context.Context, actor agentmarket.Actor, id string) error {
	return s.Push.RetryDelivery(ctx, actor.OrgID, id, s.Clock.Now())
}
