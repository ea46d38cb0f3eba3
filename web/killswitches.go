package web

import (
	"strings"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// The kill switches page (contracts/killswitch.go): the switches the
// signed-in org sees (the operator every one), a form to switch something
// off, and a lift form per switch on. The keys page, the seller's listing
// page and the operator's page link here with the form filled in.

type switchesData struct {
	On, Lifted []contracts.Switch
	Scopes     []contracts.SwitchScope
	// Scope, Target and Listing fill the form (?scope=&target=&listing=).
	Scope, Target, Listing string
	Operator               bool
}

func (u *UI) killSwitches(r *req) error {
	if !r.signedIn {
		return agentmarket.Errorf(agentmarket.Unauthorized, "no_session", "sign in to see this page")
	}
	if u.d.Switches == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "not_found", "kill switches are not served here")
	}
	all, err := u.d.Switches.List(r.ctx, r.actor, false)
	if err != nil {
		return err
	}
	d := &switchesData{Scopes: contracts.SwitchScopes, Scope: r.c.Query("scope", string(contracts.SwitchListing)),
		Target: r.c.Query("target"), Listing: r.c.Query("listing"), Operator: r.actor.Operator}
	for _, s := range all {
		if s.Active() {
			d.On = append(d.On, s)
		} else {
			d.Lifted = append(d.Lifted, s)
		}
	}
	return u.render(r, "killswitches", "Kill switches", d)
}

func (u *UI) setKillSwitch(r *req) error {
	if u.d.Switches == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "not_found", "kill switches are not served here")
	}
	in := contracts.SwitchInput{Scope: contracts.SwitchScope(r.c.FormValue("scope")), TargetID: strings.Clone(r.c.FormValue("target_id")),
		ListingID: strings.Clone(r.c.FormValue("listing_id")), Reason: strings.Clone(r.c.FormValue("reason"))}
	if _, err := u.d.Switches.Set(r.ctx, r.actor, in); err != nil {
		return err
	}
	return redirect(r, "/kill-switches?notice=switchedoff")
}

func (u *UI) liftKillSwitch(r *req) error {
	if u.d.Switches == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "not_found", "kill switches are not served here")
	}
	if _, err := u.d.Switches.Lift(r.ctx, r.actor, strings.Clone(r.c.Params("id")), strings.Clone(r.c.FormValue("reason"))); err != nil {
		return err
	}
	return redirect(r, "/kill-switches?notice=lifted")
}

// activeSwitches are the switches of one scope on that the visitor sees,
// by target (none without the service).
func (u *UI) activeSwitches(r *req, scope contracts.SwitchScope) (map[string]*contracts.Switch, error) {
	if u.d.Switches == nil || !r.signedIn {
		return nil, nil
	}
	on, err := u.d.Switches.List(r.ctx, r.actor, true)
	if err != nil {
		return nil, err
	}
	out := map[string]*contracts.Switch{}
	for i := range on {
		if on[i].Scope == scope {
			out[on[i].TargetID] = &on[i]
		}
	}
	return out, nil
}
