package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// RunPushCaps is the contract of contracts.PushCapsStore: an org's caps
// per destination, replaced whole, listed by destination, its own only.
func RunPushCaps(t *testing.T, newStore func(t *testing.T) contracts.PushCapsStore) {
	ctx := context.Background()
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	t.Run("push caps: save, replace, list per org, delete", func(t *testing.T) {
		s := newStore(t)
		a := contracts.PushCaps{OrgID: "org_a", Destination: "https://hooks.a.example:443", MaxInFlight: 1, PerSecond: 2.5, UpdatedAt: at}
		must(t, s.SavePushCaps(ctx, a))
		must(t, s.SavePushCaps(ctx, contracts.PushCaps{OrgID: "org_b", Destination: a.Destination, MaxInFlight: 4, UpdatedAt: at}))
		a.MaxInFlight, a.PerSecond, a.UpdatedAt = 0, 0.125, at.Add(time.Minute)
		must(t, s.SavePushCaps(ctx, a))
		early := contracts.PushCaps{OrgID: "org_a", Destination: "http://127.0.0.1:8080", MaxInFlight: 3, UpdatedAt: at}
		must(t, s.SavePushCaps(ctx, early))
		got, err := s.PushCaps(ctx, "org_a")
		must(t, err)
		if want := []contracts.PushCaps{early, a}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("PushCaps(org_a) = %+v, want %+v", got, want)
		}
		must(t, s.DeletePushCaps(ctx, "org_a", a.Destination))
		if err := s.DeletePushCaps(ctx, "org_a", a.Destination); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("deleting again: %v, want NotFound", err)
		}
		if err := s.DeletePushCaps(ctx, "org_c", early.Destination); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("another org deleting org_a's caps: %v, want NotFound", err)
		}
		if got, err := s.PushCaps(ctx, "org_b"); err != nil || len(got) != 1 || got[0].MaxInFlight != 4 {
			t.Errorf("PushCaps(org_b) = %+v, %v: org_a's changes touched org_b's", got, err)
		}
	})
}
