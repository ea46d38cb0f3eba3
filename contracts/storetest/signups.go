package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// RunPendingSignups is the contract of contracts.PendingSignupStore: a
// pending sign-up is taken once, and the expired ones are swept when a
// new one is stored.
func RunPendingSignups(t *testing.T, newStore func(t *testing.T) contracts.PendingSignupStore) {
	ctx := context.Background()
	t.Run("pending sign-ups: taken once, expired ones swept", func(t *testing.T) {
		s := newStore(t)
		a := &contracts.PendingSignup{TokenHash: contracts.HashSessionToken("a"), Email: "a@acme.example", CreatedAt: t0, ExpiresAt: t0.Add(24 * time.Hour)}
		must(t, s.CreatePendingSignup(ctx, a))
		if err := s.CreatePendingSignup(ctx, a); agentmarket.KindOf(err) != agentmarket.Conflict {
			t.Errorf("the same token hash again: %v, want Conflict", err)
		}
		got, err := s.TakePendingSignup(ctx, a.TokenHash)
		must(t, err)
		want := *a
		want.CreatedAt, want.ExpiresAt = t0.UTC(), a.ExpiresAt.UTC()
		if *got != want {
			t.Errorf("TakePendingSignup = %+v, want %+v", *got, want)
		}
		if _, err := s.TakePendingSignup(ctx, a.TokenHash); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("taking it again: %v, want NotFound", err)
		}
		if _, err := s.TakePendingSignup(ctx, contracts.HashSessionToken("never")); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("taking an unknown one: %v, want NotFound", err)
		}

		old := &contracts.PendingSignup{TokenHash: contracts.HashSessionToken("old"), Email: "o@old.example", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
		must(t, s.CreatePendingSignup(ctx, old))
		later := &contracts.PendingSignup{TokenHash: contracts.HashSessionToken("later"), Email: "l@later.example", CreatedAt: t0.Add(2 * time.Hour), ExpiresAt: t0.Add(26 * time.Hour)}
		must(t, s.CreatePendingSignup(ctx, later))
		if _, err := s.TakePendingSignup(ctx, old.TokenHash); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("an expired pending sign-up after a newer one was stored: %v, want swept (NotFound)", err)
		}
		if _, err := s.TakePendingSignup(ctx, later.TokenHash); err != nil {
			t.Errorf("the newer one: %v", err)
		}
	})
}
