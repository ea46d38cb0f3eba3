package a2aproxy

import (
	"testing"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts"
)

func switchCall(t testing.TB, listing, seller, org, key, body string) *call {
	req, werr := wire.ParseRequest([]byte(body), "1.0")
	if werr != nil {
		t.Fatal(werr)
	}
	return &call{target: &Target{ListingID: listing, SellerOrgID: seller}, actor: agentmarket.Actor{OrgID: org, KeyID: key}, req: req}
}

// TestKillSwitchStage: each scope refuses the calls it names with -32048
// and lets the others through; a switched-off key or org may still cancel
// and read its tasks.
func TestKillSwitchStage(t *testing.T) {
	get := `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"task-1"}}`
	send := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}}`
	cancel := `{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"task-1"}}`
	stream := `{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":"task-1"}}`
	for _, c := range []struct {
		sw      contracts.Switch
		stopped []*call
		passed  []*call
	}{
		{contracts.Switch{ID: "ks_1", Scope: contracts.SwitchListing, TargetID: "lst_a"},
			[]*call{switchCall(t, "lst_a", "org_s", "org_b", "key_1", send), switchCall(t, "lst_a", "org_s", "org_b", "key_1", cancel)}, []*call{switchCall(t, "lst_b", "org_s", "org_b", "key_1", send)}},
		{contracts.Switch{ID: "ks_2", Scope: contracts.SwitchSellerOrg, TargetID: "org_s"},
			[]*call{switchCall(t, "lst_b", "org_s", "org_b", "key_1", send)}, []*call{switchCall(t, "lst_c", "org_t", "org_b", "key_1", send)}},
		{contracts.Switch{ID: "ks_3", Scope: contracts.SwitchBuyerOrg, TargetID: "org_b"},
			[]*call{switchCall(t, "lst_a", "org_s", "org_b", "key_2", send), switchCall(t, "lst_a", "org_s", "org_b", "key_2", stream)},
			// The org may still stop its tasks and see them stopped.
			[]*call{switchCall(t, "lst_a", "org_s", "org_c", "key_3", send), switchCall(t, "lst_a", "org_s", "org_b", "key_2", get),
				switchCall(t, "lst_a", "org_s", "org_b", "key_2", cancel)}},
		{contracts.Switch{ID: "ks_4", Scope: contracts.SwitchAPIKey, TargetID: "key_1"},
			[]*call{switchCall(t, "lst_a", "org_s", "org_b", "key_1", send), switchCall(t, "lst_a", "org_s", "org_b", "key_1", stream)},
			[]*call{switchCall(t, "lst_a", "org_s", "org_b", "key_2", send), switchCall(t, "lst_a", "org_s", "org_b", "key_1", get),
				switchCall(t, "lst_a", "org_s", "org_b", "key_1", cancel)}},
		{contracts.Switch{ID: "ks_5", Scope: contracts.SwitchTask, ListingID: "lst_a", TargetID: "task-1"},
			[]*call{switchCall(t, "lst_a", "org_s", "org_b", "key_1", get), switchCall(t, "lst_a", "org_s", "org_b", "key_1", cancel)},
			[]*call{switchCall(t, "lst_a", "org_s", "org_b", "key_1", send), switchCall(t, "lst_b", "org_s", "org_b", "key_1", get)}},
	} {
		b := &Switchboard{}
		b.set.Store(newSwitchSet([]contracts.Switch{c.sw}))
		stage := killswitch{board: b}
		next := func(*call) error { return nil }
		for _, cl := range c.stopped {
			err := stage.serve(cl, next)
			if re := toRPC(err); err == nil || re.Code != CodeSwitchedOff {
				t.Errorf("%s: a call it names: %v, want -32048", c.sw.Scope, err)
			}
		}
		for _, cl := range c.passed {
			if err := stage.serve(cl, next); err != nil {
				t.Errorf("%s: a call it does not name: %v", c.sw.Scope, err)
			}
		}
	}
}

// BenchmarkKillSwitchQuiet is what the stage adds to a call while no
// switch is on anywhere: one atomic load, no allocation.
func BenchmarkKillSwitchQuiet(b *testing.B) {
	stage := killswitch{board: &Switchboard{}}
	cl := switchCall(b, "lst_a", "org_s", "org_b", "key_1", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"task-1"}}`)
	next := func(*call) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if err := stage.serve(cl, next); err != nil {
			b.Fatal(err)
		}
	}
}
