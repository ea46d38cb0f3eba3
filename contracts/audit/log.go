package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// Signer signs a checkpoint's payload: a JWS whose protected header names
// the key (a2aproxy/pushsign.Keys implements it).
type Signer interface {
	SignJWS(ctx context.Context, payload []byte, jku string) (protected, signature string, err error)
}

// Keys are the public halves of the audit signing keys
// (contracts.PushKeyStore implements it).
type Keys interface {
	PushKeys(ctx context.Context) ([]contracts.PushKey, error)
}

// Log records changes into the chain, lists them, signs checkpoints,
// prunes, and verifies.
type Log struct {
	Store Store
	Clock agentmarket.Clock
	// Signer signs checkpoints; nil: no checkpoints are made (Prune then
	// prunes nothing, since what is left needs an anchor).
	Signer Signer
	// Keys verify the checkpoints' signatures.
	Keys Keys
	// JKU is where the audit keys are published (the checkpoint's "jku").
	JKU string
	// CheckpointEvery is how often Run signs the head; default 1 hour.
	CheckpointEvery time.Duration
	// Retention is how long entries are kept; 0 keeps them forever.
	Retention time.Duration
	Logger    *slog.Logger
	// TenantViews rewrite, by object type, an entry's before and after
	// JSON as an org other than the platform sees it (an object that
	// names the operator's people: a kill switch's set_by). nil: as
	// stored.
	TenantViews map[string]func(json.RawMessage) json.RawMessage
}

var _ agentmarket.ChangeRecorder = (*Log)(nil)

// RecordChange implements agentmarket.ChangeRecorder: c becomes the
// chain's next entry, with the request ctx carries.
func (l *Log) RecordChange(ctx context.Context, c agentmarket.Change) error {
	before, err := compactJSON(c.Before)
	if err != nil {
		return agentmarket.Wrap(agentmarket.Internal, "audit_failed", err, "the change was made but could not be recorded")
	}
	after, err := compactJSON(c.After)
	if err != nil {
		return agentmarket.Wrap(agentmarket.Internal, "audit_failed", err, "the change was made but could not be recorded")
	}
	req := agentmarket.RequestFrom(ctx)
	at := l.Clock.Now().UTC().Truncate(time.Microsecond)
	_, err = l.Store.AppendAudit(ctx, func(h Head) (*Entry, error) {
		e := &Entry{Seq: h.Seq + 1, At: at, ActorOrgID: c.Actor.OrgID, ActorUserID: c.Actor.UserID, ActorKeyID: c.Actor.KeyID,
			ActorRole: string(c.Actor.Role), Operator: c.Actor.Operator, ActorIP: req.IP, Via: req.Via,
			Action: c.Action, ObjectType: c.ObjectType, ObjectID: c.ObjectID, OrgID: c.OrgID,
			Before: before, After: after, RequestID: req.ID, PrevHash: h.Hash}
		e.Hash = HashOf(e)
		return e, nil
	})
	if err != nil {
		return agentmarket.Wrap(agentmarket.Internal, "audit_failed", err, "the change was made but could not be recorded")
	}
	return nil
}

func compactJSON(v any) (json.RawMessage, error) {
	if v == nil {
		return json.RawMessage("null"), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Scope is what actor may read of the audit log: every org's entries
// (all) for an admin of the platform's org (an operator), its own org's
// for another org's admin; any other role is Forbidden. A key of the
// platform's org is not an operator's for the log unless it is an
// admin's: the log holds every tenant's changes and addresses.
func Scope(actor agentmarket.Actor) (all bool, err error) {
	if actor.Role != agentmarket.RoleAdmin {
		return false, agentmarket.Errorf(agentmarket.Forbidden, "forbidden", "only admins read the audit log")
	}
	return actor.Operator, nil
}

// mayRead is Scope's refusal alone.
func mayRead(actor agentmarket.Actor) error {
	_, err := Scope(actor)
	return err
}

// List returns the entries f selects that actor may read, newest first.
func (l *Log) List(ctx context.Context, actor agentmarket.Actor, f Filter) ([]Entry, error) {
	if err := mayRead(actor); err != nil {
		return nil, err
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	all, _ := Scope(actor)
	if !all {
		f.Org = actor.OrgID
	}
	if f.Limit == 0 {
		f.Limit = DefaultLimit
	}
	es, err := l.Store.AuditEntries(ctx, f)
	if err != nil || all {
		return es, err
	}
	// An org's admins see that the platform's operator changed their
	// object (a review, a suspension), not which of the platform's people
	// or keys did, nor from where.
	for i := range es {
		if es[i].Operator {
			es[i].ActorUserID, es[i].ActorKeyID, es[i].ActorIP = "", "", ""
		}
		if view := l.TenantViews[es[i].ObjectType]; view != nil {
			es[i].Before, es[i].After = view(es[i].Before), view(es[i].After)
		}
	}
	return es, nil
}

// Checkpoint signs the chain's head unless it is signed already, and
// returns the checkpoint (nil when there was nothing new to sign).
func (l *Log) Checkpoint(ctx context.Context) (*Checkpoint, error) {
	h, err := l.Store.AuditHead(ctx)
	if err != nil || h.Seq == 0 {
		return nil, err
	}
	cps, err := l.Store.Checkpoints(ctx)
	if err != nil {
		return nil, err
	}
	if n := len(cps); n > 0 && cps[n-1].Seq >= h.Seq {
		return nil, nil
	}
	return l.sign(ctx, h, false)
}

func (l *Log) sign(ctx context.Context, h Head, prune bool) (*Checkpoint, error) {
	if l.Signer == nil {
		return nil, agentmarket.Errorf(agentmarket.Unavailable, "audit_unsigned", "the audit log has no signing key")
	}
	cp := Checkpoint{Seq: h.Seq, Hash: h.Hash, At: l.Clock.Now().UTC().Truncate(time.Microsecond), Prune: prune}
	payload := CheckpointPayload(&cp)
	protected, sig, err := l.Signer.SignJWS(ctx, payload, l.JKU)
	if err != nil {
		return nil, fmt.Errorf("sign audit checkpoint: %w", err)
	}
	kid, err := keyID(protected)
	if err != nil {
		return nil, err
	}
	cp.KeyID, cp.JWS = kid, protected+"."+b64(payload)+"."+sig
	if err := l.Store.AddCheckpoint(ctx, cp); err != nil {
		return nil, err
	}
	return &cp, nil
}

// Prune deletes the entries older than Retention, keeping the chain
// verifiable: the last entry pruned gets a signed checkpoint first, which
// stays and anchors the rest. It returns how many entries went.
func (l *Log) Prune(ctx context.Context) (int64, error) {
	if l.Retention <= 0 || l.Signer == nil {
		return 0, nil
	}
	through, err := l.Store.LastAuditBefore(ctx, l.Clock.Now().Add(-l.Retention))
	if err != nil || through == 0 {
		return 0, err
	}
	es, err := l.Store.WalkAudit(ctx, through-1, 1)
	if err != nil {
		return 0, err
	}
	if len(es) == 0 || es[0].Seq != through {
		return 0, fmt.Errorf("audit entry %d not found to anchor the prune", through)
	}
	if _, err := l.sign(ctx, Head{Seq: through, Hash: es[0].Hash}, true); err != nil {
		return 0, err
	}
	return l.Store.PruneAudit(ctx, through)
}

// every is CheckpointEvery, or its default.
func (l *Log) every() time.Duration {
	if l.CheckpointEvery <= 0 {
		return time.Hour
	}
	return l.CheckpointEvery
}

// Run signs a checkpoint and prunes every CheckpointEvery until ctx
// ends.
func (l *Log) Run(ctx context.Context) {
	every := l.every()
	log := l.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// At once too: the entries of a run that ended between two checkpoints
	// are covered as soon as the marketplace is back (Cadence).
	if _, err := l.Checkpoint(ctx); err != nil && ctx.Err() == nil {
		log.WarnContext(ctx, "audit checkpoint not signed", "err", err)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		if _, err := l.Checkpoint(ctx); err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "audit checkpoint not signed", "err", err)
		}
		if n, err := l.Prune(ctx); err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "audit log not pruned", "err", err)
		} else if n > 0 {
			log.InfoContext(ctx, "audit log pruned", "entries", n)
		}
	}
}
