package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// TaskStore is what RunTasks exercises: contracts, the tasks the meter
// carries and their push notifications, which every adapter keeps beside
// the accounts.
type TaskStore = interface {
	contracts.Store
	contracts.ContractStore
	contracts.PlanChangeStore
	contracts.AlertStore
	contracts.BatchTaskOwners
	contracts.TaskLife
	contracts.PushStore
}

// TaskFactory returns a fresh, empty store and a function that creates a
// listing sold by an org already in the store: contracts reference
// listings, which another package keeps.
type TaskFactory func(t *testing.T) (s TaskStore, newListing func(listingID, sellerOrgID string))

// RunTasks runs the contract suite of contracts, task bindings, task life
// and push notifications.
func RunTasks(t *testing.T, newStore TaskFactory) {
	runContracts(t, newStore)
	runTrials(t, newStore)
	runPlanChanges(t, newStore)
	runAlerts(t, newStore)
	runBindings(t, newStore)
	runTaskLife(t, newStore)
	runPush(t, newStore)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantKind(t *testing.T, what string, err error, kind agentmarket.Kind) {
	t.Helper()
	if err == nil || agentmarket.KindOf(err) != kind {
		t.Errorf("%s: err = %v, want kind %s", what, err, kind)
	}
}

func wantBool(t *testing.T, what string, got bool, err error, want bool) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// ts shows an instant with its location, so comparing two renderings
// checks both the instant and that the store handed it back in UTC.
func ts(t time.Time) string { return t.Format(time.RFC3339Nano) + " " + t.Location().String() }

func tsp(t *time.Time) string {
	if t == nil {
		return "nil"
	}
	return ts(*t)
}

func utc(t time.Time) *time.Time {
	u := t.UTC()
	return &u
}

func showBinding(b contracts.TaskBinding) string {
	return fmt.Sprintf("%s/%s org=%s contract=%s context=%s created=%s parent=%s/%s deadline=%s reused=%s billed=%s endpoint=%q",
		b.ListingID, b.TaskID, b.OrgID, b.ContractID, b.ContextID, ts(b.CreatedAt), b.ParentListingID, b.ParentTaskID, tsp(b.DeadlineAt), tsp(b.ReusedAt),
		showBilled(b.Billed), b.Endpoint)
}

func showBilled(b *contracts.TaskBilled) string {
	if b == nil {
		return "never"
	}
	return fmt.Sprintf("%d/%d/%d since %s", b.InputTokens, b.OutputTokens, b.ComputeMs, ts(b.At))
}

func wantBinding(t *testing.T, what string, got, want contracts.TaskBinding) {
	t.Helper()
	want.CreatedAt = want.CreatedAt.UTC()
	if want.DeadlineAt != nil {
		want.DeadlineAt = utc(*want.DeadlineAt)
	}
	if want.ReusedAt != nil {
		want.ReusedAt = utc(*want.ReusedAt)
	}
	if want.Billed != nil {
		b := *want.Billed
		b.At = b.At.UTC()
		want.Billed = &b
	}
	if g, w := showBinding(got), showBinding(want); g != w {
		t.Errorf("%s =\n  %s\nwant\n  %s", what, g, w)
	}
}

func taskIDs(bs []contracts.TaskBinding) []string {
	out := []string{}
	for _, b := range bs {
		out = append(out, b.ListingID+"/"+b.TaskID)
	}
	return out
}

func runBindings(t *testing.T, newStore TaskFactory) {
	ctx := context.Background()

	runOwners(t, func(t *testing.T) contracts.TaskOwners { s, _ := newStore(t); return s })

	t.Run("bindings: a task bound ended is recorded ended once, with its event", func(t *testing.T) {
		s, _ := newStore(t)
		end := t0.Add(3 * time.Second)
		b := contracts.TaskBinding{ListingID: "lst_1", TaskID: "task-e", OrgID: "org_a", ContractID: "ctr_1", CreatedAt: t0,
			Ended: &contracts.TaskEvent{State: "completed", At: end, TraceID: "tr-1"}}
		for range 2 { // bound again (a projection replayed): nothing more
			owners, errs := s.BindTasks(ctx, []contracts.TaskBinding{b})
			must(t, errs[0])
			if owners[0] != "org_a" {
				t.Fatalf("owner %s", owners[0])
			}
		}
		rec, err := s.TaskRecord(ctx, "lst_1", "task-e")
		must(t, err)
		if rec.EndedAt == nil || !rec.EndedAt.Equal(end) || len(rec.Events) != 1 || rec.Events[0].Kind != contracts.TaskEnded ||
			rec.Events[0].State != "completed" || rec.Events[0].TraceID != "tr-1" {
			t.Fatalf("record %+v, events %+v", rec, rec.Events)
		}
		again, err := s.TaskRecord(ctx, "lst_1", "task-e")
		must(t, err)
		if len(again.Events) != 1 || again.Events[0].ID == "" || again.Events[0].ID != rec.Events[0].ID {
			t.Errorf("the end event's id changed between readings: %+v, then %+v", rec.Events, again.Events)
		}
		// A later end (a replayed or re-observed one) records nothing more.
		changed, err := s.TaskEnded(ctx, contracts.TaskEvent{ListingID: "lst_1", TaskID: "task-e", State: "completed", At: end.Add(time.Second)})
		must(t, err)
		if changed {
			t.Error("TaskEnded changed a task already ended")
		}
	})

	t.Run("bindings: a task its agent lost ends once, with a lost event", func(t *testing.T) {
		s, _ := newStore(t)
		_, err := s.BindTask(ctx, contracts.TaskBinding{ListingID: "lst_1", TaskID: "task-l", OrgID: "org_a", ContractID: "ctr_1", CreatedAt: t0})
		must(t, err)
		lost := contracts.TaskEvent{ID: "tev_l", ListingID: "lst_1", TaskID: "task-l", Kind: contracts.TaskLost, At: t0.Add(time.Minute),
			Reason: "the agent no longer knows the task", TraceID: "tr-l"}
		changed, err := s.TaskEnded(ctx, lost)
		wantBool(t, "TaskEnded(lost)", changed, err, true)
		lost.ID = "tev_l2"
		changed, err = s.TaskEnded(ctx, lost)
		wantBool(t, "TaskEnded(lost again)", changed, err, false)
		rec, err := s.TaskRecord(ctx, "lst_1", "task-l")
		must(t, err)
		if rec.EndedAt == nil || !rec.EndedAt.Equal(lost.At) || len(rec.Events) != 1 || rec.Events[0].Kind != contracts.TaskLost ||
			rec.Events[0].Reason != lost.Reason {
			t.Fatalf("record %+v, events %+v", rec, rec.Events)
		}
		_, err = s.TaskEnded(ctx, contracts.TaskEvent{ID: "tev_l3", ListingID: "lst_1", TaskID: "task-9", Kind: contracts.TaskLost, At: t0})
		wantKind(t, "TaskEnded(lost, unbound)", err, agentmarket.NotFound)
	})

	t.Run("life: a stall is marked once, cleared by progress, and by the task's end", func(t *testing.T) {
		s, _ := newStore(t)
		_, err := s.BindTask(ctx, contracts.TaskBinding{ListingID: "lst_1", TaskID: "task-s", OrgID: "org_a", ContractID: "ctr_1", CreatedAt: t0})
		must(t, err)
		ev := func(id string, kind contracts.TaskEventKind, at time.Time) contracts.TaskEvent {
			return contracts.TaskEvent{ID: id, ListingID: "lst_1", TaskID: "task-s", Kind: kind, State: "working", At: at}
		}
		stalled := t0.Add(10 * time.Minute)
		ok, err := s.TaskStalled(ctx, ev("tev_s1", contracts.TaskStalled, stalled))
		wantBool(t, "TaskStalled", ok, err, true)
		ok, err = s.TaskStalled(ctx, ev("tev_s2", contracts.TaskStalled, stalled.Add(time.Minute)))
		wantBool(t, "TaskStalled(stalled)", ok, err, false)
		rec, err := s.TaskRecord(ctx, "lst_1", "task-s")
		must(t, err)
		if rec.StalledSince == nil || !rec.StalledSince.Equal(stalled) || rec.EndedAt != nil {
			t.Fatalf("stalled record %+v", rec)
		}
		ok, err = s.TaskProgressed(ctx, ev("tev_s3", contracts.TaskProgressed, stalled.Add(2*time.Minute)))
		wantBool(t, "TaskProgressed", ok, err, true)
		ok, err = s.TaskProgressed(ctx, ev("tev_s4", contracts.TaskProgressed, stalled.Add(3*time.Minute)))
		wantBool(t, "TaskProgressed(not stalled)", ok, err, false)
		ok, err = s.TaskStalled(ctx, ev("tev_s5", contracts.TaskStalled, stalled.Add(20*time.Minute)))
		wantBool(t, "TaskStalled(again)", ok, err, true)
		ok, err = s.TaskEnded(ctx, ev("tev_s6", contracts.TaskEnded, stalled.Add(21*time.Minute)))
		wantBool(t, "TaskEnded(stalled)", ok, err, true)
		ok, err = s.TaskStalled(ctx, ev("tev_s7", contracts.TaskStalled, stalled.Add(40*time.Minute)))
		wantBool(t, "TaskStalled(ended)", ok, err, false)
		rec, err = s.TaskRecord(ctx, "lst_1", "task-s")
		must(t, err)
		var kinds []contracts.TaskEventKind
		for _, e := range rec.Events {
			kinds = append(kinds, e.Kind)
		}
		want := []contracts.TaskEventKind{contracts.TaskStalled, contracts.TaskProgressed, contracts.TaskStalled, contracts.TaskEnded}
		if rec.StalledSince != nil || !slices.Equal(kinds, want) {
			t.Fatalf("record %+v, events %v, want not stalled, %v", rec, kinds, want)
		}
		_, err = s.TaskStalled(ctx, contracts.TaskEvent{ListingID: "lst_1", TaskID: "task-9", At: t0})
		wantKind(t, "TaskStalled(unbound)", err, agentmarket.NotFound)
	})

	t.Run("bindings: a batch keeps parent and deadline", func(t *testing.T) {
		s, _ := newStore(t)
		d1 := t0.Add(time.Hour)
		_, err := s.BindTask(ctx, contracts.TaskBinding{ListingID: "lst_1", TaskID: "task_old", OrgID: "org_a", ContractID: "ctr_1", CreatedAt: t0})
		must(t, err)
		batch := []contracts.TaskBinding{
			{ListingID: "lst_1", TaskID: "task_x", OrgID: "org_a", ContractID: "ctr_1", CreatedAt: t0, DeadlineAt: &d1, Endpoint: "https://eu.agent.example/a2a"},
			{ListingID: "lst_1", TaskID: "task_y", OrgID: "org_a", ContractID: "ctr_1", CreatedAt: t0, ParentListingID: "lst_1", ParentTaskID: "task_x"},
			{ListingID: "lst_1", TaskID: "task_old", OrgID: "org_z", ContractID: "ctr_z", CreatedAt: t0, DeadlineAt: &d1},
		}
		owners, errs := s.BindTasks(ctx, batch)
		for i := range batch {
			if errs[i] != nil {
				t.Fatalf("BindTasks[%d]: %v", i, errs[i])
			}
		}
		if want := []string{"org_a", "org_a", "org_a"}; !slices.Equal(owners, want) {
			t.Errorf("BindTasks owners = %v, want %v", owners, want)
		}
		for _, b := range batch[:2] {
			got, err := s.TaskOwner(ctx, b.ListingID, b.TaskID)
			must(t, err)
			wantBinding(t, "TaskOwner("+b.TaskID+")", *got, b)
		}
		got, err := s.TaskOwner(ctx, "lst_1", "task_old")
		must(t, err)
		if got.DeadlineAt != nil || got.OrgID != "org_a" {
			t.Errorf("TaskOwner(task_old) = %s, want the first binding, without deadline", showBinding(*got))
		}
	})

	t.Run("bindings: what a task was billed, stored with it and raised", func(t *testing.T) {
		s, _ := newStore(t)
		billed := &contracts.TaskBilled{InputTokens: 10, OutputTokens: 20, ComputeMs: 30, At: t0}
		batch := []contracts.TaskBinding{
			{ListingID: "lst_1", TaskID: "task_b", OrgID: "org_a", ContractID: "ctr_1", CreatedAt: t0, Billed: billed},
			{ListingID: "lst_1", TaskID: "task_n", OrgID: "org_a", ContractID: "ctr_1", CreatedAt: t0},
		}
		_, errs := s.BindTasks(ctx, batch)
		for i := range errs {
			must(t, errs[i])
		}
		for _, b := range batch {
			got, err := s.TaskOwner(ctx, b.ListingID, b.TaskID)
			must(t, err)
			wantBinding(t, "TaskOwner("+b.TaskID+")", *got, b)
		}
		// Each counter takes the larger value; the first bill's time stays;
		// a task never billed takes the time given; twice is once; a task
		// not bound is left alone.
		t1 := t0.Add(time.Minute)
		raise := []contracts.TaskBill{
			{ListingID: "lst_1", TaskID: "task_b", Billed: contracts.TaskBilled{InputTokens: 15, OutputTokens: 5, ComputeMs: 30, At: t1}},
			{ListingID: "lst_1", TaskID: "task_n", Billed: contracts.TaskBilled{InputTokens: 1, At: t1}},
			{ListingID: "lst_1", TaskID: "task_unbound", Billed: contracts.TaskBilled{InputTokens: 1, At: t1}},
		}
		must(t, s.RaiseBilled(ctx, raise))
		must(t, s.RaiseBilled(ctx, raise))
		for task, want := range map[string]*contracts.TaskBilled{
			"task_b": {InputTokens: 15, OutputTokens: 20, ComputeMs: 30, At: t0},
			"task_n": {InputTokens: 1, At: t1},
		} {
			got, err := s.TaskOwner(ctx, "lst_1", task)
			must(t, err)
			w := *want
			w.At = w.At.UTC()
			if g, ws := showBilled(got.Billed), showBilled(&w); g != ws {
				t.Errorf("after RaiseBilled, %s billed %s, want %s", task, g, ws)
			}
		}
		_, err := s.TaskOwner(ctx, "lst_1", "task_unbound")
		wantKind(t, "TaskOwner(task_unbound)", err, agentmarket.NotFound)
	})

	t.Run("bindings: a large batch, with a task twice in it", func(t *testing.T) {
		s, _ := newStore(t)
		var batch []contracts.TaskBinding
		for i := range 250 {
			batch = append(batch, contracts.TaskBinding{ListingID: "lst_1", TaskID: fmt.Sprintf("task_%03d", i), OrgID: "org_a", ContractID: "ctr_1", CreatedAt: t0})
		}
		// The same task again, from another org, in the same batch (and in
		// another chunk of it): the first binding wins.
		batch = append(batch, contracts.TaskBinding{ListingID: "lst_1", TaskID: "task_007", OrgID: "org_z", ContractID: "ctr_z", CreatedAt: t0})
		owners, errs := s.BindTasks(ctx, batch)
		for i := range batch {
			if errs[i] != nil || owners[i] != "org_a" {
				t.Fatalf("BindTasks[%d] (%s) = %q, %v; want org_a", i, batch[i].TaskID, owners[i], errs[i])
			}
		}
		got, err := s.TaskOwner(ctx, "lst_1", "task_249")
		must(t, err)
		wantBinding(t, "TaskOwner(task_249)", *got, batch[249])
	})
}
