package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/contracts"
)

// RunSent runs the contract suite of the records of sent messages
// (idempotent sends) against a fresh store from newStore.
func RunSent(t *testing.T, newStore func(t *testing.T) contracts.SentMessages) {
	ctx := context.Background()
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	key := func(msg string) contracts.SentKey {
		return contracts.SentKey{ListingID: "lst_1", OrgID: "org_b", MessageID: msg}
	}
	claim := func(msg, claimID string, at time.Time) contracts.SentMessage {
		return contracts.SentMessage{SentKey: key(msg), ContractID: "ctr_1", Digest: "d-" + msg, ClaimID: claimID,
			Stage: contracts.SentInFlight, ClaimedAt: at, HeldUntil: at.Add(30 * time.Second), ExpiresAt: at.Add(24 * time.Hour)}
	}
	record := func(t *testing.T, s contracts.SentMessages, now time.Time, recs ...contracts.SentMessage) []bool {
		t.Helper()
		applied, err := s.RecordSent(ctx, recs, now)
		if err != nil {
			t.Fatalf("RecordSent: %v", err)
		}
		if len(applied) != len(recs) {
			t.Fatalf("RecordSent: %d answers for %d records", len(applied), len(recs))
		}
		return applied
	}
	find := func(t *testing.T, s contracts.SentMessages, now time.Time, msg string) *contracts.SentMessage {
		t.Helper()
		got, err := s.FindSent(ctx, []contracts.SentKey{key(msg)}, now)
		if err != nil || len(got) != 1 {
			t.Fatalf("FindSent: %v %v", got, err)
		}
		return got[0]
	}
	show := func(m *contracts.SentMessage) string {
		if m == nil {
			return "none"
		}
		return fmt.Sprintf("claim=%s stage=%d task=%q ctx=%q state=%q result=%q/%s digest=%s", m.ClaimID, m.Stage, m.TaskID, m.ContextID,
			m.State, m.Result, m.ResultVersion, m.Digest)
	}

	t.Run("claim, learn the task, end", func(t *testing.T) {
		s := newStore(t)
		if got := find(t, s, t0, "m1"); got != nil {
			t.Fatalf("before any send: %s", show(got))
		}
		c := claim("m1", "use_1", t0)
		if a := record(t, s, t0, c); !a[0] {
			t.Fatal("the first claim was not written")
		}
		got := find(t, s, t0.Add(time.Second), "m1")
		if got == nil || got.ClaimID != "use_1" || got.Stage != contracts.SentInFlight || got.Digest != "d-m1" || got.ContractID != "ctr_1" ||
			!got.ClaimedAt.Equal(t0) || !got.ExpiresAt.Equal(t0.Add(24*time.Hour)) || !got.HeldUntil.Equal(t0.Add(30*time.Second)) {
			t.Fatalf("claimed: %s %+v", show(got), got)
		}
		// Another call's claim over a live one changes nothing.
		if a := record(t, s, t0.Add(time.Second), claim("m1", "use_2", t0.Add(time.Second))); a[0] {
			t.Error("a second claim over a live one was written")
		}
		// The task becomes known, then the call ends.
		known := c
		known.TaskID, known.ContextID, known.State = "task-1", "ctx-1", "working"
		done := known
		done.Stage, done.State = contracts.SentDone, "completed"
		if a := record(t, s, t0.Add(2*time.Second), known, done); !a[0] || !a[1] {
			t.Errorf("the claim's own records were not written: %v", a)
		}
		// The spool replays the claim and the learned task late: nothing
		// moves back.
		if a := record(t, s, t0.Add(3*time.Second), c, known); !a[0] || !a[1] {
			t.Errorf("replayed records: %v", a)
		}
		got = find(t, s, t0.Add(3*time.Second), "m1")
		if got == nil || got.ClaimID != "use_1" || got.Stage != contracts.SentDone || got.TaskID != "task-1" || got.ContextID != "ctx-1" || got.State != "completed" {
			t.Fatalf("after the end and late replays: %s", show(got))
		}
		// After the window the id is free: not found, and a new claim takes it.
		end := t0.Add(24 * time.Hour)
		if got := find(t, s, end, "m1"); got != nil {
			t.Errorf("after the window: %s", show(got))
		}
		if a := record(t, s, end, claim("m1", "use_3", end)); !a[0] {
			t.Error("a claim after the window was not written")
		}
		if got := find(t, s, end, "m1"); got == nil || got.ClaimID != "use_3" || got.TaskID != "" || got.Stage != contracts.SentInFlight {
			t.Errorf("claimed again after the window: %s", show(got))
		}
	})

	t.Run("a message answer", func(t *testing.T) {
		s := newStore(t)
		c := claim("m2", "use_1", t0)
		done := c
		done.Stage, done.Result, done.ResultVersion = contracts.SentDone, []byte(`{"kind":"message","messageId":"a-1"}`), "0.3"
		record(t, s, t0, done, c) // the claim is written after the end: the end stays
		if got := find(t, s, t0, "m2"); got == nil || got.Stage != contracts.SentDone || string(got.Result) != `{"kind":"message","messageId":"a-1"}` ||
			got.ResultVersion != "0.3" || got.TaskID != "" {
			t.Errorf("message answer: %s", show(got))
		}
	})

	t.Run("released and abandoned claims are taken over", func(t *testing.T) {
		s := newStore(t)
		c := claim("m3", "use_1", t0)
		rel := c
		rel.Stage = contracts.SentReleased
		record(t, s, t0, c, rel)
		if got := find(t, s, t0, "m3"); got != nil {
			t.Errorf("released: %s", show(got))
		}
		// The released call's own claim, replayed, does not revive it.
		if a := record(t, s, t0, c); !a[0] {
			t.Error("a replayed record of the claim was refused")
		}
		if got := find(t, s, t0, "m3"); got != nil {
			t.Errorf("released, then its claim replayed: %s", show(got))
		}
		if a := record(t, s, t0.Add(time.Second), claim("m3", "use_2", t0.Add(time.Second))); !a[0] {
			t.Error("a claim over a released one was not written")
		}
		// use_2's meter stops: its claim, without a task, is abandoned at
		// HeldUntil, not before.
		at := t0.Add(time.Second + 29*time.Second)
		if a := record(t, s, at, claim("m3", "use_3", at)); a[0] {
			t.Error("a claim taken over before its hold ended")
		}
		at = t0.Add(time.Second + 30*time.Second)
		if got := find(t, s, at, "m3"); got == nil || got.ClaimID != "use_2" || !got.Replaceable(at) {
			t.Errorf("abandoned claim: %s, replaceable=%v", show(got), got != nil && got.Replaceable(at))
		}
		if a := record(t, s, at, claim("m3", "use_3", at)); !a[0] {
			t.Error("an abandoned claim was not taken over")
		}
		// A claim in flight that knows its task is never abandoned.
		c4 := claim("m4", "use_4", t0)
		c4.TaskID = "task-4"
		record(t, s, t0, c4)
		late := t0.Add(time.Hour)
		if a := record(t, s, late, claim("m4", "use_5", late)); a[0] {
			t.Error("a claim in flight with a task was taken over")
		}
	})

	t.Run("keys are per listing, org and message", func(t *testing.T) {
		s := newStore(t)
		a := claim("m", "use_a", t0)
		b := a
		b.OrgID, b.ClaimID = "org_other", "use_b"
		l := a
		l.ListingID, l.ClaimID = "lst_2", "use_l"
		if got := record(t, s, t0, a, b, l); !got[0] || !got[1] || !got[2] {
			t.Errorf("claims of three keys: %v", got)
		}
		found, err := s.FindSent(ctx, []contracts.SentKey{b.SentKey, a.SentKey, {ListingID: "lst_1", OrgID: "org_b", MessageID: "nope"}, l.SentKey}, t0)
		if err != nil || len(found) != 4 || found[0] == nil || found[0].ClaimID != "use_b" || found[1] == nil || found[1].ClaimID != "use_a" ||
			found[2] != nil || found[3] == nil || found[3].ClaimID != "use_l" {
			t.Errorf("FindSent of several keys: %v %v", found, err)
		}
	})

	t.Run("batches", func(t *testing.T) {
		s := newStore(t)
		var recs []contracts.SentMessage
		var keys []contracts.SentKey
		for i := range 150 {
			c := claim(fmt.Sprintf("b-%03d", i), fmt.Sprintf("use_%d", i), t0)
			recs = append(recs, c)
			keys = append(keys, c.SentKey)
		}
		for _, a := range record(t, s, t0, recs...) {
			if !a {
				t.Fatal("a claim of a batch was not written")
			}
		}
		found, err := s.FindSent(ctx, keys, t0)
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range found {
			if f == nil || f.ClaimID != recs[i].ClaimID {
				t.Fatalf("record %d of the batch: %s", i, show(f))
			}
		}
		n, err := s.PruneSent(ctx, t0.Add(25*time.Hour))
		if err != nil || n != 150 {
			t.Errorf("PruneSent = %d %v, want 150", n, err)
		}
	})
}
