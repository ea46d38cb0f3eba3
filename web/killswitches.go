package web

import (
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// The kill switches page (contracts/killswitch.go): the switches the
// signed-in org sees (the operator every one), a form to switch something
// off, and a lift form per switch on. The keys page, the seller's listing
// page and the operator's page link here with the form filled in.

type switchesData struct {
	// form is the switch-off form's values and, when it was refused, why
	// (a lift refused shows its reasons at the top).
	form
	On, Lifted []contracts.Switch
	Scopes     []contracts.SwitchScope
	// Scope and Listing fill the form (?scope=&target=&listing=, or what
	// was sent).
	Scope, Listing string
	Operator       bool
}

func (u *UI) killSwitches(r *req) error {
	d := &switchesData{form: form{Values: map[string]string{"target_id": r.c.Query("target")}},
		Scope: r.c.Query("scope", string(contracts.SwitchListing)), Listing: r.c.Query("listing")}
	return u.switchesPage(r, d)
}

// switchesPage renders the page with d's form.
func (u *UI) switchesPage(r *req, d *switchesData) error {
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
	d.Scopes, d.Operator = contracts.SwitchScopes, r.actor.Operator
	for _, s := range all {
		if s.Active() {
			d.On = append(d.On, s)
		} else {
			d.Lifted = append(d.Lifted, s)
		}
	}
	return u.render(r, "killswitches", "Kill switches", d)
}

// setKillSwitch switches something off; a refused form comes back with
// what to correct, as every form of the console does.
func (u *UI) setKillSwitch(r *req) error {
	if u.d.Switches == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "not_found", "kill switches are not served here")
	}
	d := &switchesData{form: form{Values: map[string]string{"target_id": strings.Clone(r.c.FormValue("target_id")),
		"reason": strings.Clone(r.c.FormValue("reason"))}},
		Scope: strings.Clone(r.c.FormValue("scope")), Listing: strings.Clone(r.c.FormValue("listing_id"))}
	in := contracts.SwitchInput{Scope: contracts.SwitchScope(d.Scope), TargetID: d.V("target_id"), ListingID: d.Listing, Reason: d.V("reason")}
	_, err := u.d.Switches.Set(r.ctx, r.actor, in)
	if err == nil {
		return redirect(r, "/kill-switches?notice=switchedoff")
	}
	if !d.absorb(err, nil) {
		return err
	}
	r.c.Status(fiber.StatusUnprocessableEntity)
	return u.switchesPage(r, d)
}

// liftKillSwitch lifts a switch; a refused lift (no reason given) comes
// back with why at the top of the page.
func (u *UI) liftKillSwitch(r *req) error {
	if u.d.Switches == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "not_found", "kill switches are not served here")
	}
	_, err := u.d.Switches.Lift(r.ctx, r.actor, strings.Clone(r.c.Params("id")), strings.Clone(r.c.FormValue("reason")))
	if err == nil {
		return redirect(r, "/kill-switches?notice=lifted")
	}
	d := &switchesData{form: form{Values: map[string]string{}}, Scope: string(contracts.SwitchListing)}
	if !d.absorb(err, func(string) string { return "" }) {
		return err
	}
	r.c.Status(fiber.StatusUnprocessableEntity)
	return u.switchesPage(r, d)
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
