package web

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
)

// listingCard is a listing as a search result shows it.
type listingCard struct {
	ID, Name, Description, Seller, Version string
	SellerID                               string
	Status                                 listings.Status
	Health                                 listings.Health
	// Agent is what the active health checks last said of the agent.
	Agent                                 listings.AgentHealth
	Skills, Tags, InputModes, OutputModes []string
	Streaming, Push                       bool
	Fee                                   string
	Rates                                 []string
	// Verified is what the meter measured (nil: too few tasks or buyer orgs).
	Verified *verifiedView
	// SignedBy is who vouches for the card when its signature verified
	// ("" otherwise).
	SignedBy string
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// rates lists a plan's usage prices that are not zero.
func rates(p listings.Plan) []string {
	var out []string
	add := func(v int64, what string) {
		if v != 0 {
			out = append(out, formatMicros(v, p.Currency)+" "+what)
		}
	}
	add(p.InputTokensPerMillionMicros, "per million input tokens")
	add(p.OutputTokensPerMillionMicros, "per million output tokens")
	add(p.ComputePerHourMicros, "per compute hour")
	add(p.PerTaskMicros, "per task")
	return out
}

func (u *UI) card(r *req, l *listings.Listing) listingCard {
	health, _ := l.HealthShown()
	c := listingCard{ID: l.ID, Name: l.ID, Seller: u.orgName(r.ctx, l.SellerOrgID), SellerID: l.SellerOrgID, Status: l.Status, Health: health, Agent: l.AgentHealth(),
		Fee: formatMicros(l.Plan.MonthlyFeeMicros, l.Plan.Currency), Rates: rates(l.Plan), Verified: u.verified(r, l.ID)}
	if l.CardSignature.Status == listings.SignatureVerified {
		c.SignedBy = l.CardSignature.Signer
	}
	if k := l.Card; k != nil {
		c.Name, c.Description, c.Version = k.Name, k.Description, k.Version
		for _, s := range k.Skills {
			c.Skills = append(c.Skills, s.Name)
		}
		c.Skills = firstN(c.Skills, 4)
		c.Tags = firstN(k.Tags(), 8)
		c.InputModes, c.OutputModes = firstN(k.InputModes(), 4), firstN(k.OutputModes(), 4)
		c.Streaming, c.Push = k.Capabilities.Streaming, k.Capabilities.PushNotifications
	}
	return c
}

type catalogData struct {
	form
	Items      []listingCard
	Total      int
	Page       int
	Pages      int
	Prev, Next string
	Sorts      []sortOption
	Filtered   bool
	Seller     string // the seller filtered on, by name
}

type sortOption struct{ Value, Label string }

var sortLabels = []sortOption{{"relevance", "Best match"}, {"name", "Name, A to Z"}, {"-name", "Name, Z to A"}, {"price", "Monthly fee, lowest first"},
	{"-price", "Monthly fee, highest first"}, {"-created", "Newest first"}, {"created", "Oldest first"}}

// catalogParams are the search form's inputs, named as the API's query
// parameters except for the fee ceiling, typed in currency units.
var catalogParams = []string{"q", "skill", "tag", "input_mode", "output_mode", "streaming", "push", "max_fee", "currency", "seller", "sort"}

// catalog is the search page, public: signed-out visitors see published
// listings.
func (u *UI) catalog(r *req) error {
	d := &catalogData{form: form{Values: map[string]string{}}, Sorts: sortLabels}
	for _, p := range catalogParams {
		d.Values[p] = strings.TrimSpace(r.c.Query(p))
		d.Filtered = d.Filtered || (d.Values[p] != "" && p != "sort")
	}
	q := listings.Query{Text: d.V("q"), Skill: d.V("skill"), Tag: d.V("tag"), InputMode: d.V("input_mode"), OutputMode: d.V("output_mode"),
		Currency: strings.ToLower(d.V("currency")), SellerOrgID: d.V("seller"), Sort: d.V("sort")}
	if q.SellerOrgID != "" {
		d.Seller = u.orgName(r.ctx, q.SellerOrgID)
	}
	tri := func(name string) *bool {
		switch d.V(name) {
		case "":
			return nil
		case "true", "yes":
			b := true
			return &b
		case "false", "no":
			b := false
			return &b
		}
		d.add(name, "choose any, yes or no")
		return nil
	}
	q.Streaming, q.Push = tri("streaming"), tri("push")
	if v := d.V("max_fee"); v != "" {
		n, msg := parseAmount(v)
		if msg != "" {
			d.add("max_fee", "The monthly fee ceiling "+msg+".")
		} else {
			q.MaxMonthlyFeeMicros = &n
		}
	}
	if p := r.c.Query("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			d.add("", "The page must be a whole number from 1.")
		}
		q.Page = n
	}
	if len(d.Errors) == 0 {
		actor := r.actor // zero for visitors: published listings only
		page, err := u.d.Listings.Search(r.ctx, actor, q)
		if err != nil {
			if !d.absorb(err, nil) {
				return err
			}
		} else {
			d.Total, d.Page = page.Total, page.Page
			d.Pages = (page.Total + page.PageSize - 1) / page.PageSize
			for _, l := range page.Items {
				d.Items = append(d.Items, u.card(r, l))
			}
			link := func(n int) string {
				v := url.Values{}
				for _, p := range catalogParams {
					if d.V(p) != "" {
						v.Set(p, d.V(p))
					}
				}
				v.Set("page", strconv.Itoa(n))
				return "/?" + v.Encode()
			}
			if d.Page > 1 {
				d.Prev = link(d.Page - 1)
			}
			if d.Page < d.Pages {
				d.Next = link(d.Page + 1)
			}
		}
	}
	if len(d.Errors) > 0 {
		r.c.Status(fiber.StatusUnprocessableEntity)
	}
	return u.render(r, "catalog", "Catalog", d)
}

// priceRow is one line of a price plan as the listing page shows it.
type priceRow struct{ Label, Value string }

func planRows(p listings.Plan) []priceRow {
	c := p.Currency
	rows := []priceRow{
		{"Monthly fee", formatMicros(p.MonthlyFeeMicros, c) + " per month"},
		{"Input tokens", formatMicros(p.InputTokensPerMillionMicros, c) + " per million"},
		{"Output tokens", formatMicros(p.OutputTokensPerMillionMicros, c) + " per million"},
		{"Compute", formatMicros(p.ComputePerHourMicros, c) + " per hour, billed per millisecond"},
		{"Tasks", formatMicros(p.PerTaskMicros, c) + " per task"},
	}
	var inc []string
	if p.IncludedInputTokens > 0 {
		inc = append(inc, formatCount(p.IncludedInputTokens)+" input tokens")
	}
	if p.IncludedOutputTokens > 0 {
		inc = append(inc, formatCount(p.IncludedOutputTokens)+" output tokens")
	}
	if p.IncludedComputeMs > 0 {
		inc = append(inc, formatDuration(p.IncludedComputeMs)+" of compute")
	}
	if p.IncludedTasks > 0 {
		inc = append(inc, formatCount(p.IncludedTasks)+" tasks")
	}
	if len(inc) > 0 {
		rows = append(rows, priceRow{"Included each month", strings.Join(inc, ", ")})
	}
	if t := trialText(p); t != "" {
		rows = append(rows, priceRow{"Free trial", t})
	}
	// What a call holds of the buyer's budget while it runs (the
	// meter's reservation, docs/billing.md "Budgets").
	in, out, ms := p.CallCeiling()
	rows = append(rows, priceRow{"Most one call may use", formatCount(in) + " input tokens, " + formatCount(out) + " output tokens, " +
		formatDuration(ms) + " of compute (held from your budgets while it runs)"})
	return rows
}

// trialText describes a plan's free trial ("" when it has none).
func trialText(p listings.Plan) string {
	if !p.HasTrial() {
		return ""
	}
	t := formatCount(p.TrialDays) + " days"
	if p.TrialDays == 1 {
		t = "1 day"
	}
	var limits []string
	if p.TrialTokens > 0 {
		limits = append(limits, formatCount(p.TrialTokens)+" tokens")
	}
	if p.TrialCapMicros > 0 {
		limits = append(limits, formatMicros(p.TrialCapMicros, p.Currency)+" of usage")
	}
	if len(limits) > 0 {
		t += ", or until " + strings.Join(limits, " or ") + " are used"
	}
	return t
}

type listingData struct {
	form
	// Switch is the kill switch on for the listing, shown to its seller
	// and the operator; nil when none.
	Switch       *contracts.Switch
	L            *listings.Listing
	Card         listingCard
	Prices       []priceRow
	PlanVersion  int
	Currency     string
	Versions     []listings.CardVersion
	CardURL      string // the proxied card
	Endpoint     string
	Own          bool
	CanSubscribe bool
	Subscription *contracts.Contract
	SignedIn     bool
	// Trial describes the plan's free trial ("" when none); HadTrial says
	// the signed-in org had it already.
	Trial    string
	HadTrial bool
	// StatsMinOrgs and StatsMinTasks are the fewest buyer orgs and tasks
	// for verified stats to show (0: the marketplace shows none).
	StatsMinOrgs, StatsMinTasks int64
}

func (u *UI) meterEndpoint(listingID string) string {
	return strings.TrimRight(u.d.PublicMeterURL, "/") + "/a2a/" + listingID
}

// listing is a listing's page: its card, price plan, health and history.
func (u *UI) listing(r *req) error {
	return u.listingPage(r, r.c.Params("id"), &form{Values: map[string]string{}})
}

func (u *UI) listingPage(r *req, id string, f *form) error {
	l, err := u.d.Listings.Get(r.ctx, r.actor, id)
	if err != nil {
		return err
	}
	vs, err := u.d.Listings.Versions(r.ctx, r.actor, id)
	if err != nil {
		return err
	}
	d := &listingData{form: *f, L: l, Card: u.card(r, l), Prices: planRows(l.Plan), PlanVersion: l.Plan.Version, Currency: l.Plan.Currency,
		Versions: vs, Endpoint: u.meterEndpoint(l.ID), Own: r.signedIn && l.SellerOrgID == r.actor.OrgID, SignedIn: r.signedIn}
	d.CardURL = d.Endpoint + "/.well-known/agent-card.json"
	if d.Own || r.actor.Operator {
		on, err := u.activeSwitches(r, contracts.SwitchListing)
		if err != nil {
			return err
		}
		d.Switch = on[l.ID]
	}
	if u.d.Verified != nil {
		d.StatsMinOrgs, d.StatsMinTasks = u.d.Verified.Minimums()
	}
	if r.signedIn && u.d.Subscriptions != nil && u.can(r, contracts.ObjSubscriptions, contracts.ActWrite) {
		cs, err := u.d.Subscriptions.List(r.ctx, r.actor)
		if err != nil {
			return err
		}
		for i := range cs {
			if cs[i].ListingID == l.ID && cs[i].Status != contracts.ContractCanceled {
				d.Subscription = &cs[i]
			}
		}
		d.CanSubscribe = d.Subscription == nil && l.Status == listings.StatusPublished
		if d.Trial = trialText(l.Plan); d.Trial != "" {
			if d.HadTrial, err = u.d.Subscriptions.HadTrial(r.ctx, r.actor, l.ID); err != nil {
				return err
			}
		}
	} else {
		d.Trial = trialText(l.Plan)
	}
	return u.render(r, "listing", d.Card.Name, d)
}

// subscribe creates a contract for the listing and sends the buyer to
// their subscriptions.
func (u *UI) subscribe(r *req) error {
	if err := u.require(r, contracts.ObjSubscriptions, contracts.ActWrite); err != nil {
		return err
	}
	id := strings.Clone(r.c.Params("id"))
	f := &form{Values: map[string]string{"budget": r.c.FormValue("budget"), "cancel_at_trial_end": r.c.FormValue("cancel_at_trial_end")}}
	in := contracts.SubscribeInput{ListingID: id, CancelAtTrialEnd: f.V("cancel_at_trial_end") != ""}
	if v := strings.TrimSpace(f.V("budget")); v != "" {
		n, msg := parseAmount(v)
		if msg != "" {
			f.add("budget", "The monthly budget "+msg+".")
			r.c.Status(fiber.StatusUnprocessableEntity)
			return u.listingPage(r, id, f)
		}
		in.MonthlyBudgetMicros = &n
	}
	if u.d.Subscriptions == nil {
		return agentmarket.Errorf(agentmarket.Unavailable, "no_meter", "this marketplace has no meter, so it takes no subscriptions")
	}
	c, err := u.d.Subscriptions.Subscribe(r.ctx, r.actor, in)
	if err != nil {
		if f.absorb(err, func(field string) string {
			switch field {
			case "monthly_budget_micros":
				return "budget"
			case "cancel_at_trial_end":
				return field
			}
			return ""
		}) {
			r.c.Status(formErrorStatus(err))
			return u.listingPage(r, id, f)
		}
		return err
	}
	return redirect(r, "/buyer?notice=subscribed#sub-"+c.ID)
}

func formErrorStatus(err error) int {
	if agentmarket.KindOf(err) == agentmarket.Conflict {
		return fiber.StatusConflict
	}
	return fiber.StatusUnprocessableEntity
}
