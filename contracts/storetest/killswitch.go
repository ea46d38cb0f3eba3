package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// SwitchTaskStore is a task store that keeps kill switches too.
type SwitchTaskStore = interface {
	TaskStore
	contracts.SwitchStore
}

// RunSwitches runs the contract suite of kill switches: one on per scope
// and target, the version the meters poll, who a target belongs to, and
// the cancels a switch requests of the open tasks it concerns.
func RunSwitches(t *testing.T, newStore func(t *testing.T) (SwitchTaskStore, func(listingID, sellerOrgID string))) {
	ctx := context.Background()
	t.Run("kill switches", func(t *testing.T) {
		s, newListing := newStore(t)
		for _, id := range []string{"org_s", "org_b"} {
			must(t, s.CreateOrg(ctx, org(id, false), nil, key("key_"+id, id, t0)))
		}
		newListing("lst_1", "org_s")
		newListing("lst_2", "org_s")
		for _, b := range []contracts.TaskBinding{
			{ListingID: "lst_1", TaskID: "task_1", OrgID: "org_b", ContractID: "ctr_1", CreatedAt: t0},
			{ListingID: "lst_1", TaskID: "task_2", OrgID: "org_b", ContractID: "ctr_1", CreatedAt: t0},
			{ListingID: "lst_2", TaskID: "task_3", OrgID: "org_b", ContractID: "ctr_2", CreatedAt: t0},
			// made by the key's call: a switch of the key cancels it
			{ListingID: "lst_2", TaskID: "task_4", OrgID: "org_b", ContractID: "ctr_2", CreatedAt: t0, KeyID: "key_org_b"},
		} {
			if _, err := s.BindTask(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.TaskEnded(ctx, contracts.TaskEvent{ID: "tev_1", ListingID: "lst_1", TaskID: "task_2", Kind: contracts.TaskEnded, At: t0}); err != nil {
			t.Fatal(err)
		}

		for _, c := range []struct {
			scope           contracts.SwitchScope
			listing, target string
			want            string
		}{
			{contracts.SwitchListing, "", "lst_1", "org_s"},
			{contracts.SwitchSellerOrg, "", "org_s", "org_s"},
			{contracts.SwitchBuyerOrg, "", "org_b", "org_b"},
			{contracts.SwitchAPIKey, "", "key_org_b", "org_b"},
			{contracts.SwitchTask, "lst_1", "task_1", "org_b"},
		} {
			got, err := s.SwitchTargetOrg(ctx, c.scope, c.listing, c.target)
			if err != nil || got != c.want {
				t.Errorf("SwitchTargetOrg(%s %s) = %q %v, want %q", c.scope, c.target, got, err, c.want)
			}
			_, err = s.SwitchTargetOrg(ctx, c.scope, c.listing, "nope")
			wantKind(t, "SwitchTargetOrg of an unknown "+string(c.scope), err, agentmarket.NotFound)
		}

		v0, err := s.SwitchVersion(ctx)
		must(t, err)
		sw := &contracts.Switch{ID: "ks_1", Scope: contracts.SwitchListing, TargetID: "lst_1", OrgID: "org_s", Reason: "leaks", SetBy: "key:key_op", ByOperator: true, SetAt: t0}
		must(t, s.CreateSwitch(ctx, sw))
		dup := *sw
		dup.ID = "ks_2"
		wantKind(t, "a second switch of the listing", s.CreateSwitch(ctx, &dup), agentmarket.Conflict)
		on, v1, err := s.ActiveSwitches(ctx)
		must(t, err)
		if len(on) != 1 || on[0].ID != "ks_1" || on[0].Reason != "leaks" || !on[0].ByOperator || !on[0].SetAt.Equal(t0) || v1 != v0+1 {
			t.Errorf("ActiveSwitches = %+v at version %d, want ks_1 at %d", on, v1, v0+1)
		}

		n, err := s.RequestSwitchCancels(ctx, sw, t0)
		if err != nil || n != 1 {
			t.Errorf("RequestSwitchCancels of the listing = %d %v, want 1 (its one open task)", n, err)
		}
		due, err := s.DueTasks(ctx, t0.Add(time.Second), t0.Add(time.Minute), 10)
		must(t, err)
		if len(due) != 1 || due[0].TaskID != "task_1" || due[0].Why != "requested" || due[0].CancelActor != contracts.CanceledByKillSwitch || due[0].CancelReason != sw.CancelReason() {
			t.Errorf("DueTasks = %+v, want task_1 requested by the kill switch", due)
		}
		// A key's switch: the open tasks its calls made.
		if n, err := s.RequestSwitchCancels(ctx, &contracts.Switch{Scope: contracts.SwitchAPIKey, TargetID: "key_org_b"}, t0); err != nil || n != 1 {
			t.Errorf("RequestSwitchCancels of a key = %d %v, want 1 (task_4, its call's)", n, err)
		}
		seller := &contracts.Switch{ID: "ks_3", Scope: contracts.SwitchSellerOrg, TargetID: "org_s", OrgID: "org_s", Reason: "fraud", SetBy: "key:key_op", SetAt: t0}
		if n, err := s.RequestSwitchCancels(ctx, seller, t0); err != nil || n != 1 {
			t.Errorf("RequestSwitchCancels of the seller = %d %v, want 1 (task_3; task_1's cancel is requested already)", n, err)
		}
		if n, err := s.RequestSwitchCancels(ctx, &contracts.Switch{Scope: contracts.SwitchAPIKey, TargetID: "key_org_b"}, t0); err != nil || n != 0 {
			t.Errorf("RequestSwitchCancels of the key again = %d %v, want 0 (task_4's cancel is requested already)", n, err)
		}

		lifted, err := s.LiftSwitch(ctx, "ks_1", "key:key_op", true, "fixed", t0.Add(time.Hour))
		if err != nil || lifted.Active() || lifted.LiftReason != "fixed" || !lifted.LiftedByOperator {
			t.Errorf("LiftSwitch = %+v %v", lifted, err)
		}
		_, err = s.LiftSwitch(ctx, "ks_1", "key:key_op", true, "again", t0.Add(time.Hour))
		wantKind(t, "lifting a lifted switch", err, agentmarket.NotFound)
		on, v2, err := s.ActiveSwitches(ctx)
		must(t, err)
		if len(on) != 0 || v2 != v1+1 {
			t.Errorf("after the lift: %+v at version %d, want none at %d", on, v2, v1+1)
		}
		must(t, s.CreateSwitch(ctx, &dup)) // the listing may be switched off again
		all, err := s.ListSwitches(ctx, "org_s", false, 10)
		if err != nil || len(all) != 2 {
			t.Errorf("ListSwitches(org_s) = %+v %v, want both", all, err)
		}
		if mine, err := s.ListSwitches(ctx, "org_b", false, 10); err != nil || len(mine) != 0 {
			t.Errorf("ListSwitches(org_b) = %+v %v, want none", mine, err)
		}

		// The operator's switch takes the place of an org's.
		own := &contracts.Switch{ID: "ks_4", Scope: contracts.SwitchTask, ListingID: "lst_2", TargetID: "task_3", OrgID: "org_b", Reason: "mine", SetBy: "key:key_org_b", SetAt: t0}
		must(t, s.CreateSwitch(ctx, own))
		opSw := &contracts.Switch{ID: "ks_5", Scope: contracts.SwitchTask, ListingID: "lst_2", TargetID: "task_3", OrgID: "org_b", Reason: "theirs", SetBy: "key:key_op", ByOperator: true, SetAt: t0.Add(time.Minute)}
		taken, err := s.TakeOverSwitch(ctx, opSw, "taken over")
		if err != nil || taken == nil || taken.ID != "ks_4" || taken.Active() || !taken.LiftedByOperator || taken.LiftedBy != "key:key_op" || taken.LiftReason != "taken over" {
			t.Errorf("TakeOverSwitch = %+v %v, want ks_4 lifted by the operator", taken, err)
		}
		_, err = s.TakeOverSwitch(ctx, &contracts.Switch{ID: "ks_6", Scope: contracts.SwitchTask, ListingID: "lst_2", TargetID: "task_3", OrgID: "org_b", Reason: "again", SetBy: "key:key_op", ByOperator: true, SetAt: t0}, "x")
		wantKind(t, "taking over the operator's own switch", err, agentmarket.Conflict)
		if taken, err := s.TakeOverSwitch(ctx, &contracts.Switch{ID: "ks_7", Scope: contracts.SwitchTask, ListingID: "lst_1", TargetID: "task_1", OrgID: "org_b", Reason: "new", SetBy: "key:key_op", ByOperator: true, SetAt: t0}, "x"); err != nil || taken != nil {
			t.Errorf("TakeOverSwitch with no switch on = %+v %v, want nil, nil", taken, err)
		}
		on, _, err = s.ActiveSwitches(ctx)
		must(t, err)
		ids := map[string]bool{}
		for _, o := range on {
			ids[o.ID] = true
		}
		if len(on) != 3 || !ids["ks_2"] || !ids["ks_5"] || !ids["ks_7"] {
			t.Errorf("ActiveSwitches after the take-over = %+v, want ks_2, ks_5, ks_7", on)
		}
	})
}
