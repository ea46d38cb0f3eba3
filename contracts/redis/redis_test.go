package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts/redis"

	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/redis/redistest"
	"github.com/agentmarket/agentmarket/contracts/storetest"
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
