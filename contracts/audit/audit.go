// Package audit is the tamper-evident log of the control plane's changes:
// listings, plans and offers, subscriptions, API keys, budgets and limits,
// operator reviews, the webhook-driven contract transitions. Domain
// services hand every change they make to Log.RecordChange
// (agentmarket.ChangeRecorder); the log appends it as an Entry.
//
// The log is append-only and hash-chained: an entry carries the SHA-256 of
// the previous entry's canonical bytes (PrevHash) and of its own (Hash),
// so editing, removing or reordering a stored entry breaks the chain at
// that row. Appends are serialized on the chain's head row inside the
// store's transaction, so two processes appending at once chain one after
// the other and never fork. Periodically the head is signed into a
// Checkpoint with the marketplace's audit signing key (a2aproxy/pushsign
// keys of purpose "audit", sealed with AGENTMARKET_SECRET_KEY): rewriting
// the whole chain after a checkpoint needs that key. Retention prunes old
// entries behind a signed checkpoint at the prune point, from which the
// rest of the chain still verifies (Verify).
package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/agentmarket/agentmarket"
)

// Entry is one recorded change.
type Entry struct {
	// Seq is the entry's place in the chain: 1, 2, 3… with no gaps.
	Seq int64
	At  time.Time
	// The actor: its org, user (a browser session) or key, role and
	// whether it is the platform's operator, and the client's address.
	ActorOrgID  string
	ActorUserID string
	ActorKeyID  string
	ActorRole   string
	Operator    bool
	ActorIP     string
	// Via names a change no one made by hand ("stripe_webhook",
	// "scheduler"); empty for a person's or key's.
	Via        string
	Action     string
	ObjectType string
	ObjectID   string
	// OrgID is the org the object belongs to.
	OrgID string
	// Before and After are the object as JSON (compact; "null" for none).
	Before    json.RawMessage
	After     json.RawMessage
	RequestID string
	// PrevHash is the hex SHA-256 of the previous entry's canonical bytes
	// ("" before the first entry); Hash that of this one's.
	PrevHash string
	Hash     string
}

// Head is the chain's end: the last entry's Seq and Hash (0 and "" for
// an empty chain).
type Head struct {
	Seq  int64
	Hash string
}

// canonical is the form an entry is hashed in: every field but Hash, in
// this order, the time in UTC to the microsecond. Changing it changes
// every hash: its version is V.
type canonical struct {
	V           int             `json:"v"`
	Seq         int64           `json:"seq"`
	At          string          `json:"at"`
	ActorOrgID  string          `json:"actor_org_id"`
	ActorUserID string          `json:"actor_user_id"`
	ActorKeyID  string          `json:"actor_key_id"`
	ActorRole   string          `json:"actor_role"`
	Operator    bool            `json:"operator"`
	ActorIP     string          `json:"actor_ip"`
	Via         string          `json:"via"`
	Action      string          `json:"action"`
	ObjectType  string          `json:"object_type"`
	ObjectID    string          `json:"object_id"`
	OrgID       string          `json:"org_id"`
	Before      json.RawMessage `json:"before"`
	After       json.RawMessage `json:"after"`
	RequestID   string          `json:"request_id"`
	PrevHash    string          `json:"prev_hash"`
}

// TimeFormat is how times enter the canonical bytes.
const TimeFormat = "2006-01-02T15:04:05.000000Z"

// Canonical returns the bytes e's hash is taken over.
func Canonical(e *Entry) []byte {
	b, err := json.Marshal(canonical{V: 1, Seq: e.Seq, At: e.At.UTC().Format(TimeFormat),
		ActorOrgID: e.ActorOrgID, ActorUserID: e.ActorUserID, ActorKeyID: e.ActorKeyID, ActorRole: e.ActorRole, Operator: e.Operator,
		ActorIP: e.ActorIP, Via: e.Via, Action: e.Action, ObjectType: e.ObjectType, ObjectID: e.ObjectID, OrgID: e.OrgID,
		Before: jsonOrNull(e.Before), After: jsonOrNull(e.After), RequestID: e.RequestID, PrevHash: e.PrevHash})
	if err != nil {
		// Before and After are not JSON: hash them as strings, so the
		// row still has a hash, which a verifier recomputes the same.
		b, _ = json.Marshal([]any{1, e.Seq, string(e.Before), string(e.After), e.PrevHash})
	}
	return b
}

func jsonOrNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// HashOf returns the hex SHA-256 of e's canonical bytes.
func HashOf(e *Entry) string {
	sum := sha256.Sum256(Canonical(e))
	return hex.EncodeToString(sum[:])
}

// Filter selects entries for List. Empty fields select everything.
type Filter struct {
	// Actor matches the actor's org, user or key id.
	Actor string
	// Action matches exactly, or every action of an object type when it
	// ends in "." ("listing.").
	Action     string
	ObjectType string
	ObjectID   string
	From, To   time.Time // From inclusive, To exclusive
	// Org, when set, keeps the entries the org made or whose object it
	// owns (what an org's admin sees).
	Org string
	// Before pages backwards: entries with a Seq below it (0: from the
	// newest).
	Before int64
	Limit  int
}

// MaxLimit bounds one page of List; DefaultLimit is a page's size when
// the filter gives none.
const (
	MaxLimit     = 1000
	DefaultLimit = 100
)

// Validate checks the filter's bounds.
func (f *Filter) Validate() error {
	var fe agentmarket.Fields
	if f.Limit < 0 || f.Limit > MaxLimit {
		fe.Add("limit", "range", "limit must be between 1 and %d", MaxLimit)
	}
	if f.Before < 0 {
		fe.Add("before", "range", "before must be a positive sequence number")
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		fe.Add("to", "after", "to must be after from")
	}
	for _, s := range []struct{ name, v string }{{"actor", f.Actor}, {"action", f.Action}, {"object_type", f.ObjectType}, {"object_id", f.ObjectID}} {
		fe.Text(s.name, s.v, 200)
	}
	return fe.Err("invalid_audit_filter", "the audit filter is not valid")
}

// Checkpoint is the chain's head at one time, signed with the
// marketplace's audit key: a JWS (ES256, compact, attached payload) over
// CheckpointPayload.
type Checkpoint struct {
	Seq  int64
	Hash string
	At   time.Time
	// Prune marks the checkpoint a prune made at its last entry pruned:
	// only such a checkpoint may stand for the entries before the first
	// one left (a periodic checkpoint does not say they may go).
	Prune bool
	// KeyID is the signing key's kid; JWS the compact serialization.
	KeyID string
	JWS   string
}

// CheckpointPayload is what a checkpoint's signature covers.
func CheckpointPayload(c *Checkpoint) []byte {
	b, _ := json.Marshal(struct {
		V     int    `json:"v"`
		Seq   int64  `json:"seq"`
		Hash  string `json:"hash"`
		At    string `json:"at"`
		Prune bool   `json:"prune"`
	}{1, c.Seq, c.Hash, c.At.UTC().Format(TimeFormat), c.Prune})
	return b
}

// Store keeps the chain. Implementations: contracts/gormstore; every
// implementation passes contracts/storetest.RunAudit.
type Store interface {
	// AppendAudit locks the chain's head, calls next with it, stores the
	// entry next returns (its Seq must be head.Seq+1) and moves the head
	// to it, in one transaction: appends from any number of processes
	// chain one after another.
	AppendAudit(ctx context.Context, next func(Head) (*Entry, error)) (*Entry, error)
	// AuditHead returns the chain's head.
	AuditHead(ctx context.Context) (Head, error)
	// AuditEntries returns the entries f selects, newest first, at most
	// f.Limit (default 100).
	AuditEntries(ctx context.Context, f Filter) ([]Entry, error)
	// WalkAudit returns up to limit entries with a Seq above after, in
	// order.
	WalkAudit(ctx context.Context, after int64, limit int) ([]Entry, error)
	// LastAuditBefore returns the Seq of the last entry made before t (0
	// if none).
	LastAuditBefore(ctx context.Context, t time.Time) (int64, error)
	// AddCheckpoint stores c unless a checkpoint of its Seq exists; a
	// prune's checkpoint (c.Prune) replaces a periodic one of its Seq.
	AddCheckpoint(ctx context.Context, c Checkpoint) error
	// Checkpoints returns every checkpoint, oldest first.
	Checkpoints(ctx context.Context) ([]Checkpoint, error)
	// PruneAudit deletes the entries up to and including through and the
	// checkpoints before it, keeping the checkpoint at through (which must
	// exist: it anchors what is left), and returns how many entries went.
	PruneAudit(ctx context.Context, through int64) (int64, error)
}
