package audit

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// Report is what Verify found.
type Report struct {
	OK bool `json:"ok"`
	// Entries is how many entries were walked, from FirstSeq to LastSeq.
	Entries  int64 `json:"entries"`
	FirstSeq int64 `json:"first_seq"`
	LastSeq  int64 `json:"last_seq"`
	// Checkpoints is how many signed checkpoints verified.
	Checkpoints int `json:"checkpoints"`
	// Broken is the first broken link; nil when OK.
	Broken *Break `json:"broken,omitempty"`
}

// Break names the first row where the chain does not hold, and why.
type Break struct {
	// Seq is the row (the entry's seq; a checkpoint's, for Kind
	// "checkpoint").
	Seq    int64  `json:"seq"`
	Kind   string `json:"kind"` // "entry", "checkpoint" or "head"
	Reason string `json:"reason"`
}

func (b *Break) Error() string { return fmt.Sprintf("%s %d: %s", b.Kind, b.Seq, b.Reason) }

// walkPage is how many entries Verify reads at a time.
const walkPage = 500

// Cadence is how often checkpoints are signed (Log.CheckpointEvery), for
// Verify to hold the chain to it at Now; the zero Cadence holds it to
// nothing.
//
// Without it the checkpoints prove only what they cover while they are
// there: whoever can write the database could delete them, rewrite any
// entry, rehash every entry after it and move the head, and the chain
// would verify. With it an entry older than two intervals (and a minute)
// that no signed checkpoint covers breaks the chain: a rewrite must then
// keep to the entries since the last checkpoint, which only the secret
// key's holder can sign anew.
type Cadence struct {
	Now   time.Time
	Every time.Duration
}

// uncovered reports whether an entry written at at should be covered by
// a checkpoint by now.
func (c Cadence) uncovered(at time.Time) bool {
	return c.Every > 0 && at.Before(c.Now.Add(-2*c.Every-time.Minute))
}

// Verify walks the whole chain in store: every entry's hash, every link
// to the previous entry (or to the checkpoint a prune left), every
// checkpoint's hash and signature (with keys), the head, and (with a
// Cadence) that the checkpoints keep up with the entries. It stops at
// the first broken link. An error is returned only when the store or the
// keys cannot be read.
func Verify(ctx context.Context, store Store, keys Keys, cadence Cadence) (*Report, error) {
	cps, err := store.Checkpoints(ctx)
	if err != nil {
		return nil, err
	}
	// Entries appended while the walk runs move the head on; it is read
	// again when the walk passes it.
	head, err := store.AuditHead(ctx)
	if err != nil {
		return nil, err
	}
	pub, err := publicKeys(ctx, keys)
	if err != nil {
		return nil, err
	}
	r := &Report{}
	fail := func(seq int64, kind, format string, args ...any) (*Report, error) {
		r.Broken = &Break{Seq: seq, Kind: kind, Reason: fmt.Sprintf(format, args...)}
		return r, nil
	}
	bySeq := map[int64]*Checkpoint{}
	var covered int64 // the last signed checkpoint's entry
	for i := range cps {
		covered = max(covered, cps[i].Seq)
		cp := &cps[i]
		if err := verifyCheckpoint(cp, pub); err != nil {
			return fail(cp.Seq, "checkpoint", "%v", err)
		}
		bySeq[cp.Seq] = cp
		r.Checkpoints++
	}
	// The chain starts at the first entry, or after the checkpoint a
	// prune left.
	var prev Head
	first := true
	for after := int64(0); ; {
		es, err := store.WalkAudit(ctx, after, walkPage)
		if err != nil {
			return nil, err
		}
		for i := range es {
			e := &es[i]
			if e.Seq > head.Seq {
				// Appended since the head was read, or put there by
				// hand: the head, read again, says which.
				if head, err = store.AuditHead(ctx); err != nil {
					return nil, err
				}
				if e.Seq > head.Seq {
					return fail(e.Seq, "entry", "it lies beyond the chain's head, entry %d", head.Seq)
				}
			}
			if first {
				first = false
				r.FirstSeq = e.Seq
				if e.Seq != 1 {
					anchor := bySeq[e.Seq-1]
					if anchor == nil || !anchor.Prune {
						return fail(e.Seq, "entry", "the entries before it are gone and no prune's checkpoint at %d anchors it", e.Seq-1)
					}
					prev = Head{Seq: anchor.Seq, Hash: anchor.Hash}
				}
			}
			if e.Seq != prev.Seq+1 {
				return fail(prev.Seq+1, "entry", "missing: the next entry found is %d", e.Seq)
			}
			if e.PrevHash != prev.Hash {
				return fail(e.Seq, "entry", "its prev_hash does not match entry %d", prev.Seq)
			}
			if !jsonOrEmpty(e.Before) || !jsonOrEmpty(e.After) {
				// Canonical hashes such an entry by fewer of its fields:
				// none is written so, so one found so was edited.
				return fail(e.Seq, "entry", "its before or after is not JSON")
			}
			if got := HashOf(e); got != e.Hash {
				return fail(e.Seq, "entry", "its contents do not match its hash")
			}
			if cp := bySeq[e.Seq]; cp != nil && cp.Hash != e.Hash {
				return fail(e.Seq, "entry", "it does not match the checkpoint signed at %d", e.Seq)
			}
			if e.Seq > covered && cadence.uncovered(e.At) {
				return fail(e.Seq, "entry", "written %s, and no signed checkpoint covers it though one is signed every %s: the checkpoints after it were removed (and the entries since may be rewritten), or the marketplace has not run since",
					e.At.UTC().Format(time.RFC3339), cadence.Every)
			}
			prev = Head{Seq: e.Seq, Hash: e.Hash}
			r.Entries++
			r.LastSeq = e.Seq
		}
		if len(es) == walkPage {
			after = es[len(es)-1].Seq
			continue
		}
		// The end of what was stored when the page was read. A head
		// further on means entries appended since (the walk goes on) or
		// entries deleted at the end (the head's check names them).
		if first || head.Seq <= prev.Seq {
			break
		}
		more, err := store.WalkAudit(ctx, prev.Seq, 1)
		if err != nil {
			return nil, err
		}
		if len(more) == 0 {
			break
		}
		after = prev.Seq
	}
	if first && len(cps) > 0 {
		// Everything was pruned: the chain continues from the last
		// checkpoint, a prune's.
		last := cps[len(cps)-1]
		if !last.Prune {
			return fail(last.Seq, "entry", "missing: the entries up to checkpoint %d are gone, and no prune took them", last.Seq)
		}
		prev = Head{Seq: last.Seq, Hash: last.Hash}
	}
	if n := len(cps); n > 0 && cps[n-1].Seq > prev.Seq {
		return fail(prev.Seq+1, "entry", "missing: checkpoint %d was signed after it", cps[n-1].Seq)
	}
	if head != prev {
		return fail(head.Seq, "head", "the chain's head is entry %d but the last entry is %d", head.Seq, prev.Seq)
	}
	r.OK = true
	return r, nil
}

// Verify checks the whole chain for actor, an operator (Scope): the walk
// reads every org's entries, and what it reports (counts, where it broke)
// is the whole platform's, so an org's admin may not ask for it (nor load
// the database with it at will).
func (l *Log) Verify(ctx context.Context, actor agentmarket.Actor) (*Report, error) {
	all, err := Scope(actor)
	if err != nil {
		return nil, err
	}
	if !all {
		return nil, agentmarket.Errorf(agentmarket.Forbidden, "forbidden", "only the platform's operators verify the audit chain")
	}
	return Verify(ctx, l.Store, l.Keys, l.cadence())
}

// cadence is the log's own Cadence, now.
func (l *Log) cadence() Cadence {
	return Cadence{Now: l.Clock.Now(), Every: l.every()}
}

// SealedKeys are the audit keys whose private half, sealed with the
// marketplace's secret key, opens and matches the public half. The public
// halves sit in the database next to the chain: a key someone wrote into
// the table without the secret key is no audit key, and what it signed
// does not verify.
type SealedKeys struct {
	Keys Keys
	// Open opens a sealed private half (listings.Sealer's Open).
	Open func(sealed, context []byte) ([]byte, error)
	// Context is what the private half of key kid was sealed to
	// (a2aproxy/pushsign's, for the keys' purpose).
	Context func(kid string) []byte
}

// PushKeys implements Keys: the keys that open.
func (s SealedKeys) PushKeys(ctx context.Context) ([]contracts.PushKey, error) {
	ks, err := s.Keys.PushKeys(ctx)
	if err != nil {
		return nil, err
	}
	var out []contracts.PushKey
	for _, k := range ks {
		der, err := s.Open(k.Sealed, s.Context(k.ID))
		if err != nil {
			continue
		}
		priv, err := x509.ParsePKCS8PrivateKey(der)
		if err != nil {
			continue
		}
		pub, err := x509.ParsePKIXPublicKey(k.Public)
		if ec, ok := priv.(*ecdsa.PrivateKey); ok && err == nil && ec.PublicKey.Equal(pub) {
			out = append(out, k)
		}
	}
	return out, nil
}

func publicKeys(ctx context.Context, keys Keys) (map[string]*ecdsa.PublicKey, error) {
	out := map[string]*ecdsa.PublicKey{}
	if keys == nil {
		return out, nil
	}
	ks, err := keys.PushKeys(ctx)
	if err != nil {
		return nil, err
	}
	for _, k := range ks {
		p, err := x509.ParsePKIXPublicKey(k.Public)
		if err != nil {
			return nil, fmt.Errorf("audit key %s: %w", k.ID, err)
		}
		if ec, ok := p.(*ecdsa.PublicKey); ok {
			out[k.ID] = ec
		}
	}
	return out, nil
}

// verifyCheckpoint checks cp's JWS (ES256, attached payload) with the key
// its header names, and that its payload says cp's seq, hash and time.
func verifyCheckpoint(cp *Checkpoint, keys map[string]*ecdsa.PublicKey) error {
	parts := strings.Split(cp.JWS, ".")
	if len(parts) != 3 {
		return fmt.Errorf("its signature is not a compact JWS")
	}
	var hdr struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil || json.Unmarshal(raw, &hdr) != nil {
		return fmt.Errorf("its signature's header is not readable")
	}
	if hdr.Alg != "ES256" {
		return fmt.Errorf("its signature's algorithm %q is not ES256", hdr.Alg)
	}
	pub := keys[hdr.Kid]
	if pub == nil || hdr.Kid != cp.KeyID {
		return fmt.Errorf("its signing key %q is not an audit key", hdr.Kid)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return fmt.Errorf("its signature is not readable")
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(pub, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return fmt.Errorf("its signature does not verify")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || !bytes.Equal(payload, CheckpointPayload(cp)) {
		return fmt.Errorf("its signed payload is not its seq, hash, time and kind")
	}
	return nil
}

func keyID(protected string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(protected)
	if err != nil {
		return "", fmt.Errorf("audit checkpoint header: %w", err)
	}
	var hdr struct {
		Kid string `json:"kid"`
	}
	if err := json.Unmarshal(raw, &hdr); err != nil || hdr.Kid == "" {
		return "", fmt.Errorf("audit checkpoint header names no key")
	}
	return hdr.Kid, nil
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jsonOrEmpty reports whether b is JSON, or empty (none).
func jsonOrEmpty(b json.RawMessage) bool { return len(b) == 0 || json.Valid(b) }
