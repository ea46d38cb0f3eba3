package contracts

import (
	"context"
	"time"
)

// Idempotent sends: the meter forwards a message once per messageId. A
// send whose messageId the same buyer org already sent to the same listing
// within the window is not forwarded again: the meter answers it with
// what the first send created. SentMessages is the durable record of those
// sends, shared by every meter; each meter keeps its own recent ones in
// memory too (a2aproxy/idem.go).

// SentStage is how far the call that forwarded a message got.
type SentStage int

const (
	// SentInFlight: the call is forwarding the message; TaskID may be
	// known already (a stream's first event, a message to an existing
	// task). A record in flight with no task past HeldUntil was abandoned
	// (its meter stopped): another call may take it over.
	SentInFlight SentStage = 0
	// SentDone: the agent answered with a task (TaskID) or a message
	// (Result).
	SentDone SentStage = 2
	// SentReleased: the call ended with an error: the messageId is free
	// again.
	SentReleased SentStage = 3
)

// SentKey names a sent message: the messageId as an org sent it to a
// listing.
type SentKey struct {
	ListingID string
	OrgID     string
	MessageID string
}

// SentMessage is the record of one forwarded message.
type SentMessage struct {
	SentKey
	ContractID string
	// Digest is the hex SHA-256 of the message's canonical form
	// (wire.Request.MessageDigest): a send of the same messageId with
	// another digest is refused.
	Digest string
	// ClaimID names the call that forwarded the message; only its own
	// writes change the record, until another call may take it over.
	ClaimID   string
	Stage     SentStage
	TaskID    string // the task the message created or continued ("" until known, or for a message answer)
	ContextID string
	State     string // the task's state when last recorded (0.3 spelling)
	// Result is the agent's answer when it was a message (no task), in
	// ResultVersion, the agent's A2A version.
	Result        []byte
	ResultVersion string
	ClaimedAt     time.Time
	// HeldUntil is when a record in flight without a task counts as
	// abandoned.
	HeldUntil time.Time
	// ExpiresAt is the end of the window: from then on the messageId is
	// free again.
	ExpiresAt time.Time
}

// Replaceable reports whether a call other than the record's own may
// claim its messageId at now: the window is over, the first call failed,
// or it was abandoned without a task.
func (m *SentMessage) Replaceable(now time.Time) bool {
	return !now.Before(m.ExpiresAt) || m.Stage == SentReleased ||
		(m.Stage == SentInFlight && m.TaskID == "" && !now.Before(m.HeldUntil))
}

// SentMessages keeps the records of forwarded messages.
type SentMessages interface {
	// FindSent returns the record of each key (nil when there is none, or
	// only one whose window is over at now, or one released).
	FindSent(ctx context.Context, keys []SentKey, now time.Time) ([]*SentMessage, error)
	// RecordSent writes records. A record whose key holds no record, or a
	// replaceable one (SentMessage.Replaceable at now), is written whole;
	// one of the same ClaimID updates the record, never moving it back (a
	// lower stage leaves the stage, state and result as they are; an empty
	// task or context id leaves the recorded one); one of another ClaimID
	// over a live record changes nothing. applied[i] tells whether recs[i]
	// was written. Idempotent: the meter writes a record when it claims a
	// messageId, when it learns the task, and when the call ends (from the
	// spool, maybe more than once).
	RecordSent(ctx context.Context, recs []SentMessage, now time.Time) (applied []bool, err error)
	// PruneSent deletes the records whose window ended before before, and
	// returns how many.
	PruneSent(ctx context.Context, before time.Time) (int64, error)
}
