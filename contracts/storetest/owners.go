package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// RunOwners runs the contract suite of task owners (contracts.TaskOwners)
// against a fresh store from newStore: the database's tables and the hot
// state meters share (Redis) alike.
func RunOwners(t *testing.T, newStore func(t *testing.T) contracts.TaskOwners) {
	runOwners(t, newStore)
}

func runOwners(t *testing.T, newStore func(t *testing.T) contracts.TaskOwners) {
	ctx := context.Background()

	t.Run("bindings: an unseen task is not found", func(t *testing.T) {
		s := newStore(t)
		_, err := s.TaskOwner(ctx, "lst_1", "task-none")
		wantKind(t, "TaskOwner(unseen)", err, agentmarket.NotFound)
	})

	t.Run("bindings: parent, deadline, endpoint and key round trip", func(t *testing.T) {
		s := newStore(t)
		deadline := t0.Add(time.Hour)
		child := contracts.TaskBinding{ListingID: "lst_2", TaskID: "task_c", OrgID: "org_a", ContractID: "ctr_2", ContextID: "ctx_1",
			CreatedAt: t0, ParentListingID: "lst_1", ParentTaskID: "task_p", DeadlineAt: &deadline, Endpoint: "https://replica-2.agent.example/a2a",
			KeyID: "key_a1"}
		root := contracts.TaskBinding{ListingID: "lst_1", TaskID: "task_p", OrgID: "org_a", ContractID: "ctr_1", CreatedAt: t0}
		for _, b := range []contracts.TaskBinding{child, root} {
			owner, err := s.BindTask(ctx, b)
			must(t, err)
			if owner != b.OrgID {
				t.Errorf("BindTask(%s) = %s, want %s", b.TaskID, owner, b.OrgID)
			}
		}
		got, err := s.TaskOwner(ctx, "lst_2", "task_c")
		must(t, err)
		wantBinding(t, "TaskOwner(child)", *got, child)
		got, err = s.TaskOwner(ctx, "lst_1", "task_p")
		must(t, err)
		wantBinding(t, "TaskOwner(root)", *got, root)

		// A second sight binds nothing new: the first binding stays whole.
		later := t0.Add(2 * time.Hour)
		other := contracts.TaskBinding{ListingID: "lst_2", TaskID: "task_c", OrgID: "org_z", ContractID: "ctr_9", CreatedAt: later,
			ParentListingID: "lst_9", ParentTaskID: "task_9", DeadlineAt: &later}
		owner, err := s.BindTask(ctx, other)
		must(t, err)
		if owner != "org_a" {
			t.Errorf("BindTask of a bound task = %s, want the first owner org_a", owner)
		}
		got, err = s.TaskOwner(ctx, "lst_2", "task_c")
		must(t, err)
		wantBinding(t, "TaskOwner(child) after a second bind", *got, child)
	})

	t.Run("bindings: a reused task id is marked once, and stays bound to its owner", func(t *testing.T) {
		s := newStore(t)
		b := contracts.TaskBinding{ListingID: "lst_1", TaskID: "task-1", OrgID: "org_a", ContractID: "ctr_1", CreatedAt: t0}
		_, err := s.BindTask(ctx, b)
		must(t, err)
		first := t0.Add(time.Minute)
		must(t, s.MarkTaskReused(ctx, "lst_1", "task-1", first))
		must(t, s.MarkTaskReused(ctx, "lst_1", "task-1", first.Add(time.Hour)))
		got, err := s.TaskOwner(ctx, "lst_1", "task-1")
		must(t, err)
		b.ReusedAt = &first
		wantBinding(t, "TaskOwner(reused)", *got, b)
		wantKind(t, "MarkTaskReused(unseen)", s.MarkTaskReused(ctx, "lst_1", "task-9", first), agentmarket.NotFound)
	})

	t.Run("bindings: concurrent first sights for two orgs agree on one owner", func(t *testing.T) {
		s := newStore(t)
		var wg sync.WaitGroup
		got := make([]string, 16)
		errs := make([]error, 16)
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				org := fmt.Sprintf("org_%d", i%2)
				got[i], errs[i] = s.BindTask(ctx, contracts.TaskBinding{ListingID: "lst_1", TaskID: "task-race", OrgID: org, ContractID: "ctr_" + org, CreatedAt: t0})
			}()
		}
		wg.Wait()
		for i := range got {
			must(t, errs[i])
			if got[i] != got[0] {
				t.Fatalf("owners seen by concurrent binds: %v", got)
			}
		}
		b, err := s.TaskOwner(ctx, "lst_1", "task-race")
		must(t, err)
		if b.OrgID != got[0] || b.ContractID != "ctr_"+got[0] {
			t.Errorf("stored owner %s (%s), the binds were told %s", b.OrgID, b.ContractID, got[0])
		}
	})
}
