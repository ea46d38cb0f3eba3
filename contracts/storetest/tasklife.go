package storetest

import (
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

// The contract suite of a task's life after it is bound (part of
// RunTasks): its pause, resume and end with their events, its children,
// the sweeps that lease due tasks and requested cancels, and pruning.

func runTaskLife(t *testing.T, newStore TaskFactory) {
	ctx := context.Background()
	bind := func(t *testing.T, s TaskStore, listingID, taskID, orgID string, created time.Time, mod func(*contracts.TaskBinding)) contracts.TaskBinding {
		t.Helper()
		b := contracts.TaskBinding{ListingID: listingID, TaskID: taskID, OrgID: orgID, ContractID: "ctr_" + orgID, CreatedAt: created}
		if mod != nil {
			mod(&b)
		}
		if _, err := s.BindTask(ctx, b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	ev := func(listingID, taskID, id string, kind contracts.TaskEventKind, at time.Time) contracts.TaskEvent {
		return contracts.TaskEvent{ID: id, ListingID: listingID, TaskID: taskID, Kind: kind, At: at}
	}
	deadline := func(d time.Time) func(*contracts.TaskBinding) {
		return func(b *contracts.TaskBinding) { b.DeadlineAt = &d }
	}

	t.Run("task life: unknown tasks are not found", func(t *testing.T) {
		s, _ := newStore(t)
		bind(t, s, "lst_1", "task_1", "org_a", t0, nil)
		e := ev("lst_1", "task_nope", "", "", t0)
		_, err := s.TaskPaused(ctx, e, nil)
		wantKind(t, "TaskPaused", err, agentmarket.NotFound)
		_, err = s.TaskResumed(ctx, e)
		wantKind(t, "TaskResumed", err, agentmarket.NotFound)
		_, err = s.TaskEnded(ctx, e)
		wantKind(t, "TaskEnded", err, agentmarket.NotFound)
		_, err = s.TaskRecord(ctx, "lst_1", "task_nope")
		wantKind(t, "TaskRecord", err, agentmarket.NotFound)
		_, err = s.TaskRecord(ctx, "lst_2", "task_1")
		wantKind(t, "TaskRecord on another listing", err, agentmarket.NotFound)
		if got, err := s.FindTasks(ctx, "task_nope", 10); err != nil || len(got) != 0 {
			t.Errorf("FindTasks of an unknown task = %v, %v; want none", taskIDs(got), err)
		}
	})

	t.Run("task life: pause, resume and end, each once, with their events", func(t *testing.T) {
		s, _ := newStore(t)
		b := bind(t, s, "lst_1", "task_1", "org_a", t0, deadline(t0.Add(time.Hour)))
		bind(t, s, "lst_1", "task_2", "org_a", t0, nil)
		record := func(t *testing.T) *contracts.TaskRecord {
			t.Helper()
			r, err := s.TaskRecord(ctx, "lst_1", "task_1")
			must(t, err)
			return r
		}
		cancelAt := t0.Add(10 * time.Minute)

		p1 := contracts.TaskEvent{ID: "tev_1", ListingID: "lst_1", TaskID: "task_1", Kind: contracts.TaskPaused, State: "input-required",
			At: t0.Add(time.Minute), Actor: "", Reason: "the agent asks", TraceID: "trace_1"}
		ok, err := s.TaskPaused(ctx, p1, &cancelAt)
		wantBool(t, "first TaskPaused", ok, err, true)
		ok, err = s.TaskPaused(ctx, ev("lst_1", "task_1", "tev_x", contracts.TaskPaused, t0.Add(2*time.Minute)), nil)
		wantBool(t, "TaskPaused while paused", ok, err, false)
		r := record(t)
		if tsp(r.PausedSince) != tsp(utc(p1.At)) || tsp(r.PauseCancelAt) != tsp(utc(cancelAt)) || r.EndedAt != nil {
			t.Errorf("paused record: since %s, cancel at %s, ended %s; want %s, %s, nil",
				tsp(r.PausedSince), tsp(r.PauseCancelAt), tsp(r.EndedAt), ts(p1.At.UTC()), ts(cancelAt.UTC()))
		}
		wantBinding(t, "TaskRecord binding", r.TaskBinding, b)
		if len(r.Events) != 1 {
			t.Errorf("events after a repeated pause: %d, want 1", len(r.Events))
		}

		// The resume and the second pause happen at the same instant: the
		// order they were recorded in breaks the tie. No kind: the method's.
		same := t0.Add(3 * time.Minute)
		res := contracts.TaskEvent{ID: "tev_2", ListingID: "lst_1", TaskID: "task_1", At: same, Actor: "key:key_1"}
		ok, err = s.TaskResumed(ctx, res)
		wantBool(t, "TaskResumed", ok, err, true)
		ok, err = s.TaskResumed(ctx, ev("lst_1", "task_1", "tev_y", "", same))
		wantBool(t, "TaskResumed when not paused", ok, err, false)
		if r := record(t); r.PausedSince != nil || r.PauseCancelAt != nil {
			t.Errorf("resumed record: since %s, cancel at %s; want nil, nil", tsp(r.PausedSince), tsp(r.PauseCancelAt))
		}
		ok, err = s.TaskPaused(ctx, ev("lst_1", "task_1", "tev_3", "", same), nil)
		wantBool(t, "second TaskPaused", ok, err, true)
		if r := record(t); tsp(r.PausedSince) != tsp(utc(same)) || r.PauseCancelAt != nil {
			t.Errorf("paused without limit: since %s, cancel at %s; want %s, nil", tsp(r.PausedSince), tsp(r.PauseCancelAt), ts(same.UTC()))
		}

		end := contracts.TaskEvent{ID: "tev_4", ListingID: "lst_1", TaskID: "task_1", Kind: contracts.TaskCanceled, State: "canceled",
			At: t0.Add(5 * time.Minute), Actor: contracts.CanceledByMeter, Reason: "paused too long", TraceID: "trace_4"}
		ok, err = s.TaskEnded(ctx, end)
		wantBool(t, "TaskEnded", ok, err, true)
		ok, err = s.TaskEnded(ctx, ev("lst_1", "task_1", "tev_z", contracts.TaskEnded, t0.Add(6*time.Minute)))
		wantBool(t, "TaskEnded when ended", ok, err, false)
		ok, err = s.TaskPaused(ctx, ev("lst_1", "task_1", "tev_z1", "", t0.Add(7*time.Minute)), nil)
		wantBool(t, "TaskPaused when ended", ok, err, false)
		ok, err = s.TaskResumed(ctx, ev("lst_1", "task_1", "tev_z2", "", t0.Add(7*time.Minute)))
		wantBool(t, "TaskResumed when ended", ok, err, false)

		r = record(t)
		if tsp(r.EndedAt) != tsp(utc(end.At)) || r.PausedSince != nil || r.PauseCancelAt != nil {
			t.Errorf("ended record: ended %s, since %s, cancel at %s; want %s, nil, nil (the end closes the pause)",
				tsp(r.EndedAt), tsp(r.PausedSince), tsp(r.PauseCancelAt), ts(end.At.UTC()))
		}
		res.Kind = contracts.TaskResumed
		want := []contracts.TaskEvent{p1, res, ev("lst_1", "task_1", "tev_3", contracts.TaskPaused, same), end}
		var got, wantText []string
		for _, e := range r.Events {
			got = append(got, showEvent(e))
		}
		for _, e := range want {
			e.At = e.At.UTC()
			wantText = append(wantText, showEvent(e))
		}
		if !slices.Equal(got, wantText) {
			t.Errorf("events =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(wantText, "\n  "))
		}

		// The other task has a life of its own.
		r2, err := s.TaskRecord(ctx, "lst_1", "task_2")
		must(t, err)
		if len(r2.Events) != 0 || r2.PausedSince != nil || r2.EndedAt != nil {
			t.Errorf("untouched task's record = %+v, want no life", r2)
		}
	})

	t.Run("task life: an ended task may end as ended, without a pause", func(t *testing.T) {
		s, _ := newStore(t)
		bind(t, s, "lst_1", "task_1", "org_a", t0, nil)
		ok, err := s.TaskEnded(ctx, contracts.TaskEvent{ListingID: "lst_1", TaskID: "task_1", State: "completed", At: t0.Add(time.Minute)})
		wantBool(t, "TaskEnded", ok, err, true)
		r, err := s.TaskRecord(ctx, "lst_1", "task_1")
		must(t, err)
		if len(r.Events) != 1 || r.Events[0].Kind != contracts.TaskEnded || r.Events[0].ID == "" || r.Events[0].State != "completed" {
			t.Errorf("events = %+v, want one ended event with an id", r.Events)
		}
	})

	t.Run("task life: an event of another kind is refused", func(t *testing.T) {
		s, _ := newStore(t)
		bind(t, s, "lst_1", "task_1", "org_a", t0, nil)
		_, err := s.TaskPaused(ctx, ev("lst_1", "task_1", "", contracts.TaskEnded, t0), nil)
		wantKind(t, "TaskPaused with an ended event", err, agentmarket.Invalid)
		_, err = s.TaskResumed(ctx, ev("lst_1", "task_1", "", contracts.TaskPaused, t0))
		wantKind(t, "TaskResumed with a paused event", err, agentmarket.Invalid)
		_, err = s.TaskEnded(ctx, ev("lst_1", "task_1", "", contracts.TaskResumed, t0))
		wantKind(t, "TaskEnded with a resumed event", err, agentmarket.Invalid)
		r, err := s.TaskRecord(ctx, "lst_1", "task_1")
		must(t, err)
		if len(r.Events) != 0 || r.PausedSince != nil || r.EndedAt != nil {
			t.Errorf("record after refused events = %+v, want no life", r)
		}
	})

	t.Run("task life: find a task by its id alone", func(t *testing.T) {
		s, _ := newStore(t)
		// The same id on three listings: org_a's older task, org_b's newer
		// one, then org_a's newest on a third listing.
		bind(t, s, "lst_1", "task_1", "org_a", t0, nil)
		bind(t, s, "lst_2", "task_1", "org_b", t0.Add(time.Minute), nil)
		bind(t, s, "lst_3", "task_2", "org_a", t0.Add(2*time.Minute), nil)
		for _, tc := range []struct {
			task  string
			limit int
			want  []string
		}{
			{"task_1", 10, []string{"lst_2/task_1", "lst_1/task_1"}},
			{"task_1", 1, []string{"lst_2/task_1"}},
			{"task_2", 10, []string{"lst_3/task_2"}},
		} {
			got, err := s.FindTasks(ctx, tc.task, tc.limit)
			if err != nil || !slices.Equal(taskIDs(got), tc.want) {
				t.Errorf("FindTasks(%s, %d) = %v, %v; want %v", tc.task, tc.limit, taskIDs(got), err, tc.want)
			}
		}
	})

	t.Run("task life: child tasks are the open tasks naming the parent", func(t *testing.T) {
		s, _ := newStore(t)
		child := func(listingID, taskID string) func(*contracts.TaskBinding) {
			return func(b *contracts.TaskBinding) { b.ParentListingID, b.ParentTaskID = listingID, taskID }
		}
		bind(t, s, "lst_1", "task_p", "org_a", t0, nil)
		bind(t, s, "lst_2", "task_c2", "org_a", t0.Add(2*time.Minute), child("lst_1", "task_p"))
		want := bind(t, s, "lst_3", "task_c1", "org_b", t0.Add(time.Minute), child("lst_1", "task_p"))
		bind(t, s, "lst_2", "task_done", "org_a", t0.Add(3*time.Minute), child("lst_1", "task_p"))
		bind(t, s, "lst_2", "task_other", "org_a", t0, child("lst_9", "task_p"))
		bind(t, s, "lst_2", "task_grandchild", "org_a", t0, child("lst_2", "task_c2"))
		// Delegated before the meter had bound the parent: unresolved.
		unresolved := bind(t, s, "lst_4", "task_early", "org_a", t0.Add(4*time.Minute), child("", "task_p"))
		_, err := s.TaskEnded(ctx, ev("lst_2", "task_done", "", contracts.TaskEnded, t0.Add(4*time.Minute)))
		must(t, err)

		got, err := s.ChildTasks(ctx, "lst_1", "task_p")
		must(t, err)
		if ids, wantIDs := taskIDs(got), []string{"lst_3/task_c1", "lst_2/task_c2", "lst_4/task_early"}; !slices.Equal(ids, wantIDs) {
			t.Errorf("ChildTasks = %v, want %v", ids, wantIDs)
		} else {
			wantBinding(t, "ChildTasks[0]", got[0], want)
			wantBinding(t, "ChildTasks[2]", got[2], unresolved)
		}
		if got, err := s.ChildTasks(ctx, "lst_1", "task_nope"); err != nil || len(got) != 0 {
			t.Errorf("ChildTasks of a childless task = %v, %v; want none", taskIDs(got), err)
		}
		// "" names no parent: root tasks are nobody's children.
		if got, err := s.ChildTasks(ctx, "", ""); err != nil || len(got) != 0 {
			t.Errorf(`ChildTasks("", "") = %v, %v; want none`, taskIDs(got), err)
		}
	})

	t.Run("task life: due tasks are leased", func(t *testing.T) {
		s, _ := newStore(t)
		now := t0.Add(time.Hour)
		past, future := now.Add(-time.Minute), now.Add(10*time.Minute)
		pause := func(taskID string, since time.Time, cancelAt *time.Time) {
			t.Helper()
			ok, err := s.TaskPaused(ctx, ev("lst_1", taskID, "", "", since), cancelAt)
			wantBool(t, "TaskPaused("+taskID+")", ok, err, true)
		}
		bind(t, s, "lst_1", "t_deadline", "org_a", t0, deadline(past))
		bind(t, s, "lst_1", "t_deadline_now", "org_a", t0.Add(time.Second), deadline(now))
		bind(t, s, "lst_1", "t_deadline_later", "org_a", t0.Add(2*time.Second), deadline(future))
		bind(t, s, "lst_1", "t_pause", "org_a", t0.Add(3*time.Second), nil)
		pause("t_pause", t0.Add(30*time.Minute), &past)
		bind(t, s, "lst_1", "t_pause_later", "org_a", t0.Add(4*time.Second), deadline(past))
		pause("t_pause_later", t0.Add(31*time.Minute), &future) // the deadline is due, the pause is not
		bind(t, s, "lst_1", "t_both", "org_a", t0.Add(5*time.Second), deadline(past))
		pause("t_both", t0.Add(32*time.Minute), &past)
		bind(t, s, "lst_1", "t_pause_forever", "org_a", t0.Add(6*time.Second), nil)
		pause("t_pause_forever", t0.Add(33*time.Minute), nil)
		bind(t, s, "lst_1", "t_ended", "org_a", t0.Add(7*time.Second), deadline(past))
		_, err := s.TaskEnded(ctx, ev("lst_1", "t_ended", "", "", t0.Add(time.Minute)))
		must(t, err)
		bind(t, s, "lst_1", "t_resumed", "org_a", t0.Add(8*time.Second), nil)
		pause("t_resumed", t0.Add(34*time.Minute), &past)
		_, err = s.TaskResumed(ctx, ev("lst_1", "t_resumed", "", "", t0.Add(35*time.Minute)))
		must(t, err)

		showDue := func(ds []contracts.DueTask) []string {
			out := []string{}
			for _, d := range ds {
				out = append(out, d.TaskID+" "+d.Why+" "+tsp(d.PausedSince))
			}
			slices.Sort(out)
			return out
		}
		want := []string{
			"t_both pause " + ts(t0.Add(32*time.Minute).UTC()),
			"t_deadline deadline nil",
			"t_deadline_now deadline nil",
			"t_pause pause " + ts(t0.Add(30*time.Minute).UTC()),
			"t_pause_later deadline " + ts(t0.Add(31*time.Minute).UTC()),
		}
		leaseUntil := now.Add(time.Minute)
		first, err := s.DueTasks(ctx, now, leaseUntil, 3)
		must(t, err)
		second, err := s.DueTasks(ctx, now, leaseUntil, 3)
		must(t, err)
		if len(first) != 3 || len(second) != 2 {
			t.Errorf("DueTasks with limit 3 gave %d then %d, want 3 then 2", len(first), len(second))
		}
		if got := showDue(append(first, second...)); !slices.Equal(got, want) {
			t.Errorf("DueTasks =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		for _, d := range first {
			if d.TaskID == "t_deadline" {
				wantBinding(t, "due binding", d.TaskBinding, contracts.TaskBinding{ListingID: "lst_1", TaskID: "t_deadline", OrgID: "org_a",
					ContractID: "ctr_org_a", CreatedAt: t0, DeadlineAt: &past})
			}
		}
		if got, err := s.DueTasks(ctx, leaseUntil.Add(-time.Millisecond), leaseUntil, 10); err != nil || len(got) != 0 {
			t.Errorf("DueTasks before the lease ends = %v, %v; want none", showDue(got), err)
		}

		// Ending a task takes it out; a lease that ran out lets the others
		// come back.
		_, err = s.TaskEnded(ctx, ev("lst_1", "t_both", "", contracts.TaskCanceled, now))
		must(t, err)
		again, err := s.DueTasks(ctx, leaseUntil, leaseUntil.Add(time.Minute), 10)
		must(t, err)
		if got, want := showDue(again), slices.DeleteFunc(slices.Clone(want), func(s string) bool { return strings.HasPrefix(s, "t_both ") }); !slices.Equal(got, want) {
			t.Errorf("DueTasks after the lease =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		if got, err := s.DueTasks(ctx, now, now, 0); err != nil || len(got) != 0 {
			t.Errorf("DueTasks with limit 0 = %v, %v; want none", showDue(got), err)
		}
	})

	t.Run("task life: requested cancels are due at once, kept until the task ends, attempts counted", func(t *testing.T) {
		s, _ := newStore(t)
		now := t0.Add(time.Hour)
		bind(t, s, "lst_1", "t_child", "org_a", t0, nil)
		bind(t, s, "lst_1", "t_ended", "org_a", t0, nil)
		_, err := s.TaskEnded(ctx, ev("lst_1", "t_ended", "", "", t0.Add(time.Minute)))
		must(t, err)
		must(t, s.RequestCancel(ctx, "lst_1", "t_child", contracts.CanceledByCascade, "its parent task p was canceled", "trace1", now))
		// The first request stands; an ended task takes none.
		must(t, s.RequestCancel(ctx, "lst_1", "t_child", "meter", "other", "trace2", now.Add(time.Second)))
		must(t, s.RequestCancel(ctx, "lst_1", "t_ended", contracts.CanceledByCascade, "x", "trace1", now))
		wantKind(t, "RequestCancel(unknown)", s.RequestCancel(ctx, "lst_1", "t_nope", "meter", "x", "", now), agentmarket.NotFound)

		if got, err := s.DueTasks(ctx, now.Add(-time.Second), now, 10); err != nil || len(got) != 0 {
			t.Errorf("DueTasks before the request = %d, %v; want none", len(got), err)
		}
		for attempt := 1; attempt <= 3; attempt++ {
			at := now.Add(time.Duration(attempt) * time.Minute)
			got, err := s.DueTasks(ctx, at, at.Add(time.Second), 10)
			must(t, err)
			if len(got) != 1 || got[0].TaskID != "t_child" || got[0].Why != "requested" || got[0].CancelActor != contracts.CanceledByCascade ||
				got[0].CancelReason != "its parent task p was canceled" || got[0].CancelTraceID != "trace1" || got[0].Attempts != attempt {
				t.Fatalf("DueTasks, sweep %d = %+v", attempt, got)
			}
		}
		_, err = s.TaskEnded(ctx, ev("lst_1", "t_child", "", contracts.TaskCanceled, now.Add(time.Hour)))
		must(t, err)
		if got, err := s.DueTasks(ctx, now.Add(2*time.Hour), now.Add(3*time.Hour), 10); err != nil || len(got) != 0 {
			t.Errorf("DueTasks after the end = %d, %v; want none", len(got), err)
		}
	})

	t.Run("task life: events of tasks ended long ago are pruned, the tasks stay", func(t *testing.T) {
		s, _ := newStore(t)
		bind(t, s, "lst_1", "t_old", "org_a", t0, nil)
		bind(t, s, "lst_1", "t_recent", "org_a", t0, nil)
		bind(t, s, "lst_1", "t_open", "org_a", t0, nil)
		for _, id := range []string{"t_old", "t_recent", "t_open"} {
			_, err := s.TaskPaused(ctx, ev("lst_1", id, "", "", t0), nil)
			must(t, err)
		}
		_, err := s.TaskEnded(ctx, ev("lst_1", "t_old", "", "", t0.Add(time.Hour)))
		must(t, err)
		_, err = s.TaskEnded(ctx, ev("lst_1", "t_recent", "", "", t0.Add(48*time.Hour)))
		must(t, err)
		n, err := s.PruneEvents(ctx, t0.Add(24*time.Hour))
		must(t, err)
		if n != 2 {
			t.Errorf("PruneEvents removed %d events, want 2 (t_old's pause and end)", n)
		}
		for id, want := range map[string]int{"t_old": 0, "t_recent": 2, "t_open": 1} {
			r, err := s.TaskRecord(ctx, "lst_1", id)
			must(t, err)
			if len(r.Events) != want {
				t.Errorf("%s has %d events after pruning, want %d", id, len(r.Events), want)
			}
		}
	})

	t.Run("task life: concurrent sweeps lease each due task once", func(t *testing.T) {
		s, _ := newStore(t)
		const tasks, sweepers = 30, 8
		for i := range tasks {
			bind(t, s, "lst_1", fmt.Sprintf("task_%02d", i), "org_a", t0.Add(time.Duration(i)*time.Second), deadline(t0))
		}
		now := t0.Add(time.Hour)
		var (
			mu      sync.Mutex
			claimed = map[string]int{}
			wg      sync.WaitGroup
		)
		errs := make([]error, sweepers)
		for i := range sweepers {
			wg.Go(func() {
				for {
					due, err := s.DueTasks(ctx, now, now.Add(time.Hour), 3)
					if err != nil {
						errs[i] = err
						return
					}
					if len(due) == 0 {
						return
					}
					mu.Lock()
					for _, d := range due {
						claimed[d.TaskID]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("sweeper %d: %v", i, err)
			}
		}
		if len(claimed) != tasks {
			t.Errorf("%d tasks leased, want %d", len(claimed), tasks)
		}
		for id, n := range claimed {
			if n != 1 {
				t.Errorf("%s leased %d times, want once", id, n)
			}
		}
	})
}

func showEvent(e contracts.TaskEvent) string {
	return fmt.Sprintf("%s %s/%s %s state=%q at=%s actor=%q reason=%q trace=%q", e.ID, e.ListingID, e.TaskID, e.Kind, e.State, ts(e.At), e.Actor, e.Reason, e.TraceID)
}
