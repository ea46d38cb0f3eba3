package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts/audit"
	"github.com/agentmarket/agentmarket/contracts/audit/audittest"
)

// AuditStores opens two stores over one fresh database, each with its own
// connections, as two marketplace processes have.
type AuditStores func(t *testing.T) (audit.Store, audit.Store)

// RunAudit runs the contract suite of the audit log's store
// (audit.Store), through audit.Log, against fresh stores from open.
func RunAudit(t *testing.T, open AuditStores) {
	ctx := context.Background()
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	newLog := func(s audit.Store) (*audit.Log, *agentmarket.ManualClock) {
		clock := agentmarket.NewManualClock(start)
		key := audittest.NewKey("audit-test")
		return &audit.Log{Store: s, Clock: clock, Signer: key, Keys: key}, clock
	}
	seller := agentmarket.Actor{OrgID: "org_seller", KeyID: "key_s", Role: agentmarket.RoleAdmin}
	buyer := agentmarket.Actor{OrgID: "org_buyer", KeyID: "key_b", Role: agentmarket.RoleAdmin}
	operator := agentmarket.Actor{OrgID: "org_platform", KeyID: "key_op", Role: agentmarket.RoleAdmin, Operator: true}

	t.Run("entries chain and read back as written", func(t *testing.T) {
		s, _ := open(t)
		log, clock := newLog(s)
		rctx := agentmarket.WithRequest(ctx, agentmarket.Request{ID: "req-1", IP: "192.0.2.7"})
		type listing struct {
			Name   string `json:"name"`
			Status string `json:"status"`
		}
		if err := log.RecordChange(rctx, agentmarket.Change{Actor: seller, Action: "listing.create", ObjectType: "listing", ObjectID: "lst_1",
			OrgID: "org_seller", After: listing{"Échos <&>", "pending_review"}}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second + 1500*time.Nanosecond)
		if err := log.RecordChange(ctx, agentmarket.Change{Actor: operator, Action: "listing.review", ObjectType: "listing", ObjectID: "lst_1",
			OrgID: "org_seller", Before: listing{"Échos <&>", "pending_review"}, After: listing{"Échos <&>", "published"}}); err != nil {
			t.Fatal(err)
		}
		es, err := s.WalkAudit(ctx, 0, 10)
		if err != nil || len(es) != 2 {
			t.Fatalf("walk: %d entries, %v", len(es), err)
		}
		e := es[0]
		if e.Seq != 1 || e.PrevHash != "" || e.ActorOrgID != "org_seller" || e.ActorKeyID != "key_s" || e.ActorIP != "192.0.2.7" ||
			e.RequestID != "req-1" || e.Action != "listing.create" || e.ObjectID != "lst_1" || string(e.Before) != "null" ||
			string(e.After) != `{"name":"Échos \u003c\u0026\u003e","status":"pending_review"}` {
			t.Errorf("first entry read back as %+v (after %s)", e, e.After)
		}
		if !e.At.Equal(start) || !es[1].At.Equal(start.Add(time.Second+time.Microsecond)) {
			t.Errorf("times %v, %v: want %v and the second to the microsecond", e.At, es[1].At, start)
		}
		if es[1].PrevHash != e.Hash || e.Hash != audit.HashOf(&e) || es[1].Hash != audit.HashOf(&es[1]) {
			t.Errorf("the chain does not link: %+v", es)
		}
		if h, err := s.AuditHead(ctx); err != nil || h != (audit.Head{Seq: 2, Hash: es[1].Hash}) {
			t.Errorf("head %+v %v", h, err)
		}
		r, err := audit.Verify(ctx, s, log.Keys, audit.Cadence{})
		if err != nil || !r.OK || r.Entries != 2 {
			t.Errorf("verify: %+v %v", r, err)
		}
	})

	t.Run("two processes appending at once do not fork the chain", func(t *testing.T) {
		a, b := open(t)
		la, _ := newLog(a)
		lb, _ := newLog(b)
		var wg sync.WaitGroup
		errs := make(chan error, 40)
		for i := range 40 {
			l := la
			if i%2 == 1 {
				l = lb
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- l.RecordChange(ctx, agentmarket.Change{Actor: buyer, Action: "api_key.create", ObjectType: "api_key", ObjectID: fmt.Sprint("key_", i), OrgID: "org_buyer"})
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		r, err := audit.Verify(ctx, a, nil, audit.Cadence{})
		if err != nil || !r.OK || r.Entries != 40 || r.LastSeq != 40 {
			t.Fatalf("after concurrent appends: %+v %v", r, err)
		}
	})

	t.Run("a chain verifies while another process appends", func(t *testing.T) {
		a, b := open(t)
		la, _ := newLog(a)
		done := make(chan error, 1)
		go func() {
			for i := range 60 {
				if err := la.RecordChange(ctx, agentmarket.Change{Action: "x.y", ObjectType: "x", ObjectID: fmt.Sprint(i)}); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		for running := true; running; {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				running = false
			default:
			}
			if r, err := audit.Verify(ctx, b, nil, audit.Cadence{}); err != nil || !r.OK {
				t.Fatalf("verify during appends: %+v %+v %v", r, r.Broken, err)
			}
		}
	})

	t.Run("filters, org scope, paging", func(t *testing.T) {
		s, _ := open(t)
		log, clock := newLog(s)
		rec := func(actor agentmarket.Actor, action, typ, id, org string) {
			t.Helper()
			if err := log.RecordChange(ctx, agentmarket.Change{Actor: actor, Action: action, ObjectType: typ, ObjectID: id, OrgID: org}); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Minute)
		}
		rec(seller, "listing.create", "listing", "lst_1", "org_seller")                           // 1
		rec(buyer, "subscription.create", "subscription", "ctr_1", "org_buyer")                   // 2
		rec(operator, "listing.review", "listing", "lst_1", "org_seller")                         // 3
		rec(buyer, "api_key.revoke", "api_key", "key_x", "org_buyer")                             // 4
		rec(agentmarket.Actor{}, "subscription.transition", "subscription", "ctr_1", "org_buyer") // 5
		seqs := func(f audit.Filter, actor agentmarket.Actor) string {
			t.Helper()
			es, err := log.List(ctx, actor, f)
			if err != nil {
				t.Fatal(err)
			}
			out := ""
			for _, e := range es {
				out += fmt.Sprint(e.Seq)
			}
			return out
		}
		for _, c := range []struct {
			name  string
			f     audit.Filter
			actor agentmarket.Actor
			want  string
		}{
			{"everything, for the operator", audit.Filter{}, operator, "54321"},
			{"the seller's admin sees its org's", audit.Filter{}, seller, "31"},
			{"the buyer's admin sees the webhook's too", audit.Filter{}, buyer, "542"},
			{"by actor key", audit.Filter{Actor: "key_b"}, operator, "42"},
			{"by actor org", audit.Filter{Actor: "org_platform"}, operator, "3"},
			{"by action", audit.Filter{Action: "listing.review"}, operator, "3"},
			{"by action prefix", audit.Filter{Action: "subscription."}, operator, "52"},
			{"by object", audit.Filter{ObjectType: "listing", ObjectID: "lst_1"}, operator, "31"},
			{"from, to", audit.Filter{From: start.Add(time.Minute), To: start.Add(3 * time.Minute)}, operator, "32"},
			{"a page", audit.Filter{Before: 4, Limit: 2}, operator, "32"},
		} {
			if got := seqs(c.f, c.actor); got != c.want {
				t.Errorf("%s: %s, want %s", c.name, got, c.want)
			}
		}
		if _, err := log.List(ctx, agentmarket.Actor{OrgID: "org_buyer", Role: agentmarket.RoleBuyer}, audit.Filter{}); agentmarket.KindOf(err) != agentmarket.Forbidden {
			t.Errorf("a buyer key reads the audit log: %v", err)
		}
		if _, err := log.List(ctx, operator, audit.Filter{Limit: audit.MaxLimit + 1}); agentmarket.KindOf(err) != agentmarket.Invalid {
			t.Errorf("a page over the limit: %v", err)
		}
	})

	t.Run("checkpoints are signed, once per head", func(t *testing.T) {
		s, _ := open(t)
		log, _ := newLog(s)
		if cp, err := log.Checkpoint(ctx); err != nil || cp != nil {
			t.Fatalf("a checkpoint of an empty chain: %+v %v", cp, err)
		}
		for i := range 3 {
			if err := log.RecordChange(ctx, agentmarket.Change{Action: "x.y", ObjectType: "x", ObjectID: fmt.Sprint(i)}); err != nil {
				t.Fatal(err)
			}
		}
		cp, err := log.Checkpoint(ctx)
		if err != nil || cp == nil || cp.Seq != 3 || cp.KeyID != "audit-test" {
			t.Fatalf("checkpoint: %+v %v", cp, err)
		}
		if again, err := log.Checkpoint(ctx); err != nil || again != nil {
			t.Errorf("a second checkpoint of the same head: %+v %v", again, err)
		}
		cps, err := s.Checkpoints(ctx)
		if err != nil || len(cps) != 1 || cps[0].JWS != cp.JWS || !cps[0].At.Equal(cp.At) {
			t.Fatalf("checkpoints read back: %+v %v", cps, err)
		}
		if r, err := audit.Verify(ctx, s, log.Keys, audit.Cadence{}); err != nil || !r.OK || r.Checkpoints != 1 {
			t.Errorf("verify: %+v %v", r, err)
		}
		other := audittest.NewKey("audit-test")
		if r, err := audit.Verify(ctx, s, other, audit.Cadence{}); err != nil || r.OK || r.Broken.Kind != "checkpoint" || r.Broken.Seq != 3 {
			t.Errorf("verified with another key: %+v %v", r, err)
		}
	})

	t.Run("pruning keeps the chain verifiable", func(t *testing.T) {
		s, _ := open(t)
		log, clock := newLog(s)
		log.Retention = 24 * time.Hour
		for i := range 5 {
			if err := log.RecordChange(ctx, agentmarket.Change{Action: "x.y", ObjectType: "x", ObjectID: fmt.Sprint(i)}); err != nil {
				t.Fatal(err)
			}
			if i == 2 {
				// A periodic checkpoint where the prune will cut.
				if _, err := log.Checkpoint(ctx); err != nil {
					t.Fatal(err)
				}
			}
			clock.Advance(12 * time.Hour)
		}
		// Entries 1..5 at 0, 12, 24, 36, 48 h; now is 60 h: 1, 2 and 3
		// are older than a day.
		n, err := log.Prune(ctx)
		if err != nil || n != 3 {
			t.Fatalf("prune: %d %v, want 3", n, err)
		}
		if cps, err := s.Checkpoints(ctx); err != nil || len(cps) != 1 || cps[0].Seq != 3 || !cps[0].Prune {
			t.Errorf("the checkpoint at the prune point: %+v %v, want the prune's, in place of the periodic one", cps, err)
		}
		es, _ := s.WalkAudit(ctx, 0, 10)
		if len(es) != 2 || es[0].Seq != 4 {
			t.Fatalf("left: %+v", es)
		}
		r, err := audit.Verify(ctx, s, log.Keys, audit.Cadence{})
		if err != nil || !r.OK || r.FirstSeq != 4 || r.LastSeq != 5 || r.Checkpoints != 1 {
			t.Errorf("verify after the prune: %+v %v", r, err)
		}
		if err := log.RecordChange(ctx, agentmarket.Change{Action: "x.y", ObjectType: "x", ObjectID: "6"}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(72 * time.Hour)
		if n, err := log.Prune(ctx); err != nil || n != 3 {
			t.Fatalf("prune everything: %d %v", n, err)
		}
		if r, err := audit.Verify(ctx, s, log.Keys, audit.Cadence{}); err != nil || !r.OK || r.Entries != 0 {
			t.Errorf("verify with every entry pruned: %+v %v", r, err)
		}
		if err := log.RecordChange(ctx, agentmarket.Change{Action: "x.y", ObjectType: "x", ObjectID: "7"}); err != nil {
			t.Fatal(err)
		}
		if r, err := audit.Verify(ctx, s, log.Keys, audit.Cadence{}); err != nil || !r.OK || r.FirstSeq != 7 {
			t.Errorf("verify after an entry past a full prune: %+v %v", r, err)
		}
		if _, err := s.PruneAudit(ctx, 7); err == nil {
			t.Errorf("a prune without a checkpoint at its point was made")
		}
	})
}
