package storetest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

func pushConfig(listingID, taskID, configID string, created time.Time) contracts.PushConfig {
	return contracts.PushConfig{
		ListingID: listingID, TaskID: taskID, ConfigID: configID, OrgID: "org_a", APIKeyID: "key_a", Version: "1.0",
		URL: "https://hooks.example.com/" + configID, Sealed: []byte{0, 1, 2, 255, 'x'}, AuthScheme: "Bearer",
		CallbackID: "cb_" + listingID + "_" + taskID + "_" + configID, SecretHash: strings.Repeat("ab", 32), CreatedAt: created,
	}
}

func showConfig(c contracts.PushConfig) string {
	return fmt.Sprintf("%s/%s/%s org=%s key=%s v=%s url=%s sealed=%x auth=%s cb=%s secret=%s created=%s", c.ListingID, c.TaskID, c.ConfigID,
		c.OrgID, c.APIKeyID, c.Version, c.URL, c.Sealed, c.AuthScheme, c.CallbackID, c.SecretHash, ts(c.CreatedAt))
}

func wantConfig(t *testing.T, what string, got *contracts.PushConfig, err error, want contracts.PushConfig) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	want.CreatedAt = want.CreatedAt.UTC()
	if g, w := showConfig(*got), showConfig(want); g != w {
		t.Errorf("%s =\n  %s\nwant\n  %s", what, g, w)
	}
}

// delivery is a pending delivery to config configID of task_1 on lst_1.
func delivery(id, configID string, created time.Time) contracts.Delivery {
	return contracts.Delivery{ID: id, ListingID: "lst_1", TaskID: "task_1", ConfigID: configID, OrgID: "org_a",
		Body: []byte(`{"notification":"` + id + `"}`), Status: contracts.DeliveryPending, NextAttemptAt: created, CreatedAt: created}
}

func deliveryIDs(ds []contracts.Delivery) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

func runPush(t *testing.T, newStore TaskFactory) {
	ctx := context.Background()
	enqueue := func(t *testing.T, s TaskStore, ds ...contracts.Delivery) {
		t.Helper()
		for _, d := range ds {
			ok, err := s.Enqueue(ctx, d)
			wantBool(t, "Enqueue("+d.ID+")", ok, err, true)
		}
	}
	claim := func(t *testing.T, s TaskStore, now, leaseUntil time.Time, want ...string) []contracts.Delivery {
		t.Helper()
		got, err := s.ClaimDeliveries(ctx, now, leaseUntil, 10, contracts.ClaimSkip{})
		must(t, err)
		ids := deliveryIDs(got)
		slices.Sort(ids)
		if want == nil {
			want = []string{}
		}
		if !slices.Equal(ids, want) {
			t.Errorf("ClaimDeliveries at %s = %v, want %v", now.Format(time.TimeOnly), ids, want)
		}
		return got
	}
	attempted := func(t *testing.T, s TaskStore, id string, status contracts.DeliveryStatus, attempts int, next time.Time, at time.Time) {
		t.Helper()
		must(t, s.DeliveryAttempted(ctx, id, status, attempts, next, 503, "busy", at))
	}

	t.Run("push configs: save, read, list, replace, delete", func(t *testing.T) {
		s, _ := newStore(t)
		c1 := pushConfig("lst_1", "task_1", "cfg_1", t0)
		c2 := pushConfig("lst_1", "task_1", "cfg_0", t0.Add(time.Minute))
		c3 := pushConfig("lst_1", "task_2", "cfg_1", t0)
		c3.Sealed = nil
		for _, c := range []contracts.PushConfig{c1, c2, c3} {
			must(t, s.SavePushConfig(ctx, c))
		}
		got, err := s.PushConfig(ctx, "lst_1", "task_1", "cfg_1")
		wantConfig(t, "PushConfig", got, err, c1)
		got, err = s.PushCallback(ctx, c2.CallbackID)
		wantConfig(t, "PushCallback", got, err, c2)
		got, err = s.PushConfig(ctx, "lst_1", "task_2", "cfg_1")
		if err != nil || len(got.Sealed) != 0 {
			t.Errorf("PushConfig with nothing sealed = %+v, %v; want empty Sealed", got, err)
		}
		list, err := s.PushConfigs(ctx, "lst_1", "task_1")
		must(t, err)
		if len(list) != 2 {
			t.Fatalf("PushConfigs = %d configs, want 2", len(list))
		}
		wantConfig(t, "PushConfigs[0]", &list[0], nil, c1)
		wantConfig(t, "PushConfigs[1]", &list[1], nil, c2)
		if list, err := s.PushConfigs(ctx, "lst_2", "task_1"); err != nil || len(list) != 0 {
			t.Errorf("PushConfigs of another listing = %d, %v; want none", len(list), err)
		}

		// Saving the same (listing, task, config) replaces it, callback too.
		r := c1
		r.URL, r.Version, r.Sealed, r.CallbackID, r.SecretHash = "https://other.example.com/x", "0.3", []byte("new"), "cb_new", "cd"
		must(t, s.SavePushConfig(ctx, r))
		got, err = s.PushConfig(ctx, "lst_1", "task_1", "cfg_1")
		wantConfig(t, "PushConfig after a replace", got, err, r)
		got, err = s.PushCallback(ctx, "cb_new")
		wantConfig(t, "PushCallback after a replace", got, err, r)
		_, err = s.PushCallback(ctx, c1.CallbackID)
		wantKind(t, "PushCallback of the replaced callback", err, agentmarket.NotFound)
		if list, _ := s.PushConfigs(ctx, "lst_1", "task_1"); len(list) != 2 {
			t.Errorf("PushConfigs after a replace = %d configs, want still 2", len(list))
		}

		must(t, s.DeletePushConfig(ctx, "lst_1", "task_1", "cfg_1"))
		_, err = s.PushConfig(ctx, "lst_1", "task_1", "cfg_1")
		wantKind(t, "PushConfig after delete", err, agentmarket.NotFound)
		_, err = s.PushCallback(ctx, "cb_new")
		wantKind(t, "PushCallback after delete", err, agentmarket.NotFound)
		if err := s.DeletePushConfig(ctx, "lst_1", "task_1", "cfg_1"); err != nil {
			t.Errorf("DeletePushConfig again = %v, want nil: a deleted config stays deleted", err)
		}
		wantKind(t, "DeletePushConfig of a config the task never had", s.DeletePushConfig(ctx, "lst_1", "task_1", "cfg_never"), agentmarket.NotFound)
		wantKind(t, "DeletePushConfig of the deleted id on another listing", s.DeletePushConfig(ctx, "lst_2", "task_1", "cfg_1"), agentmarket.NotFound)
		if _, err := s.PushConfig(ctx, "lst_1", "task_2", "cfg_1"); err != nil {
			t.Errorf("another task's config with the same id went with it: %v", err)
		}
		_, err = s.PushConfig(ctx, "lst_1", "task_1", "cfg_nope")
		wantKind(t, "PushConfig(unknown)", err, agentmarket.NotFound)
		_, err = s.PushCallback(ctx, "cb_nope")
		wantKind(t, "PushCallback(unknown)", err, agentmarket.NotFound)
	})

	t.Run("push configs: a callback id belongs to one config", func(t *testing.T) {
		s, _ := newStore(t)
		c1 := pushConfig("lst_1", "task_1", "cfg_1", t0)
		must(t, s.SavePushConfig(ctx, c1))
		c2 := pushConfig("lst_1", "task_2", "cfg_1", t0)
		c2.CallbackID = c1.CallbackID
		wantKind(t, "SavePushConfig with a taken callback id", s.SavePushConfig(ctx, c2), agentmarket.Conflict)
		got, err := s.PushCallback(ctx, c1.CallbackID)
		wantConfig(t, "PushCallback", got, err, c1)
	})

	t.Run("deliveries: enqueued once per id", func(t *testing.T) {
		s, _ := newStore(t)
		d := delivery("dlv_1", "cfg_1", t0)
		d.Status, d.Attempts = contracts.DeliveryDelivered, 0
		ok, err := s.Enqueue(ctx, d)
		wantBool(t, "first Enqueue", ok, err, true)
		dup := d
		dup.Body = []byte("other")
		ok, err = s.Enqueue(ctx, dup)
		wantBool(t, "Enqueue of the same id", ok, err, false)
		ds, err := s.Deliveries(ctx, contracts.DeliveryQuery{OrgID: "org_a"})
		must(t, err)
		if len(ds) != 1 {
			t.Fatalf("Deliveries = %v, want one", deliveryIDs(ds))
		}
		got := ds[0]
		if got.ID != "dlv_1" || got.Seq <= 0 || got.ListingID != "lst_1" || got.TaskID != "task_1" || got.ConfigID != "cfg_1" ||
			got.OrgID != "org_a" || !bytes.Equal(got.Body, d.Body) || got.Status != contracts.DeliveryPending || got.Attempts != 0 ||
			ts(got.NextAttemptAt) != ts(t0.UTC()) || ts(got.CreatedAt) != ts(t0.UTC()) || got.DeliveredAt != nil || got.LastStatus != 0 || got.LastError != "" {
			t.Errorf("stored delivery = %+v, want the first one, pending", got)
		}
	})

	t.Run("deliveries: one at a time per config, oldest first, leased", func(t *testing.T) {
		s, _ := newStore(t)
		now := t0.Add(time.Hour)
		// Enqueued in this order: seq, not the times, orders a config.
		enqueue(t, s,
			delivery("a1", "cfg_a", now.Add(-time.Minute)),
			delivery("b1", "cfg_b", now.Add(-time.Minute)),
			delivery("a2", "cfg_a", now.Add(-2*time.Minute)),
			delivery("c1", "cfg_c", now.Add(time.Minute)), // not due yet
			delivery("a3", "cfg_a", now.Add(-3*time.Minute)),
		)
		lease, far := now.Add(time.Minute), now.Add(24*time.Hour)
		got := claim(t, s, now, lease, "a1", "b1")
		for _, d := range got {
			if d.ID == "a1" && (!bytes.Equal(d.Body, []byte(`{"notification":"a1"}`)) || d.Status != contracts.DeliveryPending || d.ConfigID != "cfg_a") {
				t.Errorf("claimed a1 = %+v", d)
			}
		}
		claim(t, s, now, lease) // leased

		// a1 delivered: a2 is next in its config; b1 is still leased.
		attempted(t, s, "a1", contracts.DeliveryDelivered, 1, time.Time{}, now.Add(time.Second))
		claim(t, s, now.Add(2*time.Second), far, "a2")

		// b1's lease runs out without an answer: it comes back (and c1 is
		// due by then).
		claim(t, s, lease.Add(-time.Millisecond), far)
		claim(t, s, lease, far, "b1", "c1")
		attempted(t, s, "b1", contracts.DeliveryDelivered, 2, time.Time{}, lease)
		attempted(t, s, "c1", contracts.DeliveryDelivered, 1, time.Time{}, lease)

		// a2 is to be retried later: a3 waits behind it, due or not.
		attempted(t, s, "a2", contracts.DeliveryPending, 1, lease.Add(5*time.Minute), lease)
		claim(t, s, lease.Add(2*time.Minute), far)
		claim(t, s, lease.Add(5*time.Minute), far, "a2")

		// a2 given up: a3 goes next.
		attempted(t, s, "a2", contracts.DeliveryFailed, 2, time.Time{}, lease.Add(5*time.Minute))
		claim(t, s, lease.Add(5*time.Minute), far, "a3")

		ds, err := s.Deliveries(ctx, contracts.DeliveryQuery{OrgID: "org_a", Status: contracts.DeliveryFailed})
		must(t, err)
		if len(ds) != 1 || ds[0].ID != "a2" || ds[0].Attempts != 2 || ds[0].LastStatus != 503 || ds[0].LastError != "busy" || ds[0].DeliveredAt != nil {
			t.Errorf("failed deliveries = %+v, want a2 after 2 attempts", ds)
		}
		ds, err = s.Deliveries(ctx, contracts.DeliveryQuery{OrgID: "org_a", Status: contracts.DeliveryDelivered, TaskID: "task_1"})
		must(t, err)
		ds = slices.DeleteFunc(ds, func(d contracts.Delivery) bool { return d.ID != "a1" })
		if len(ds) != 1 || ds[0].ID != "a1" || ds[0].Attempts != 1 || tsp(ds[0].DeliveredAt) != tsp(utc(now.Add(time.Second))) {
			t.Errorf("delivered deliveries = %+v, want a1 delivered at %s", ds, ts(now.Add(time.Second).UTC()))
		}
		if got, err := s.ClaimDeliveries(ctx, now, now, 0, contracts.ClaimSkip{}); err != nil || len(got) != 0 {
			t.Errorf("ClaimDeliveries with limit 0 = %v, %v; want none", deliveryIDs(got), err)
		}
		wantKind(t, "DeliveryAttempted(unknown)", s.DeliveryAttempted(ctx, "dlv_nope", contracts.DeliveryDelivered, 1, now, 200, "", now), agentmarket.NotFound)
		// A late attempt (a worker whose lease ran out) does not undo a delivery.
		must(t, s.DeliveryAttempted(ctx, "a1", contracts.DeliveryPending, 2, now.Add(time.Hour), 503, "late", now))
		ds, err = s.Deliveries(ctx, contracts.DeliveryQuery{OrgID: "org_a", Status: contracts.DeliveryDelivered, TaskID: "task_1"})
		must(t, err)
		if !slices.ContainsFunc(ds, func(d contracts.Delivery) bool { return d.ID == "a1" && d.Attempts == 1 }) {
			t.Errorf("a late attempt changed a delivered delivery: %+v", ds)
		}
	})

	t.Run("deliveries: destinations skipped are not claimed", func(t *testing.T) {
		s, _ := newStore(t)
		now := t0.Add(time.Hour)
		slow, fast := "https://slow.example.com:443", "https://fast.example.com:443"
		var ds []contracts.Delivery
		for i := range 3 {
			d := delivery(fmt.Sprintf("s%d", i), fmt.Sprintf("cfg_s%d", i), t0)
			d.Destination = slow
			ds = append(ds, d)
		}
		f := delivery("f1", "cfg_f", t0)
		f.Destination = fast
		legacy := delivery("l1", "cfg_l", t0) // enqueued before destinations were kept
		enqueue(t, s, append(ds, f, legacy)...)
		got, err := s.ClaimDeliveries(ctx, now, now.Add(time.Minute), 10, contracts.ClaimSkip{Destinations: []string{slow}})
		must(t, err)
		if ids := deliveryIDs(got); !slices.Equal(ids, []string{"f1", "l1"}) {
			t.Errorf("ClaimDeliveries skipping %s = %v, want [f1 l1]", slow, ids)
		}
		if got, err := s.ClaimDeliveries(ctx, now, now.Add(time.Minute), 10, contracts.ClaimSkip{}); err != nil || len(got) != 3 {
			t.Errorf("ClaimDeliveries with nothing skipped = %v, %v; want the slow destination's 3", deliveryIDs(got), err)
		} else if got[0].Destination != slow {
			t.Errorf("claimed delivery's destination = %q, want %q", got[0].Destination, slow)
		}
	})

	t.Run("deliveries: orgs skipped are not claimed", func(t *testing.T) {
		s, _ := newStore(t)
		now := t0.Add(time.Hour)
		a1, a2 := delivery("a1", "cfg_a1", t0), delivery("a2", "cfg_a2", t0)
		b := delivery("b1", "cfg_b", t0.Add(time.Minute)) // newer than org_a's
		b.OrgID = "org_b"
		enqueue(t, s, a1, a2, b)
		got, err := s.ClaimDeliveries(ctx, now, now.Add(time.Minute), 1, contracts.ClaimSkip{Orgs: []string{"org_a"}})
		must(t, err)
		if ids := deliveryIDs(got); !slices.Equal(ids, []string{"b1"}) {
			t.Errorf("ClaimDeliveries skipping org_a = %v, want [b1]", ids)
		}
	})

	t.Run("deliveries: an org's deliveries to a destination skipped are not claimed", func(t *testing.T) {
		s, _ := newStore(t)
		now := t0.Add(time.Hour)
		hooks, other := "https://hooks.example.com:443", "https://other.example.com:443"
		a1, a2, b := delivery("a1", "cfg_a1", t0), delivery("a2", "cfg_a2", t0), delivery("b1", "cfg_b", t0)
		a1.Destination, a2.Destination, b.Destination, b.OrgID = hooks, other, hooks, "org_b"
		enqueue(t, s, a1, a2, b)
		got, err := s.ClaimDeliveries(ctx, now, now.Add(time.Minute), 10, contracts.ClaimSkip{OrgDestinations: [][2]string{{"org_a", hooks}}})
		must(t, err)
		ids := deliveryIDs(got)
		slices.Sort(ids)
		if !slices.Equal(ids, []string{"a2", "b1"}) {
			t.Errorf("ClaimDeliveries skipping org_a at %s = %v, want [a2 b1]", hooks, ids)
		}
	})

	t.Run("deliveries: a later status supersedes the pending status updates of its config", func(t *testing.T) {
		s, _ := newStore(t)
		now := t0.Add(time.Hour)
		kinded := func(id, cfg string, k contracts.DeliveryKind) contracts.Delivery {
			d := delivery(id, cfg, now)
			d.Kind = k
			return d
		}
		byID := func() map[string]contracts.Delivery {
			ds, err := s.Deliveries(ctx, contracts.DeliveryQuery{OrgID: "org_a"})
			must(t, err)
			out := map[string]contracts.Delivery{}
			for _, d := range ds {
				out[d.ID] = d
			}
			return out
		}
		want := func(what string, id string, status contracts.DeliveryStatus, by string, covers int) {
			t.Helper()
			d := byID()[id]
			if d.Status != status || d.SupersededBy != by || d.Covers != covers {
				t.Errorf("%s: %s is %s (superseded by %q, covers %d); want %s (%q, %d)", what, id, d.Status, d.SupersededBy, d.Covers, status, by, covers)
			}
		}
		enqueue(t, s, kinded("s1", "cfg_1", contracts.DeliveryStatusUpdate))
		claim(t, s, now, now.Add(time.Minute), "s1") // s1 is being sent: it stays
		enqueue(t, s,
			kinded("s2", "cfg_1", contracts.DeliveryStatusUpdate),
			kinded("a1", "cfg_1", contracts.DeliveryOther), // an artifact: never superseded
			kinded("x1", "cfg_2", contracts.DeliveryStatusUpdate),
			kinded("s3", "cfg_1", contracts.DeliveryStatusUpdate),
		)
		want("a status update after another", "s2", contracts.DeliverySuperseded, "s3", 0)
		want("the later one", "s3", contracts.DeliveryPending, "", 1)
		want("the update being sent", "s1", contracts.DeliveryPending, "", 0)
		want("an artifact", "a1", contracts.DeliveryPending, "", 0)
		want("another config's update", "x1", contracts.DeliveryPending, "", 0)
		if d := byID()["s3"]; d.Kind != contracts.DeliveryStatusUpdate {
			t.Errorf("s3's kind = %q", d.Kind)
		}

		enqueue(t, s, kinded("t1", "cfg_1", contracts.DeliveryState)) // completed
		want("superseded by the terminal state", "s3", contracts.DeliverySuperseded, "t1", 1)
		want("the terminal state", "t1", contracts.DeliveryPending, "", 2)
		enqueue(t, s, kinded("t2", "cfg_1", contracts.DeliveryState))
		want("a terminal state is never superseded", "t1", contracts.DeliveryPending, "", 2)
		want("a second state", "t2", contracts.DeliveryPending, "", 0)
		ok, err := s.Enqueue(ctx, kinded("s3", "cfg_1", contracts.DeliveryStatusUpdate))
		wantBool(t, "Enqueue of a superseded delivery's id again", ok, err, false)
		want("enqueued again", "s3", contracts.DeliverySuperseded, "t1", 1)

		// s1 was sent: then a1 (the artifact), t1, t2 go, in order, and
		// nothing superseded is claimed.
		attempted(t, s, "s1", contracts.DeliveryDelivered, 1, time.Time{}, now)
		for _, id := range []string{"a1", "t1", "t2"} {
			got, err := s.ClaimDeliveries(ctx, now, now.Add(time.Minute), 10, contracts.ClaimSkip{})
			must(t, err)
			ids := deliveryIDs(got)
			if !slices.Contains(ids, id) || slices.ContainsFunc(ids, func(x string) bool { return x != id && x != "x1" }) {
				t.Fatalf("claimed %v, want %s (and x1)", ids, id)
			}
			attempted(t, s, id, contracts.DeliveryDelivered, 1, time.Time{}, now)
		}

		// Superseded deliveries are pruned with the settled ones.
		n, err := s.PruneDeliveries(ctx, now.Add(time.Second))
		must(t, err)
		if n != 6 {
			t.Errorf("PruneDeliveries removed %d, want 6 (4 delivered, 2 superseded)", n)
		}
	})

	t.Run("deliveries: old delivered and failed ones are pruned, pending ones stay", func(t *testing.T) {
		s, _ := newStore(t)
		must(t, s.SavePushConfig(ctx, pushConfig("lst_1", "task_1", "cfg_1", t0)))
		for i, st := range []contracts.DeliveryStatus{contracts.DeliveryDelivered, contracts.DeliveryFailed, contracts.DeliveryPending, contracts.DeliveryDelivered} {
			created := t0
			if i == 3 {
				created = t0.Add(2 * time.Hour) // recent
			}
			d := delivery(fmt.Sprintf("p%d", i), "cfg_1", created)
			_, err := s.Enqueue(ctx, d)
			must(t, err)
			if st != contracts.DeliveryPending {
				must(t, s.DeliveryAttempted(ctx, d.ID, st, 1, time.Time{}, 200, "", created))
			}
		}
		n, err := s.PruneDeliveries(ctx, t0.Add(time.Hour))
		must(t, err)
		left, err := s.Deliveries(ctx, contracts.DeliveryQuery{OrgID: "org_a"})
		must(t, err)
		if n != 2 || !slices.Equal(deliveryIDs(left), []string{"p3", "p2"}) {
			t.Errorf("PruneDeliveries removed %d, left %v; want 2, [p3 p2]", n, deliveryIDs(left))
		}
	})

	t.Run("deliveries: a failed delivery is retried on request", func(t *testing.T) {
		s, _ := newStore(t)
		now := t0.Add(time.Hour)
		enqueue(t, s, delivery("d1", "cfg_1", t0), delivery("d2", "cfg_2", t0))
		claim(t, s, now, now.Add(24*time.Hour), "d1", "d2")
		attempted(t, s, "d1", contracts.DeliveryFailed, 5, time.Time{}, now)

		wantKind(t, "RetryDelivery by another org", s.RetryDelivery(ctx, "org_b", "d1", now), agentmarket.NotFound)
		wantKind(t, "RetryDelivery of a pending delivery", s.RetryDelivery(ctx, "org_a", "d2", now), agentmarket.NotFound)
		wantKind(t, "RetryDelivery of an unknown delivery", s.RetryDelivery(ctx, "org_a", "d_nope", now), agentmarket.NotFound)

		later := now.Add(time.Hour)
		must(t, s.RetryDelivery(ctx, "org_a", "d1", later))
		claim(t, s, later.Add(-time.Second), later.Add(time.Minute))
		got := claim(t, s, later, later.Add(time.Minute), "d1")
		for _, d := range got {
			if d.ID == "d1" && (d.Status != contracts.DeliveryPending || ts(d.NextAttemptAt) != ts(later.UTC()) || d.Attempts != 0) {
				t.Errorf("retried delivery = %+v, want pending, due at %s, attempts counted from 0", d, ts(later.UTC()))
			}
		}
		wantKind(t, "RetryDelivery of a retried delivery", s.RetryDelivery(ctx, "org_a", "d1", later), agentmarket.NotFound)
	})

	t.Run("deliveries: listed newest first, per org, filtered", func(t *testing.T) {
		s, _ := newStore(t)
		now := t0.Add(time.Hour)
		for i := range 5 {
			d := delivery(fmt.Sprintf("d%d", i), fmt.Sprintf("cfg_%d", i), t0)
			if i%2 == 1 {
				d.TaskID = "task_2"
			}
			enqueue(t, s, d)
		}
		other := delivery("x1", "cfg_x", t0)
		other.OrgID = "org_b"
		enqueue(t, s, other)
		claim(t, s, now, now.Add(time.Minute), "d0", "d1", "d2", "d3", "d4", "x1")
		attempted(t, s, "d1", contracts.DeliveryDelivered, 1, time.Time{}, now)
		attempted(t, s, "d2", contracts.DeliveryDelivered, 1, time.Time{}, now)

		for _, tc := range []struct {
			q    contracts.DeliveryQuery
			want []string
		}{
			{contracts.DeliveryQuery{OrgID: "org_a"}, []string{"d4", "d3", "d2", "d1", "d0"}},
			{contracts.DeliveryQuery{OrgID: "org_a", Limit: 2}, []string{"d4", "d3"}},
			{contracts.DeliveryQuery{OrgID: "org_a", Status: contracts.DeliveryDelivered}, []string{"d2", "d1"}},
			{contracts.DeliveryQuery{OrgID: "org_a", Status: contracts.DeliveryPending}, []string{"d4", "d3", "d0"}},
			{contracts.DeliveryQuery{OrgID: "org_a", TaskID: "task_2"}, []string{"d3", "d1"}},
			{contracts.DeliveryQuery{OrgID: "org_a", TaskID: "task_2", Status: contracts.DeliveryPending}, []string{"d3"}},
			{contracts.DeliveryQuery{OrgID: "org_b"}, []string{"x1"}},
			{contracts.DeliveryQuery{OrgID: "org_c"}, []string{}},
		} {
			ds, err := s.Deliveries(ctx, tc.q)
			if err != nil {
				t.Errorf("Deliveries(%+v): %v", tc.q, err)
				continue
			}
			if got := deliveryIDs(ds); !slices.Equal(got, tc.want) {
				t.Errorf("Deliveries(%+v) = %v, want %v", tc.q, got, tc.want)
			}
		}
		_, err := s.Deliveries(ctx, contracts.DeliveryQuery{Status: contracts.DeliveryPending})
		wantKind(t, "Deliveries without an org", err, agentmarket.Invalid)
	})

	t.Run("deliveries: at most 1000 listed, 100 by default", func(t *testing.T) {
		s, _ := newStore(t)
		for i := range 1001 {
			enqueue(t, s, delivery(fmt.Sprintf("d%04d", i), "cfg_1", t0))
		}
		for _, tc := range []struct{ limit, want int }{{0, 100}, {1000, 1000}, {5000, 1000}} {
			ds, err := s.Deliveries(ctx, contracts.DeliveryQuery{OrgID: "org_a", Limit: tc.limit})
			must(t, err)
			if len(ds) != tc.want || ds[0].ID != "d1000" {
				t.Errorf("Deliveries with limit %d = %d, want %d from the newest", tc.limit, len(ds), tc.want)
			}
		}
	})

	t.Run("push configs: a deleted id can be set and deleted again", func(t *testing.T) {
		s, _ := newStore(t)
		c := pushConfig("lst_1", "task_1", "cfg_1", t0)
		must(t, s.SavePushConfig(ctx, c))
		must(t, s.DeletePushConfig(ctx, "lst_1", "task_1", "cfg_1"))
		c.CallbackID = "cb_again"
		must(t, s.SavePushConfig(ctx, c))
		got, err := s.PushConfig(ctx, "lst_1", "task_1", "cfg_1")
		wantConfig(t, "PushConfig set again after a delete", got, err, c)
		must(t, s.DeletePushConfig(ctx, "lst_1", "task_1", "cfg_1"))
		_, err = s.PushCallback(ctx, "cb_again")
		wantKind(t, "PushCallback after the second delete", err, agentmarket.NotFound)
		must(t, s.DeletePushConfig(ctx, "lst_1", "task_1", "cfg_1"))
	})

	t.Run("deliveries: deleting a config drops its pending deliveries", func(t *testing.T) {
		s, _ := newStore(t)
		now := t0.Add(time.Hour)
		must(t, s.SavePushConfig(ctx, pushConfig("lst_1", "task_1", "cfg_1", t0)))
		must(t, s.SavePushConfig(ctx, pushConfig("lst_1", "task_1", "cfg_2", t0)))
		enqueue(t, s, delivery("d1", "cfg_1", t0), delivery("d2", "cfg_1", t0), delivery("d3", "cfg_1", t0), delivery("e1", "cfg_2", t0))
		claim(t, s, now, now.Add(time.Minute), "d1", "e1")
		attempted(t, s, "d1", contracts.DeliveryDelivered, 1, time.Time{}, now)
		claim(t, s, now, now.Add(time.Minute), "d2")
		attempted(t, s, "d2", contracts.DeliveryFailed, 3, time.Time{}, now)

		must(t, s.DeletePushConfig(ctx, "lst_1", "task_1", "cfg_1"))
		ds, err := s.Deliveries(ctx, contracts.DeliveryQuery{OrgID: "org_a"})
		must(t, err)
		if got, want := deliveryIDs(ds), []string{"e1", "d2", "d1"}; !slices.Equal(got, want) {
			t.Errorf("Deliveries after the delete = %v, want %v (d3 dropped, history kept)", got, want)
		}
		claim(t, s, now.Add(time.Hour), now.Add(2*time.Hour), "e1")
	})

	t.Run("deliveries: concurrent claimers take each delivery once, in order", func(t *testing.T) {
		s, _ := newStore(t)
		const configs, perConfig, claimers = 12, 3, 8
		now := t0.Add(time.Hour)
		for n := range perConfig {
			for c := range configs {
				enqueue(t, s, delivery(fmt.Sprintf("d_%02d_%d", c, n), fmt.Sprintf("cfg_%02d", c), t0))
			}
		}
		var (
			mu        sync.Mutex
			claimed   = map[string]int{}
			delivered = map[string]bool{}
			problems  []string
			wg        sync.WaitGroup
		)
		errs := make([]error, claimers)
		for i := range claimers {
			wg.Go(func() {
				for {
					ds, err := s.ClaimDeliveries(ctx, now, now.Add(time.Hour), 2, contracts.ClaimSkip{})
					if err != nil {
						errs[i] = err
						return
					}
					if len(ds) == 0 {
						return
					}
					for _, d := range ds {
						var c, n int
						fmt.Sscanf(d.ID, "d_%02d_%d", &c, &n)
						mu.Lock()
						claimed[d.ID]++
						if prev := fmt.Sprintf("d_%02d_%d", c, n-1); n > 0 && !delivered[prev] {
							problems = append(problems, d.ID+" claimed before "+prev+" was delivered")
						}
						delivered[d.ID] = true
						mu.Unlock()
						if err := s.DeliveryAttempted(ctx, d.ID, contracts.DeliveryDelivered, 1, time.Time{}, 200, "", now); err != nil {
							errs[i] = err
							return
						}
					}
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("claimer %d: %v", i, err)
			}
		}
		for _, p := range problems {
			t.Error(p)
		}
		if len(claimed) != configs*perConfig {
			t.Errorf("%d deliveries claimed, want %d", len(claimed), configs*perConfig)
		}
		for id, n := range claimed {
			if n != 1 {
				t.Errorf("%s claimed %d times, want once", id, n)
			}
		}
	})
}
