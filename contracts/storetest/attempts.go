package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/contracts"
)

// RunAttempts runs the contract suite of the counts of failed attempts
// (contracts.AttemptStore) against a fresh store from newStore.
func RunAttempts(t *testing.T, newStore func(t *testing.T) contracts.AttemptStore) {
	ctx := context.Background()
	t.Run("count, last, reset", func(t *testing.T) {
		s := newStore(t)
		now := time.Now().UTC().Truncate(time.Millisecond)
		if n, last, err := s.Failures(ctx, "acct:a@b.example"); err != nil || n != 0 || !last.IsZero() {
			t.Fatalf("before any failure: %d %v %v", n, last, err)
		}
		for i := range 3 {
			n, err := s.AddFailure(ctx, "acct:a@b.example", now.Add(time.Duration(i)*time.Second), time.Hour)
			if err != nil || n != int64(i+1) {
				t.Fatalf("failure %d: %d %v", i+1, n, err)
			}
		}
		n, last, err := s.Failures(ctx, "acct:a@b.example")
		if err != nil || n != 3 || !last.Equal(now.Add(2*time.Second)) {
			t.Errorf("after three: %d %v %v, want 3 at %v", n, last, err, now.Add(2*time.Second))
		}
		if n, _, _ := s.Failures(ctx, "ip:192.0.2.1"); n != 0 {
			t.Errorf("another key: %d", n)
		}
		if err := s.ResetFailures(ctx, "acct:a@b.example"); err != nil {
			t.Fatal(err)
		}
		if n, _, _ := s.Failures(ctx, "acct:a@b.example"); n != 0 {
			t.Errorf("after the reset: %d", n)
		}
	})
	t.Run("forgotten ttl after the last failure", func(t *testing.T) {
		s := newStore(t)
		for range 4 {
			if _, err := s.AddFailure(ctx, "ip:192.0.2.9", time.Now(), 150*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(300 * time.Millisecond)
		if n, err := s.AddFailure(ctx, "ip:192.0.2.9", time.Now(), time.Hour); err != nil || n != 1 {
			t.Errorf("a failure after the others were forgotten: count %d %v, want 1", n, err)
		}
	})
}
