package gormstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts/audit"
	"github.com/agentmarket/agentmarket/contracts/audit/audittest"
	"github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/migrations/relational"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// TestAuditTampering: what someone with write access to the tables does
// to a chain of five entries, checkpointed at the fourth, and the row
// Verify names.
func TestAuditTampering(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		sql  []string
		kind string
		seq  int64
		why  string
	}{
		{"an edited entry", []string{"UPDATE audit_entries SET actor_ip = '203.0.113.9' WHERE seq = 2"}, "entry", 2, "its contents do not match its hash"},
		{"an edited entry with its hash made again", []string{"UPDATE audit_entries SET object_id = 'x9', hash = 'f00d' WHERE seq = 3"}, "entry", 3, "its contents do not match its hash"},
		{"a deleted entry", []string{"DELETE FROM audit_entries WHERE seq = 3"}, "entry", 3, "missing: the next entry found is 4"},
		{"two entries swapped", []string{"UPDATE audit_entries SET seq = 100 WHERE seq = 2", "UPDATE audit_entries SET seq = 2 WHERE seq = 3",
			"UPDATE audit_entries SET seq = 3 WHERE seq = 100"}, "entry", 2, "its prev_hash does not match entry 1"},
		{"the newest entries deleted", []string{"DELETE FROM audit_entries WHERE seq >= 4"}, "entry", 4, "missing: checkpoint 4 was signed after it"},
		{"the newest entry deleted", []string{"DELETE FROM audit_entries WHERE seq = 5"}, "head", 5, "the chain's head is entry 5 but the last entry is 4"},
		{"the oldest entries deleted", []string{"DELETE FROM audit_entries WHERE seq <= 2"}, "entry", 3, "the entries before it are gone and no prune's checkpoint at 2 anchors it"},
		{"the oldest entries deleted up to a checkpoint", []string{"DELETE FROM audit_entries WHERE seq <= 4"}, "entry", 5,
			"the entries before it are gone and no prune's checkpoint at 4 anchors it"},
		{"every entry deleted", []string{"DELETE FROM audit_entries"}, "entry", 4, "missing: the entries up to checkpoint 4 are gone, and no prune took them"},
		{"an entry added past the head", []string{"INSERT INTO audit_entries (seq, at, action, object_type, prev_hash, hash) SELECT 6, at, 'x.y', 'x', hash, 'f00d' FROM audit_entries WHERE seq = 5"},
			"entry", 6, "it lies beyond the chain's head, entry 5"},
		{"an entry's after made not JSON", []string{"UPDATE audit_entries SET after_json = '{not json' WHERE seq = 5"}, "entry", 5, "its before or after is not JSON"},
		{"a checkpoint forged", []string{"UPDATE audit_checkpoints SET hash = 'f00d'"}, "checkpoint", 4, "its signed payload is not its seq, hash, time and kind"},
		{"a checkpoint made a prune's", []string{"UPDATE audit_checkpoints SET prune = TRUE"}, "checkpoint", 4, "its signed payload is not its seq, hash, time and kind"},
	}
	relationaltest.Each(t, func(t *testing.T, db *relational.DB) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				// A fresh chain per case: the tables are emptied first.
				for _, q := range []string{"DELETE FROM audit_entries", "DELETE FROM audit_checkpoints", "UPDATE audit_chain_head SET seq = 0, hash = ''"} {
					if err := db.DB.Exec(q).Error; err != nil {
						t.Fatal(err)
					}
				}
				s := gormstore.New(db.DB)
				key := audittest.NewKey("k1")
				log := &audit.Log{Store: s, Clock: agentmarket.NewManualClock(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)), Signer: key, Keys: key}
				for i := range 5 {
					if err := log.RecordChange(ctx, agentmarket.Change{Action: "x.y", ObjectType: "x", ObjectID: fmt.Sprint(i)}); err != nil {
						t.Fatal(err)
					}
					if i == 3 {
						if _, err := log.Checkpoint(ctx); err != nil {
							t.Fatal(err)
						}
					}
				}
				if r, err := audit.Verify(ctx, s, key, audit.Cadence{}); err != nil || !r.OK {
					t.Fatalf("before: %+v %v", r, err)
				}
				for _, q := range c.sql {
					if err := db.DB.Exec(q).Error; err != nil {
						t.Fatal(err)
					}
				}
				r, err := audit.Verify(ctx, s, key, audit.Cadence{})
				if err != nil || r.OK || r.Broken == nil || *r.Broken != (audit.Break{Seq: c.seq, Kind: c.kind, Reason: c.why}) {
					t.Errorf("verify: %+v %+v %v, want %s %d: %s", r, r.Broken, err, c.kind, c.seq, c.why)
				}
			})
		}
	})
}

// TestAuditRewriteNeedsTheKey: whoever can write the database but not
// sign (no secret key) deletes the checkpoints, rewrites an entry and
// rehashes the chain after it; held to the checkpoints' cadence, the
// chain no longer verifies, naming the first entry no checkpoint covers.
// A chain whose checkpoints keep up verifies, and an entry since the last
// checkpoint younger than two intervals is not yet due one.
func TestAuditRewriteNeedsTheKey(t *testing.T) {
	ctx := context.Background()
	relationaltest.Each(t, func(t *testing.T, db *relational.DB) {
		s := gormstore.New(db.DB)
		key := audittest.NewKey("k1")
		clock := agentmarket.NewManualClock(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
		log := &audit.Log{Store: s, Clock: clock, Signer: key, Keys: key, CheckpointEvery: time.Hour}
		record := func(i int) {
			t.Helper()
			if err := log.RecordChange(ctx, agentmarket.Change{Action: "x.y", ObjectType: "x", ObjectID: fmt.Sprint(i), After: map[string]int{"n": i}}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 4 {
			record(i)
			clock.Advance(20 * time.Minute)
		}
		if _, err := log.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		clock.Advance(30 * time.Minute)
		record(4) // entry 5, after the checkpoint, not yet due one
		clock.Advance(30 * time.Minute)
		if r, err := log.Verify(ctx, agentmarket.Actor{Role: agentmarket.RoleAdmin, Operator: true}); err != nil || !r.OK {
			t.Fatalf("a chain whose checkpoints keep up: %+v %+v %v", r, r.Broken, err)
		}

		// The rewrite: checkpoints gone, entry 2 changed, entries 2 to 5
		// rehashed, the head moved: every link holds.
		for _, q := range []string{"DELETE FROM audit_checkpoints"} {
			if err := db.DB.Exec(q).Error; err != nil {
				t.Fatal(err)
			}
		}
		es, err := s.WalkAudit(ctx, 0, 10)
		if err != nil || len(es) != 5 {
			t.Fatalf("walk: %d %v", len(es), err)
		}
		es[1].After = []byte(`{"n":100}`)
		for i := 1; i < len(es); i++ {
			es[i].PrevHash = es[i-1].Hash
			es[i].Hash = audit.HashOf(&es[i])
			if err := db.DB.Exec("UPDATE audit_entries SET after_json = ?, prev_hash = ?, hash = ? WHERE seq = ?", string(es[i].After), es[i].PrevHash, es[i].Hash, es[i].Seq).Error; err != nil {
				t.Fatal(err)
			}
		}
		if err := db.DB.Exec("UPDATE audit_chain_head SET hash = ? WHERE id = 1", es[4].Hash).Error; err != nil {
			t.Fatal(err)
		}
		if r, err := audit.Verify(ctx, s, key, audit.Cadence{}); err != nil || !r.OK {
			t.Fatalf("the rewrite should hold link by link: %+v %+v %v", r, r.Broken, err)
		}
		r, err := log.Verify(ctx, agentmarket.Actor{Role: agentmarket.RoleAdmin, Operator: true})
		if err != nil || r.OK || r.Broken == nil || r.Broken.Kind != "entry" || r.Broken.Seq != 1 ||
			!strings.Contains(r.Broken.Reason, "no signed checkpoint covers it") {
			t.Errorf("the rewrite held to the cadence: %+v %+v %v", r, r.Broken, err)
		}
	})
}
