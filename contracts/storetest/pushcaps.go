package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// PushCapsStore keeps the orgs' own push caps and the push configs they
// cap (a config's caps go with it).
type PushCapsStore interface {
	contracts.PushCapsStore
	contracts.PushStore
}

// RunPushCaps is the contract of contracts.PushCapsStore: an org's caps
// per destination, replaced whole, listed by destination, its own only;
// and per push config, listed with the config's destination while the
// config exists.
func RunPushCaps(t *testing.T, newStore func(t *testing.T) PushCapsStore) {
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
	t.Run("push config caps: save, replace, list with the destination while the config exists, delete", func(t *testing.T) {
		s := newStore(t)
		cfg := func(org, task, id, url string) contracts.PushConfigCaps {
			must(t, s.SavePushConfig(ctx, contracts.PushConfig{ListingID: "lst_1", TaskID: task, ConfigID: id, OrgID: org, Version: "1.0", URL: url,
				CallbackID: "pcb_" + task + id, SecretHash: "x", CreatedAt: at}))
			return contracts.PushConfigCaps{OrgID: org, ListingID: "lst_1", TaskID: task, ConfigID: id, UpdatedAt: at}
		}
		a1 := cfg("org_a", "task_1", "cfg_1", "https://hooks.a.example/x")
		a2 := cfg("org_a", "task_1", "cfg_2", "http://127.0.0.1:8080/y")
		b := cfg("org_b", "task_2", "cfg_1", "https://hooks.a.example/x")
		a1.PerSecond, a2.PerSecond, b.PerSecond = 2.5, 0.01, 7
		for _, c := range []contracts.PushConfigCaps{a1, a2, b} {
			must(t, s.SavePushConfigCaps(ctx, c))
		}
		a1.PerSecond, a1.UpdatedAt = 0.125, at.Add(time.Minute)
		must(t, s.SavePushConfigCaps(ctx, a1))
		a1.Destination, a2.Destination = "https://hooks.a.example:443", "http://127.0.0.1:8080"
		got, err := s.PushConfigCaps(ctx, "org_a")
		must(t, err)
		if want := []contracts.PushConfigCaps{a1, a2}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("PushConfigCaps(org_a) = %+v, want %+v", got, want)
		}
		// The config moved to another server: its caps follow it.
		cfg("org_a", "task_1", "cfg_2", "https://elsewhere.example:8443/z")
		if got, err := s.PushConfigCaps(ctx, "org_a"); err != nil || len(got) != 2 || got[1].Destination != "https://elsewhere.example:8443" || got[1].PerSecond != 0.01 {
			t.Errorf("after the config's URL changed: %+v, %v; want its caps at https://elsewhere.example:8443", got, err)
		}
		if err := s.DeletePushConfigCaps(ctx, "org_b", "lst_1", "task_1", "cfg_1"); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("org_b deleting org_a's config caps: %v, want NotFound", err)
		}
		must(t, s.DeletePushConfigCaps(ctx, "org_a", "lst_1", "task_1", "cfg_1"))
		if err := s.DeletePushConfigCaps(ctx, "org_a", "lst_1", "task_1", "cfg_1"); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("deleting again: %v, want NotFound", err)
		}
		// Deleting the config drops its caps: a config made again with
		// its id starts without them.
		must(t, s.DeletePushConfig(ctx, "lst_1", "task_1", "cfg_2"))
		if got, err := s.PushConfigCaps(ctx, "org_a"); err != nil || len(got) != 0 {
			t.Errorf("after the config was deleted: %+v, %v; want none", got, err)
		}
		cfg("org_a", "task_1", "cfg_2", "http://127.0.0.1:8080/y")
		if got, err := s.PushConfigCaps(ctx, "org_a"); err != nil || len(got) != 0 {
			t.Errorf("a config made again with a deleted one's id: %+v, %v; want no caps", got, err)
		}
		if got, err := s.PushConfigCaps(ctx, "org_b"); err != nil || len(got) != 1 || got[0].PerSecond != 7 || got[0].Destination != "https://hooks.a.example:443" {
			t.Errorf("PushConfigCaps(org_b) = %+v, %v: org_a's changes touched org_b's", got, err)
		}
	})
}
