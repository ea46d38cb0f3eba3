package a2aproxy

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// fakeSwitches is a store of switches that can be down, counting the
// cancels requested.
type fakeSwitches struct {
	mu        sync.Mutex
	on        []contracts.Switch
	version   int64
	down      error
	requested map[string]int
}

func (f *fakeSwitches) SwitchVersion(context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.version, f.down
}

func (f *fakeSwitches) ActiveSwitches(context.Context) ([]contracts.Switch, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]contracts.Switch(nil), f.on...), f.version, f.down
}

func (f *fakeSwitches) RequestSwitchCancels(_ context.Context, s *contracts.Switch, _ time.Time) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requested[s.ID]++
	return 0, nil
}

// noDueTasks is a task life with nothing due.
type noDueTasks struct{ contracts.TaskLife }

func (noDueTasks) DueTasks(context.Context, time.Time, time.Time, int) ([]contracts.DueTask, error) {
	return nil, nil
}

// TestKillSwitchesAtStart: the meter reads the switches before it serves
// (a switched-off call is refused from the first), does not request again
// the cancels of a switch set long before its start (one set just before
// is acted on), and reports a failed read on /readyz until a read
// succeeds.
func TestKillSwitchesAtStart(t *testing.T) {
	now := time.Now()
	store := &fakeSwitches{version: 7, requested: map[string]int{}, on: []contracts.Switch{
		{ID: "ks_old", Scope: contracts.SwitchListing, TargetID: "lst_a", SetAt: now.Add(-time.Hour)},
		{ID: "ks_new", Scope: contracts.SwitchAPIKey, TargetID: "key_1", SetAt: now.Add(-time.Second)},
	}}
	p := &Proxy{Clock: agentmarket.SystemClock{}, Logger: slog.New(slog.DiscardHandler), Tasks: noDueTasks{},
		Limits: Limits{RequestTimeout: 10 * time.Second}, Switches: &Switchboard{Store: store}}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); p.background.Wait() }()
	if err := p.LoadKillSwitches(ctx); err != nil {
		t.Fatal(err)
	}
	stage := killswitch{board: p.Switches}
	send := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}}`
	if err := stage.serve(switchCall(t, "lst_a", "org_s", "org_b", "key_2", send), func(*call) error { return nil }); err == nil {
		t.Error("a call to the switched-off listing right after the start was admitted")
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		store.mu.Lock()
		n := store.requested["ks_new"]
		store.mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	store.mu.Lock()
	if store.requested["ks_old"] != 0 || store.requested["ks_new"] != 1 {
		t.Errorf("cancels requested at the start: %v, want ks_new's only", store.requested)
	}
	store.mu.Unlock()
	if detail, err := p.SwitchesHealth(); err != nil || detail != "2 on" {
		t.Errorf("SwitchesHealth = %q %v, want 2 on", detail, err)
	}

	store.mu.Lock()
	store.down = errors.New("connection refused")
	store.mu.Unlock()
	if err := p.readSwitches(ctx, &p.Switches.read); err == nil {
		t.Fatal("a read of a store that is down succeeded")
	}
	if _, err := p.SwitchesHealth(); err == nil {
		t.Error("SwitchesHealth after a failed poll: no error, want it reported")
	}
	if err := stage.serve(switchCall(t, "lst_a", "org_s", "org_b", "key_2", send), func(*call) error { return nil }); err == nil {
		t.Error("the switch was dropped when the store went down; want the last read kept")
	}
	store.mu.Lock()
	store.down = nil
	store.mu.Unlock()
	if err := p.readSwitches(ctx, &p.Switches.read); err != nil {
		t.Fatal(err)
	}
	if _, err := p.SwitchesHealth(); err != nil {
		t.Errorf("SwitchesHealth after a good poll: %v", err)
	}
}
