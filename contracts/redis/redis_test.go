package redis_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts/redis"

	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/redis/redistest"
	"github.com/agentmarket/agentmarket/contracts/storetest"
	"github.com/agentmarket/agentmarket/metering"
)

func TestSent(t *testing.T) {
	storetest.RunSent(t, func(t *testing.T) contracts.SentMessages { return redistest.Open(t) })
}

func TestOwners(t *testing.T) {
	storetest.RunOwners(t, func(t *testing.T) contracts.TaskOwners { return redistest.Open(t) })
}

// TestOutage: while the server is down every operation fails at once as
// unavailable (the meter's cue for the database path); once it is back,
// empty, the store works again within a second (its scripts loaded again).
func TestOutage(t *testing.T) {
	srv := redistest.Start(t)
	s, err := redis.Open(srv.URL, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	bind := func(task string) (string, error) {
		return s.BindTask(ctx, contracts.TaskBinding{ListingID: "lst_1", TaskID: task, OrgID: "org_a", CreatedAt: time.Now()})
	}
	if o, err := bind("t1"); err != nil || o != "org_a" {
		t.Fatalf("bind: %q %v", o, err)
	}
	srv.Stop()
	for i := range 3 {
		start := time.Now()
		_, err := bind("t2")
		if agentmarket.KindOf(err) != agentmarket.Unavailable {
			t.Fatalf("bind %d while down: %v, want unavailable", i, err)
		}
		if _, err := s.TaskOwner(ctx, "lst_1", "t1"); agentmarket.KindOf(err) != agentmarket.Unavailable {
			t.Fatalf("lookup while down: %v, want unavailable", err)
		}
		t.Logf("failed in %s", time.Since(start))
	}
	srv.Restart()
	deadline := time.Now().Add(10 * time.Second)
	for {
		o, err := bind("t3")
		if err == nil && o == "org_a" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bind after the restart: %q %v", o, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := s.TaskOwner(ctx, "lst_1", "t1"); agentmarket.KindOf(err) != agentmarket.NotFound {
		t.Errorf("a binding of before the restart (nothing persists): %v, want not found", err)
	}
}

// TestRaiseBill: a task's bill is created only by the call that bound the
// task, raised to the largest cumulative report plus what calls add, and
// first once.
func TestRaiseBill(t *testing.T) {
	s := redistest.Open(t)
	ctx := context.Background()
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	c := func(i, o, ms int64) metering.Counters {
		return metering.Counters{InputTokens: i, OutputTokens: o, ComputeMs: ms}
	}
	if _, _, _, found, err := s.RaiseBill(ctx, "lst_1", "t1", false, c(5, 5, 5), c(0, 0, 0), at); err != nil || found {
		t.Fatalf("a task never billed here, not created: found=%v %v", found, err)
	}
	old, total, first, found, err := s.RaiseBill(ctx, "lst_1", "t1", true, c(10, 20, 0), c(3, 0, 100), at)
	if err != nil || !found || !first || old != c(0, 0, 0) || total != c(13, 20, 100) {
		t.Fatalf("first bill: %v %v first=%v found=%v %v", old, total, first, found, err)
	}
	// A lower report bills nothing more of it; what a call adds is added.
	old, total, first, found, err = s.RaiseBill(ctx, "lst_1", "t1", false, c(12, 25, 0), c(1, 0, 50), at.Add(time.Minute))
	if err != nil || !found || first || old != c(13, 20, 100) || total != c(14, 25, 150) {
		t.Fatalf("second bill: %v %v first=%v found=%v %v", old, total, first, found, err)
	}
	// Concurrent raises of one task add up exactly.
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, _, _, err := s.RaiseBill(ctx, "lst_1", "t1", false, c(0, 0, 0), c(1, 1, 1), at); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if _, total, _, _, _ = s.RaiseBill(ctx, "lst_1", "t1", false, c(0, 0, 0), c(0, 0, 0), at); total != c(34, 45, 170) {
		t.Errorf("after 20 concurrent adds of 1: %v, want {34 45 170}", total)
	}
}

func TestAttempts(t *testing.T) {
	storetest.RunAttempts(t, func(t *testing.T) contracts.AttemptStore { return redistest.Open(t) })
}

func TestPushGate(t *testing.T) {
	storetest.RunPushGate(t, func(t *testing.T) contracts.PushGate { return redistest.Open(t) })
}

// TestBudgets: reservations under several budgets at once are all or
// none, exact under concurrency (50 clients, room for 10); a settle frees
// the hold and adds the cost; the floor raises the spend.
func TestBudgets(t *testing.T) {
	s := redistest.Open(t)
	ctx := context.Background()
	key, sub := "k:key_1|2026-12", "c:ctr_1|2026-12"
	var mu sync.Mutex
	reserved := 0
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			refused, _, _, err := s.ReserveBudgets(ctx, []string{key, sub}, []int64{10_000, 1_000_000}, []int64{0, 0}, 1000)
			if err != nil {
				t.Error(err)
			}
			if refused == -1 {
				mu.Lock()
				reserved++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if reserved != 10 {
		t.Fatalf("%d of 50 reservations of 1,000 under 10,000, want 10", reserved)
	}
	if refused, spent, held, err := s.ReserveBudgets(ctx, []string{sub, key}, []int64{1_000_000, 10_000}, []int64{0, 0}, 1); err != nil || refused != 1 || spent != 0 || held != 10_000 {
		t.Errorf("an eleventh: refused %d, spent %d, held %d, %v; want the key's budget (1) with 0 spent and 10,000 held", refused, spent, held, err)
	}
	// The refused reservation took nothing under the subscription.
	for range 10 {
		if err := s.SettleBudgets(ctx, []string{key, sub}, 1000, 700); err != nil {
			t.Fatal(err)
		}
	}
	if refused, spent, held, err := s.ReserveBudgets(ctx, []string{key}, []int64{10_000}, []int64{9_500}, 600); err != nil || refused != 0 || spent != 9_500 || held != 0 {
		t.Errorf("after the settles, with the store's figure above them: refused %d, spent %d, held %d, %v; want refused with 9,500 spent, none held", refused, spent, held, err)
	}
	if refused, _, _, err := s.ReserveBudgets(ctx, []string{sub}, []int64{1_000_000}, []int64{0}, 993_000); err != nil || refused != -1 {
		t.Errorf("the subscription's rest (7,000 spent): refused %d, %v", refused, err)
	}
}
