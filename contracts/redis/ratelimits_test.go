package redis_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/contracts/redis"
	"github.com/agentmarket/agentmarket/contracts/redis/redistest"
)

// TestRatesPerSecond: two clients (two meters) asking as fast as they
// can under one key's 40 requests a second get 40 a second together, past
// the first second, within 5 % over 3 s; a refusal says how long to wait.
func TestRatesPerSecond(t *testing.T) {
	// Two clients of one deployment (prefix), as two meters.
	prefix := fmt.Sprintf("rates%d:", time.Now().UnixNano())
	a, err := redis.Open(redistest.URL(t), redis.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := redis.Open(redistest.URL(t), redis.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	limits := []int64{40, 0, 0, 0}
	start := time.Now()
	var steady atomic.Int64
	var wg sync.WaitGroup
	var seq atomic.Int64
	for _, s := range []interface {
		TakeRates(context.Context, string, []string, []int64, time.Duration) (int, time.Duration, []int64, error)
	}{a, b} {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Since(start) < 4*time.Second {
					refused, wait, left, err := s.TakeRates(ctx, fmt.Sprint("c", seq.Add(1)), []string{"k:key_1"}, limits, time.Minute)
					if err != nil {
						t.Error(err)
						return
					}
					switch {
					case refused == -1 && time.Since(start) >= time.Second:
						steady.Add(1)
						if len(left) != 4 || left[0] < 0 || left[0] > 39 || left[1] != -1 {
							t.Errorf("left %v", left)
						}
					case refused == 0 && (wait <= 0 || wait > 2*time.Second):
						t.Errorf("refused with a wait of %s", wait)
					}
					time.Sleep(2 * time.Millisecond)
				}
			}()
		}
	}
	wg.Wait()
	t.Logf("%d admitted past the first second", steady.Load())
	if n := steady.Load(); n < 114 || n > 126 {
		t.Errorf("%d admitted in 3 s past the first under 40 a second, want 120 ± 5 %%", n)
	}
}

// TestRatesAllOrNone: a call refused by one holder's limit takes nothing
// under the others; in-flight calls count until done; tokens are debited
// after the call.
func TestRatesAllOrNone(t *testing.T) {
	s := redistest.Open(t)
	ctx := context.Background()
	ids := []string{"k:key_1", "l:lst_1"}
	limits := []int64{0, 100, 0, 0, 0, 0, 0, 2}
	for i := range 2 {
		if refused, _, left, err := s.TakeRates(ctx, fmt.Sprint("c", i), ids, limits, time.Minute); err != nil || refused != -1 || left[7] != int64(1-i) {
			t.Fatalf("call %d: refused %d, left %v, %v", i, refused, left, err)
		}
	}
	if refused, _, _, err := s.TakeRates(ctx, "c2", ids, limits, time.Minute); err != nil || refused != 7 {
		t.Fatalf("a third in flight: refused %d, %v; want the listing's in-flight limit (7)", refused, err)
	}
	// The refused call took nothing of the key's minute: 98 are left.
	if err := s.DoneRates(ctx, "c0", ids, limits, 0); err != nil {
		t.Fatal(err)
	}
	if refused, _, left, err := s.TakeRates(ctx, "c3", ids, limits, time.Minute); err != nil || refused != -1 || left[1] != 97 {
		t.Fatalf("after one ended: refused %d, left %v, %v; want admitted with 97 left a minute", refused, left, err)
	}

	tpm := []int64{0, 0, 1000, 0}
	if refused, _, left, err := s.TakeRates(ctx, "t0", []string{"s:ct_1"}, tpm, time.Minute); err != nil || refused != -1 || left[2] != 1000 {
		t.Fatalf("a full bucket: refused %d, left %v, %v", refused, left, err)
	}
	if err := s.DoneRates(ctx, "t0", []string{"s:ct_1"}, tpm, 1500); err != nil {
		t.Fatal(err)
	}
	if refused, wait, _, err := s.TakeRates(ctx, "t1", []string{"s:ct_1"}, tpm, time.Minute); err != nil || refused != 2 || wait < 29*time.Second || wait > 31*time.Second {
		t.Fatalf("after 1,500 tokens of 1,000 a minute: refused %d, wait %s, %v; want refused for about 30 s", refused, wait, err)
	}
}

// TestSessions: a conversation's sends are counted up to its cap, its
// cost after each call; another conversation is apart.
func TestSessions(t *testing.T) {
	s := redistest.Open(t)
	ctx := context.Background()
	for i := range 2 {
		if refused, calls, _, err := s.TakeSession(ctx, "s:ct_1|a", 2, 0, true); err != nil || refused != -1 || calls != int64(i+1) {
			t.Fatalf("send %d: refused %d, calls %d, %v", i+1, refused, calls, err)
		}
	}
	if refused, _, _, err := s.TakeSession(ctx, "s:ct_1|a", 2, 0, true); err != nil || refused != 0 {
		t.Fatalf("a third: refused %d, %v; want 0 (calls)", refused, err)
	}
	if err := s.AddSession(ctx, "s:ct_1|b", 1, 1200); err != nil {
		t.Fatal(err)
	}
	if refused, calls, micros, err := s.TakeSession(ctx, "s:ct_1|b", 2, 1000, true); err != nil || refused != 1 || calls != 1 || micros != 1200 {
		t.Fatalf("a conversation that cost 1,200 of 1,000: refused %d, %d calls, %d micros, %v; want 1 (spend)", refused, calls, micros, err)
	}
}
