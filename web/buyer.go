package web

import (
	"errors"
	"html/template"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/metering"
)

// subView is one subscription on the buyer's page.
type subView struct {
	C       contracts.Contract
	Listing string
	// Gone is the status of a listing that left the catalog ("suspended",
	// "retired"), whose page the buyer can no longer open.
	Gone     listings.Status
	Endpoint string
	CardURL  string
	Spent    template.HTML // to the cent, the exact amount on hover
	Budget   string
	Percent  int64 // of the budget spent, 0..100 for the progress bar
	Over     bool
	Snippet  string
	// NewPlan is the listing's public plan when the contract is on another
	// one and may change to it (nil otherwise); PeriodEnd the end of the
	// month, when a cancellation at the period's end takes effect.
	NewPlan   *listings.Plan
	NewFee    string
	PeriodEnd time.Time
	// NoChange, with NewPlan, says why the change cannot be made now (the
	// server's own rule, contracts.PlanChangeRefused): the button is shown
	// disabled with it.
	NoChange string
	// Candidates are the listings the subscription may fall back to (those
	// sharing a skill tag first), each with its place among the chosen.
	Candidates []contracts.FallbackCandidate
	// Fallbacks are the chosen candidates' names, in order; FallbackCalls
	// the calls made to this listing this month that a fallback served.
	Fallbacks     []string
	FallbackCalls int64
}

type buyerData struct {
	Subs  []subView
	Month string
	Total template.HTML // the month's usage so far, to the cent
	Keys  bool
	// Deliveries are the push notifications that need attention: failed
	// ones (with a retry button) and ones still being retried.
	Deliveries []deliveryView
	CanRetry   bool
	// Offers are the private offers made to the org that are still open.
	Offers []offerView
	OrgID  string
	// Alerts are this month's spend alerts, newest first.
	Alerts []alertView
}

// deliveryView is one push delivery on the buyer's page.
type deliveryView struct {
	contracts.Delivery
	Listing string
}

// snippet is what a buyer hands their orchestrator.
func snippet(name, endpoint, cardURL string) string {
	var b strings.Builder
	b.WriteString("# " + name + " through AgentMarket: the meter checks your key,\n")
	b.WriteString("# meters each call and forwards it to the agent.\n")
	b.WriteString("export AGENTMARKET_KEY=amk_...   # an API key from the API keys page\n")
	b.WriteString("AGENT_URL=" + endpoint + "\n")
	b.WriteString("AGENT_CARD_URL=" + cardURL + "\n\n")
	b.WriteString("# a2a CLI (github.com/a2aproject/a2a-go)\n")
	b.WriteString("a2a send \"$AGENT_URL\" --auth \"Bearer $AGENTMARKET_KEY\" \"Hello\"\n\n")
	b.WriteString("# Any A2A client: JSON-RPC to the endpoint with the key. Each message needs a new\n")
	b.WriteString("# messageId: the meter answers a repeated one (a retry) with the first send's task.\n")
	b.WriteString("curl -s \"$AGENT_URL\" -H \"Authorization: Bearer $AGENTMARKET_KEY\" \\\n")
	b.WriteString("  -H 'Content-Type: application/json' \\\n")
	b.WriteString(`  -d '{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-'$RANDOM$RANDOM'","role":"user","parts":[{"kind":"text","text":"Hello"}]}}}'` + "\n")
	return b.String()
}

// monthToDate is the current calendar month up to now.
func (u *UI) monthToDate() periodForm {
	now := u.d.Clock.Now().UTC()
	m := billing.MonthOf(now)
	return periodForm{Start: m.Start, End: now.Add(time.Millisecond)}
}

// buyer lists the org's subscriptions with their endpoints, what to hand
// an orchestrator, and this month's spend against each budget.
func (u *UI) buyer(r *req) error {
	if err := u.require(r, contracts.ObjSubscriptions, contracts.ActRead); err != nil {
		return err
	}
	if u.d.Subscriptions == nil {
		return agentmarket.Errorf(agentmarket.Unavailable, "no_meter", "this marketplace takes no subscriptions")
	}
	cs, err := u.d.Subscriptions.List(r.ctx, r.actor)
	if err != nil {
		return err
	}
	d := &buyerData{Month: u.d.Clock.Now().UTC().Format("January 2006"), Keys: u.can(r, contracts.ObjAPIKeys, contracts.ActRead)}
	spent, fellBack := map[string]int64{}, map[string]int64{}
	if u.d.Usage != nil {
		res, err := u.totals(r, metering.ScopeBuyer, u.monthToDate(), "", metering.ByListing, metering.ByTag(metering.FallbackTag))
		if err != nil {
			return err
		}
		for _, t := range res[0] {
			spent[t.Key] = t.CostMicros
		}
		for _, t := range res[1] {
			if t.Key != "" {
				fellBack[t.Key] = t.Calls
			}
		}
	}
	lb := u.newLabeler(r)
	var total int64
	for _, c := range cs {
		l := lb.listing(c.ListingID)
		v := subView{C: c, Listing: l.name, Gone: l.gone, Endpoint: u.meterEndpoint(c.ListingID)}
		v.CardURL = v.Endpoint + "/.well-known/agent-card.json"
		cur := l.currency
		if cur == "" {
			cur = "usd"
		}
		s := spent[c.ListingID]
		if c.Status == contracts.ContractCanceled {
			s = 0 // the listing's spend belongs to the open contract, if any
		}
		total = agentmarket.AddSat(total, s)
		v.Spent = moneyHTML(s, cur)
		if b := c.MonthlyBudgetMicros; b != nil {
			v.Budget = formatMicros(*b, cur)
			switch {
			case *b == 0:
				v.Percent, v.Over = 100, s > 0
			case s >= *b:
				v.Percent, v.Over = 100, true
			default: // s < *b ≤ agentmarket.MaxBudgetMicros: s*100 fits
				v.Percent = s * 100 / *b
			}
		}
		v.Snippet = snippet(l.name, v.Endpoint, v.CardURL)
		if (c.Status == contracts.ContractActive || c.Status == contracts.ContractPastDue) && l.plan.Version != 0 && l.plan.Version != c.PlanVersion {
			p := l.plan
			v.NewPlan, v.NewFee = &p, formatMicros(p.MonthlyFeeMicros, p.Currency)
			if err := u.d.Subscriptions.PlanChangeRefused(r.ctx, &c, p.Version); err != nil {
				if k := agentmarket.KindOf(err); k != agentmarket.Conflict && k != agentmarket.Invalid {
					return err
				}
				v.NoChange = planChangeWords(err)
			}
		}
		v.PeriodEnd = billing.MonthOf(u.d.Clock.Now()).End
		v.FallbackCalls = fellBack[c.ListingID]
		if c.Status != contracts.ContractCanceled {
			if v.Candidates, err = u.d.Subscriptions.FallbackCandidates(r.ctx, r.actor, c.ID); err != nil {
				return err
			}
			for _, id := range c.Fallbacks {
				for _, fc := range v.Candidates {
					if fc.ListingID == id {
						v.Fallbacks = append(v.Fallbacks, fc.Name)
					}
				}
			}
		}
		d.Subs = append(d.Subs, v)
	}
	cur, _ := lb.currency()
	d.Total = moneyHTML(total, cur)
	d.OrgID = r.actor.OrgID
	if d.Alerts, err = u.monthAlerts(r); err != nil {
		return err
	}
	if u.d.Offers != nil {
		list, err := u.d.Offers.List(r.ctx, r.actor, false, "")
		if err != nil {
			return err
		}
		for _, o := range u.offerViews(r, list) {
			if o.Status != "open" {
				continue
			}
			// Accepting an offer on a listing the org subscribes to changes
			// that subscription's plan: the same rule says if it can now.
			for i := range cs {
				c := &cs[i]
				if c.ListingID != o.ListingID || c.Status == contracts.ContractCanceled {
					continue
				}
				if err := u.d.Subscriptions.PlanChangeRefused(r.ctx, c, o.Plan.Version); err != nil {
					if k := agentmarket.KindOf(err); k != agentmarket.Conflict && k != agentmarket.Invalid {
						return err
					}
					o.NoAccept = planChangeWords(err)
				}
			}
			d.Offers = append(d.Offers, o)
		}
	}
	if u.d.Tasks != nil {
		d.CanRetry = u.can(r, contracts.ObjSubscriptions, contracts.ActWrite)
		for _, st := range []contracts.DeliveryStatus{contracts.DeliveryFailed, contracts.DeliveryPending} {
			ds, err := u.d.Tasks.Deliveries(r.ctx, r.actor, contracts.DeliveryQuery{Status: st, Limit: 20})
			if err != nil {
				return err
			}
			for _, x := range ds {
				if st == contracts.DeliveryPending && x.Attempts == 0 {
					continue // on its way: nothing to look at
				}
				name := lb.listing(x.ListingID).name
				if x.ListingID == "" { // the org's alert webhook
					name = "Spend alerts"
				}
				d.Deliveries = append(d.Deliveries, deliveryView{Delivery: x, Listing: name})
			}
		}
	}
	return u.render(r, "buyer", "Subscriptions", d)
}

// taskView is one of the org's tasks as the console shows it.
type taskView struct {
	Rec *contracts.TaskRecord
	// Status is lost, ended, stalled, paused or running; Since when.
	Status string
	Since  time.Time
}

// task shows one of the org's tasks: where it is in its life (running,
// paused, stalled, ended, or lost by its agent) and what happened to it.
func (u *UI) task(r *req) error {
	if err := u.require(r, contracts.ObjSubscriptions, contracts.ActRead); err != nil {
		return err
	}
	if u.d.Tasks == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "task_not_found", "no such task")
	}
	rec, err := u.d.Tasks.Task(r.ctx, r.actor, strings.Clone(r.c.Params("listing")), strings.Clone(r.c.Params("task")))
	if err != nil {
		return err
	}
	v := taskView{Rec: rec, Status: "running", Since: rec.CreatedAt}
	switch {
	case rec.EndedAt != nil:
		v.Status, v.Since = "ended", *rec.EndedAt
		for _, e := range rec.Events {
			if e.Kind == contracts.TaskLost {
				v.Status = "lost"
			}
		}
	case rec.StalledSince != nil:
		v.Status, v.Since = "stalled", *rec.StalledSince
	case rec.PausedSince != nil:
		v.Status, v.Since = "paused", *rec.PausedSince
	}
	return u.render(r, "task", "Task "+rec.TaskID, v)
}

// retryDelivery sends a failed push notification again.
func (u *UI) retryDelivery(r *req) error {
	if err := u.require(r, contracts.ObjSubscriptions, contracts.ActWrite); err != nil {
		return err
	}
	if u.d.Tasks == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "delivery_not_found", "no such delivery")
	}
	if err := u.d.Tasks.RetryDelivery(r.ctx, r.actor, strings.Clone(r.c.Params("id"))); err != nil {
		return err
	}
	return redirect(r, "/buyer?notice=retried#deliveries")
}

// changePlan switches a subscription to the listing's current plan.
func (u *UI) changePlan(r *req) error {
	if err := u.require(r, contracts.ObjSubscriptions, contracts.ActWrite); err != nil {
		return err
	}
	v, err := strconv.Atoi(r.c.FormValue("plan_version"))
	if err != nil {
		return agentmarket.Errorf(agentmarket.Invalid, "invalid_plan_change", "the plan version is not a number")
	}
	c, err := u.d.Subscriptions.ChangePlan(r.ctx, r.actor, strings.Clone(r.c.Params("id")), contracts.ChangePlanInput{PlanVersion: v})
	if err != nil {
		return err
	}
	return redirect(r, "/buyer?notice=planchanged#sub-"+c.ID)
}

// cancelAtPeriodEnd schedules (end=1) or takes back (end=0) the end of a
// subscription at the end of the month.
func (u *UI) cancelAtPeriodEnd(r *req) error {
	if err := u.require(r, contracts.ObjSubscriptions, contracts.ActWrite); err != nil {
		return err
	}
	end := r.c.FormValue("end") == "1"
	c, err := u.d.Subscriptions.CancelAtPeriodEnd(r.ctx, r.actor, strings.Clone(r.c.Params("id")), end)
	if err != nil {
		return err
	}
	notice := "kept"
	if end {
		notice = "ending"
	}
	return redirect(r, "/buyer?notice="+notice+"#sub-"+c.ID)
}

// setFallbacks replaces a subscription's fallback agents from the form:
// each candidate's place ("pos_<listing id>", 0 or empty: not a fallback),
// ties in the order shown.
func (u *UI) setFallbacks(r *req) error {
	if err := u.require(r, contracts.ObjSubscriptions, contracts.ActWrite); err != nil {
		return err
	}
	id := strings.Clone(r.c.Params("id"))
	cands, err := u.d.Subscriptions.FallbackCandidates(r.ctx, r.actor, id)
	if err != nil {
		return err
	}
	type chosen struct {
		listing string
		pos     int
	}
	var picks []chosen
	for _, c := range cands {
		v := strings.TrimSpace(r.c.FormValue("pos_" + c.ListingID))
		if v == "" || v == "0" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return agentmarket.Errorf(agentmarket.Invalid, "invalid_fallbacks", "the place of %s must be a whole number (0: not a fallback)", c.Name)
		}
		picks = append(picks, chosen{c.ListingID, n})
	}
	slices.SortStableFunc(picks, func(a, b chosen) int { return a.pos - b.pos })
	ids := make([]string, len(picks))
	for i, p := range picks {
		ids[i] = p.listing
	}
	if _, err := u.d.Subscriptions.SetFallbacks(r.ctx, r.actor, id, ids); err != nil {
		return err
	}
	return redirect(r, "/buyer?notice=fallbacks#sub-"+id)
}

// trialChoice records whether a trialing subscription stops with its
// trial or converts to paid.
func (u *UI) trialChoice(r *req) error {
	if err := u.require(r, contracts.ObjSubscriptions, contracts.ActWrite); err != nil {
		return err
	}
	stop := r.c.FormValue("cancel_at_trial_end") == "1"
	c, err := u.d.Subscriptions.SetCancelAtTrialEnd(r.ctx, r.actor, strings.Clone(r.c.Params("id")), stop)
	if err != nil {
		return err
	}
	notice := "trialgo"
	if stop {
		notice = "trialstop"
	}
	return redirect(r, "/buyer?notice="+notice+"#sub-"+c.ID)
}

func (u *UI) cancelSubscription(r *req) error {
	if err := u.require(r, contracts.ObjSubscriptions, contracts.ActWrite); err != nil {
		return err
	}
	if _, err := u.d.Subscriptions.Cancel(r.ctx, r.actor, strings.Clone(r.c.Params("id"))); err != nil {
		return err
	}
	return redirect(r, "/buyer?notice=canceled")
}

type keyView struct {
	contracts.APIKey
	Spent     template.HTML // to the cent, the exact amount on hover
	Budget    string
	CanRevoke bool
	// Switch is the kill switch on for the key (killswitches.go), nil when none.
	Switch *contracts.Switch
}

type keysData struct {
	form
	Keys     []keyView
	NewKey   string
	NewName  string
	Roles    []agentmarket.Role
	CanWrite bool
	// OrgBudget is the org's monthly budget over all its keys and
	// subscriptions ("none" when it has none); CanBudget whether the
	// visitor may set it (the org's admins).
	OrgBudget string
	CanBudget bool
	// OrgRates says the org's rate limits ("none" when it has none);
	// CanRates whether the visitor may set them (the org's admins).
	OrgRates string
	CanRates bool
}

// keys lists the org's API keys with this month's spend against budget.
func (u *UI) keys(r *req) error {
	return u.keysPage(r, &keysData{form: form{Values: map[string]string{"role": string(agentmarket.RoleBuyer)}}})
}

func (u *UI) keysPage(r *req, d *keysData) error {
	if err := u.require(r, contracts.ObjAPIKeys, contracts.ActRead); err != nil {
		return err
	}
	d.Roles, d.CanWrite = contracts.MintableRoles(r.actor), u.can(r, contracts.ObjAPIKeys, contracts.ActWrite)
	d.CanBudget = u.can(r, contracts.ObjOrgBudget, contracts.ActWrite)
	ks, err := u.d.Accounts.ListKeys(r.ctx, r.actor)
	if err != nil {
		return err
	}
	org, err := u.d.Accounts.Org(r.ctx, r.actor)
	if err != nil {
		return err
	}
	spent := map[string]int64{}
	cur := "usd"
	if u.d.Usage != nil && u.can(r, contracts.ObjUsage, contracts.ActRead) {
		lb := u.newLabeler(r)
		tables, err := u.usageTables(r, lb, metering.ScopeBuyer, u.monthToDate(), "", metering.ByListing, metering.ByAPIKey)
		if err != nil {
			return err
		}
		for _, row := range tables[1].Rows {
			spent[row.Key] = row.CostMicros
		}
		cur = tables[1].Currency
	}
	switched, err := u.activeSwitches(r, contracts.SwitchAPIKey)
	if err != nil {
		return err
	}
	for i := len(ks) - 1; i >= 0; i-- { // newest first
		k := keyView{APIKey: ks[i], Spent: moneyHTML(spent[ks[i].ID], cur), Budget: "none",
			CanRevoke: d.CanWrite && contracts.MayRevoke(r.actor, ks[i].ID), Switch: switched[ks[i].ID]}
		if b := ks[i].MonthlyBudgetMicros; b != nil {
			k.Budget = formatMicros(*b, cur)
		}
		d.Keys = append(d.Keys, k)
	}
	d.OrgBudget = "none"
	if b := org.MonthlyBudgetMicros; b != nil {
		d.OrgBudget = formatMicros(*b, cur)
		if _, ok := d.Values["org_budget"]; !ok {
			d.Values["org_budget"] = microsInput(*b)
		}
	}
	d.CanRates = u.can(r, contracts.ObjRateLimits, contracts.ActWrite)
	d.OrgRates = describeRates(org.RateLimits)
	for i, f := range rateFields {
		if _, ok := d.Values[f]; !ok {
			if v := rateValues(org.RateLimits)[i]; v > 0 {
				d.Values[f] = strconv.FormatInt(v, 10)
			}
		}
	}
	return u.render(r, "keys", "API keys", d)
}

// rateFields are the rate limits' form fields (and API fields), in the
// order of rateValues.
var rateFields = [4]string{"requests_per_second", "requests_per_minute", "tokens_per_minute", "max_in_flight"}

func rateValues(l agentmarket.RateLimits) [4]int64 {
	return [4]int64{l.RequestsPerSecond, l.RequestsPerMinute, l.TokensPerMinute, l.MaxInFlight}
}

// describeRates says rate limits in words ("none" for none).
func describeRates(l agentmarket.RateLimits) string {
	var parts []string
	for i, unit := range [4]string{"requests a second", "requests a minute", "tokens a minute", "calls in flight"} {
		if v := rateValues(l)[i]; v > 0 {
			parts = append(parts, strconv.FormatInt(v, 10)+" "+unit)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// setOrgRates sets the org's rate limits over all its keys and
// subscriptions (empty fields: none), which every meter applies within
// seconds (docs/limits.md).
func (u *UI) setOrgRates(r *req) error {
	if err := u.require(r, contracts.ObjRateLimits, contracts.ActWrite); err != nil {
		return err
	}
	d := &keysData{form: form{Values: map[string]string{"role": string(agentmarket.RoleBuyer)}}}
	var v [4]int64
	for i, f := range rateFields {
		d.Values[f] = strings.TrimSpace(r.c.FormValue(f))
		if d.Values[f] == "" {
			continue
		}
		n, err := strconv.ParseInt(d.Values[f], 10, 64)
		if err != nil || n < 0 {
			d.add(f, "Enter a whole number of 0 or more, or leave it empty for no limit.")
		}
		v[i] = n
	}
	if len(d.Errors) == 0 {
		_, err := u.d.Accounts.SetOrgRateLimits(r.ctx, r.actor, agentmarket.RateLimits{RequestsPerSecond: v[0], RequestsPerMinute: v[1], TokensPerMinute: v[2], MaxInFlight: v[3]})
		if err == nil {
			return redirect(r, "/keys?notice=orgrates")
		}
		if !d.absorb(err, nil) {
			return err
		}
	}
	r.c.Status(fiber.StatusUnprocessableEntity)
	return u.keysPage(r, d)
}

// setOrgBudget sets the org's monthly budget over all its keys and
// subscriptions (empty: none), which every meter holds like a key's.
func (u *UI) setOrgBudget(r *req) error {
	if err := u.require(r, contracts.ObjOrgBudget, contracts.ActWrite); err != nil {
		return err
	}
	d := &keysData{form: form{Values: map[string]string{"role": string(agentmarket.RoleBuyer), "org_budget": r.c.FormValue("org_budget")}}}
	in := contracts.OrgBudgetInput{MonthlyBudgetMicros: budgetInput(&d.form, "org_budget", "The organisation's monthly budget")}
	if len(d.Errors) == 0 {
		_, err := u.d.Accounts.SetOrgBudget(r.ctx, r.actor, in)
		if err == nil {
			return redirect(r, "/keys?notice=orgbudget")
		}
		if !d.absorb(err, func(f string) string {
			if f == "monthly_budget_micros" {
				return "org_budget"
			}
			return f
		}) {
			return err
		}
	}
	r.c.Status(fiber.StatusUnprocessableEntity)
	return u.keysPage(r, d)
}

// createKey makes a key and shows it, once, on the page that answers.
func (u *UI) createKey(r *req) error {
	if err := u.require(r, contracts.ObjAPIKeys, contracts.ActWrite); err != nil {
		return err
	}
	d := &keysData{form: form{Values: map[string]string{"name": r.c.FormValue("name"), "role": r.c.FormValue("role"), "budget": r.c.FormValue("budget"),
		"tags": r.c.FormValue("tags")}}}
	in := contracts.KeyInput{Name: d.V("name"), Role: agentmarket.Role(d.V("role")), Tags: parseTagList(d.V("tags")),
		MonthlyBudgetMicros: budgetInput(&d.form, "budget", "The monthly budget")}
	if len(d.Errors) == 0 {
		k, secret, err := u.d.Accounts.CreateKey(r.ctx, r.actor, in)
		if err == nil {
			r.c.Status(fiber.StatusCreated)
			kd := &keysData{form: form{Values: map[string]string{"role": string(k.Role)}}, NewKey: secret, NewName: k.Name}
			return u.keysPage(r, kd)
		}
		if !d.absorb(err, func(f string) string {
			if f == "monthly_budget_micros" {
				return "budget"
			}
			if strings.HasPrefix(f, "tags") {
				return "tags"
			}
			return f
		}) {
			return err
		}
	}
	r.c.Status(fiber.StatusUnprocessableEntity)
	return u.keysPage(r, d)
}

// budgetInput reads the optional monthly budget typed in currency units
// into f's field: nil when empty; when it is no amount, the field says so,
// named as what.
func budgetInput(f *form, field, what string) *int64 {
	v := strings.TrimSpace(f.V(field))
	if v == "" {
		return nil
	}
	n, msg := parseAmount(v)
	if msg != "" {
		f.add(field, what+" "+msg+".")
	}
	return &n
}

// parseTagList reads tags typed as "team=payments, project=kyc" (a tag
// without "=" has an empty value, which the rules then refuse).
func parseTagList(s string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out
}

func (u *UI) revokeKey(r *req) error {
	if err := u.require(r, contracts.ObjAPIKeys, contracts.ActWrite); err != nil {
		return err
	}
	if _, err := u.d.Accounts.RevokeKey(r.ctx, r.actor, strings.Clone(r.c.Params("id"))); err != nil {
		return err
	}
	return redirect(r, "/keys?notice=revoked")
}

// planChangeWords is why a plan change is refused, in the page's words.
func planChangeWords(err error) string {
	var ae *agentmarket.Error
	if !errors.As(err, &ae) {
		return "The plan cannot change now."
	}
	switch ae.Code {
	case "plan_changed_this_period":
		msg := ae.Message
		if i := strings.Index(msg, "the next from "); i >= 0 {
			return "One plan change a month: this subscription changed plan this month already; the next change can be made from " + strings.TrimPrefix(msg[i:], "the next from ") + "."
		}
		return "One plan change a month: this subscription changed plan this month already."
	case "plan_change_refused":
		return "Only an active subscription changes plan (a free trial ends first)."
	case "invalid_plan_change":
		return "The new plan is in another currency than this subscription: subscribe to it anew instead."
	}
	return "The plan cannot change now."
}
