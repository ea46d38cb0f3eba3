package a2aproxy_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/contracts"
)

// slowProjection is a task owners' store in which a binding appears only
// after a few reads (another meter's projection on its way).
type slowProjection struct {
	mu      sync.Mutex
	reads   int
	appears int // the read from which the binding is there
	b       *contracts.TaskBinding
}

func (s *slowProjection) BindTask(context.Context, contracts.TaskBinding) (string, error) {
	return "", nil
}
func (s *slowProjection) MarkTaskReused(context.Context, string, string, time.Time) error { return nil }
func (s *slowProjection) TaskOwner(_ context.Context, listingID, taskID string) (*contracts.TaskBinding, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.b != nil && s.reads >= s.appears && s.b.ListingID == listingID && s.b.TaskID == taskID {
		c := *s.b
		return &c, nil
	}
	return nil, agentmarket.Errorf(agentmarket.NotFound, "task_not_found", "no task %s", taskID)
}

func TestOwnerIndex(t *testing.T) {
	ctx := context.Background()
	b := func(listing, task, org string) contracts.TaskBinding {
		return contracts.TaskBinding{ListingID: listing, TaskID: task, OrgID: org}
	}

	t.Run("the first binding stays", func(t *testing.T) {
		x := a2aproxy.NewOwnerIndex(&slowProjection{}, 1000, 50*time.Millisecond)
		if got, created := x.Bind(b("lst", "task-1", "org_a")); !created || got.OrgID != "org_a" {
			t.Fatalf("first bind: %+v %v", got, created)
		}
		if got, created := x.Bind(b("lst", "task-1", "org_b")); created || got.OrgID != "org_a" {
			t.Fatalf("second bind: %+v %v, want org_a's binding", got, created)
		}
		if got, created := x.Bind(b("lst2", "task-1", "org_b")); !created || got.OrgID != "org_b" {
			t.Fatalf("the same id on another listing: %+v %v", got, created)
		}
		if got := x.ByTask("task-1"); len(got) != 2 {
			t.Fatalf("ByTask = %d bindings, want 2", len(got))
		}
		x.MarkReused("lst", "task-1", time.Unix(1, 0))
		if got, err := x.Lookup(ctx, "lst", "task-1"); err != nil || got.ReusedAt == nil || got.OrgID != "org_a" {
			t.Fatalf("after MarkReused: %+v %v", got, err)
		}
	})

	t.Run("one task id on three listings", func(t *testing.T) {
		x := a2aproxy.NewOwnerIndex(&slowProjection{}, 1000, time.Millisecond)
		for _, l := range []string{"lst1", "lst2", "lst3"} {
			if _, created := x.Bind(b(l, "task-3", "org_"+l)); !created {
				t.Fatalf("bind on %s: not created", l)
			}
		}
		x.MarkEnded("lst2", "task-3")
		if !x.EndedKnown("lst2", "task-3") || x.EndedKnown("lst1", "task-3") || x.EndedKnown("lst3", "task-3") {
			t.Fatal("the end marked on lst2 only")
		}
		x.Forget("lst1", "task-3") // the first
		x.Forget("lst3", "task-3") // the last
		if x.Peek("lst1", "task-3") != nil || x.Peek("lst3", "task-3") != nil {
			t.Fatal("forgotten bindings still held")
		}
		if got := x.Peek("lst2", "task-3"); got == nil || got.OrgID != "org_lst2" || got.Ended == nil {
			t.Fatalf("the one left: %+v", got)
		}
		if got := x.ByTask("task-3"); len(got) != 1 || got[0].ListingID != "lst2" {
			t.Fatalf("ByTask = %+v, want lst2's alone", got)
		}
		x.Forget("lst2", "task-3")
		if got := x.ByTask("task-3"); len(got) != 0 {
			t.Fatalf("ByTask after every Forget = %+v", got)
		}
		if _, created := x.Bind(b("lst3", "task-3", "org_new")); !created {
			t.Fatal("a forgotten binding could not be made again")
		}
	})

	t.Run("a miss waits for another meter's projection", func(t *testing.T) {
		store := &slowProjection{appears: 3, b: &contracts.TaskBinding{ListingID: "lst", TaskID: "task-9", OrgID: "org_a"}}
		x := a2aproxy.NewOwnerIndex(store, 1000, 5*time.Second)
		got, err := x.Lookup(ctx, "lst", "task-9")
		if err != nil || got.OrgID != "org_a" {
			t.Fatalf("Lookup = %+v, %v; want org_a's task once projected", got, err)
		}
		if store.reads != 3 {
			t.Fatalf("%d reads, want 3", store.reads)
		}
		// Held now: no more reads.
		if _, err := x.Lookup(ctx, "lst", "task-9"); err != nil || store.reads != 3 {
			t.Fatalf("second Lookup read the database again (%d reads): %v", store.reads, err)
		}
	})

	t.Run("an unknown task is not found once the wait is over", func(t *testing.T) {
		x := a2aproxy.NewOwnerIndex(&slowProjection{}, 1000, 60*time.Millisecond)
		start := time.Now()
		_, err := x.Lookup(ctx, "lst", "nope")
		if agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Fatalf("Lookup of an unknown task: %v", err)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("the wait was not bounded")
		}
		if _, err := x.Known(ctx, "lst", "nope"); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Fatalf("Known of an unknown task: %v", err)
		}
	})

	t.Run("bounded: the oldest bindings go first, and are read again", func(t *testing.T) {
		store := &slowProjection{}
		x := a2aproxy.NewOwnerIndex(store, 64*16, time.Millisecond) // 16 a shard
		for i := range 64 * 40 {
			x.Bind(b("lst", "task-"+string(rune('A'+i%26))+"-"+strconv.Itoa(i), "org_a"))
		}
		held := 0
		for i := range 64 * 40 {
			if x.Peek("lst", "task-"+string(rune('A'+i%26))+"-"+strconv.Itoa(i)) != nil {
				held++
			}
		}
		if held > 64*16 || held == 0 {
			t.Fatalf("%d bindings held, want at most %d", held, 64*16)
		}
		if x.Peek("lst", "task-"+string(rune('A'+(64*40-1)%26))+"-"+strconv.Itoa(64*40-1)) == nil {
			t.Fatal("the newest binding was dropped")
		}
	})
}

// BenchmarkOwnerBind binds new tasks (random ids, as agents give) into a
// full index of the meter's default size (200,000), the oldest evicted:
// what each new task costs the call path in the owner index.
//
//	go test -run '^$' -bench OwnerBind -benchmem -benchtime 500000x ./a2aproxy/
func BenchmarkOwnerBind(b *testing.B) {
	x := a2aproxy.NewOwnerIndex(&slowProjection{}, 200_000, time.Millisecond)
	ids := make([]string, 1<<20)
	for i := range ids {
		ids[i] = agentmarket.NewID("t")
	}
	for i := range 200_000 {
		x.Bind(contracts.TaskBinding{ListingID: "lst_1", TaskID: ids[i], OrgID: "org_a"})
	}
	i := 200_000
	for b.Loop() {
		x.Bind(contracts.TaskBinding{ListingID: "lst_1", TaskID: ids[i%len(ids)], OrgID: "org_a"})
		i++
	}
}
