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
	On, Lifted []switchView
	Scopes     []scopeChoice
	// Scope and Listing fill the form (?scope=&target=&listing=, or what
	// was sent).
	Scope, Listing string
	Operator       bool
}

// switchView is a switch as the page names it: what it stops, in words,
// and who set and lifted it, by name where the viewer may see it.
type switchView struct {
	contracts.Switch
	What, Target, SetByName, LiftedByName string
}

// scopeChoice is a scope of the form's choice, with its words.
type scopeChoice struct {
	Value contracts.SwitchScope
	Label string
}

// scopeWords are the page's words for each scope.
var scopeWords = map[contracts.SwitchScope]string{
	contracts.SwitchListing:   "A listing",
	contracts.SwitchSellerOrg: "A seller (every listing it sells)",
	contracts.SwitchBuyerOrg:  "A buyer organisation",
	contracts.SwitchAPIKey:    "An API key",
	contracts.SwitchTask:      "A task",
}

// switchWords are the page's words for the service's field names.
var switchWords = map[string]string{"target_id": "the id", "listing_id": "the listing", "scope": "what to switch off", "reason": "the reason"}

// switchView names s for the page.
func (u *UI) switchView(r *req, n *contracts.Names, lb *labeler, s contracts.Switch) switchView {
	v := switchView{Switch: s, What: scopeWords[s.Scope], SetByName: actorWords(r, n, s.SetBy), LiftedByName: actorWords(r, n, s.LiftedBy)}
	if v.What == "" {
		v.What = statusText(s.Scope)
	}
	switch s.Scope {
	case contracts.SwitchListing:
		if l := lb.listing(s.TargetID); l.name != s.TargetID {
			v.Target = l.name
		}
	case contracts.SwitchSellerOrg, contracts.SwitchBuyerOrg:
		v.Target = n.Org(r.ctx, s.TargetID)
	case contracts.SwitchAPIKey:
		v.Target = n.Key(r.ctx, s.TargetID).Name
	}
	return v
}

// actorWords names who a switch says set or lifted it ("user:<id>",
// "key:<id>", "operator"): a user's e-mail, a key's name, or, where the
// viewer may not see it, the kind alone.
func actorWords(r *req, n *contracts.Names, who string) string {
	kind, id, _ := strings.Cut(who, ":")
	switch kind {
	case "":
		return ""
	case "user":
		if e := n.User(r.ctx, id); e != "" {
			return e
		}
		return "a user"
	case "key":
		if k := n.Key(r.ctx, id); k.Name != "" {
			return "key " + k.Name
		}
		return "an API key"
	case "operator":
		return "the operator"
	case "org":
		if o := n.Org(r.ctx, id); o != "" {
			return o
		}
		return "an organisation"
	}
	return statusText(who)
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
	d.Operator = r.actor.Operator
	for _, s := range contracts.SwitchScopes {
		d.Scopes = append(d.Scopes, scopeChoice{Value: s, Label: scopeWords[s]})
	}
	lb := u.newLabeler(r)
	n := lb.nameReader()
	for _, s := range all {
		if s.Active() {
			d.On = append(d.On, u.switchView(r, n, lb, s))
		} else {
			d.Lifted = append(d.Lifted, u.switchView(r, n, lb, s))
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
	d.Labels = switchWords
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
	d := &switchesData{form: form{Values: map[string]string{}, Labels: switchWords}, Scope: string(contracts.SwitchListing)}
	if !d.absorb(err, func(string) string { return "" }) {
		return err
	}
	r.c.Status(fiber.StatusUnprocessableEntity)
	return u.switchesPage(r, d)
}

// activeSwitches are the switches of one scope on that the visitor sees,
// by target (none without the service), their SetBy in the page's words
// (actorWords).
func (u *UI) activeSwitches(r *req, scope contracts.SwitchScope) (map[string]*contracts.Switch, error) {
	if u.d.Switches == nil || !r.signedIn {
		return nil, nil
	}
	on, err := u.d.Switches.List(r.ctx, r.actor, true)
	if err != nil {
		return nil, err
	}
	out := map[string]*contracts.Switch{}
	n := u.d.Accounts.Names(r.actor)
	for i := range on {
		if on[i].Scope == scope {
			on[i].SetBy = actorWords(r, n, on[i].SetBy)
			out[on[i].TargetID] = &on[i]
		}
	}
	return out, nil
}
