package web

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/agentcard"
	"github.com/agentmarket/agentmarket/metering"
)

type statusAction struct {
	To    listings.Status
	Label string
}

type sellerRow struct {
	listingCard
	HealthDetail string
	CardURL      string
	Actions      []statusAction
}

type sellerData struct {
	Period    *periodForm
	Listings  []sellerRow
	Total     int
	Prev      string
	Next      string
	ByBuyer   usageTable
	ByListing usageTable
}

// sellerActions are the moves a seller may make from a status.
func sellerActions(s listings.Status) []statusAction {
	retire := statusAction{listings.StatusRetired, "Retire"}
	switch s {
	case listings.StatusDraft:
		return []statusAction{{listings.StatusPendingReview, "Submit for review"}, retire}
	case listings.StatusPendingReview:
		return []statusAction{{listings.StatusDraft, "Back to draft"}, retire}
	case listings.StatusPublished, listings.StatusSuspended:
		return []statusAction{retire}
	}
	return nil
}

var allStatuses = []listings.Status{listings.StatusDraft, listings.StatusPendingReview, listings.StatusPublished,
	listings.StatusSuspended, listings.StatusRetired}

// seller is the seller console: the org's listings in every state, and
// usage and revenue per buyer and per agent for a period.
func (u *UI) seller(r *req) error {
	if err := u.require(r, contracts.ObjListings, contracts.ActWrite); err != nil {
		return err
	}
	d := &sellerData{}
	pf := u.parsePeriod(r, "/seller")
	d.Period = &pf
	page, _ := strconv.Atoi(r.c.Query("page", "1"))
	res, err := u.d.Listings.Search(r.ctx, r.actor, listings.Query{SellerOrgID: r.actor.OrgID, Statuses: allStatuses, Sort: "-created", Page: max(page, 1)})
	if err != nil {
		return err
	}
	d.Total = res.Total
	for _, l := range res.Items {
		_, detail := l.HealthShown()
		d.Listings = append(d.Listings, sellerRow{listingCard: u.card(r, l), HealthDetail: detail, CardURL: l.CardURL, Actions: sellerActions(l.Status)})
	}
	if res.Page > 1 {
		d.Prev = "/seller?page=" + strconv.Itoa(res.Page-1)
	}
	if res.Page*res.PageSize < res.Total {
		d.Next = "/seller?page=" + strconv.Itoa(res.Page+1)
	}
	if u.d.Usage != nil && len(pf.Errors) == 0 && u.can(r, contracts.ObjUsage, contracts.ActRead) {
		lookup := u.newLabeler(r)
		tables, err := u.usageTables(r, lookup, metering.ScopeSeller, pf, "", metering.ByBuyer, metering.ByListing)
		if err != nil {
			return err
		}
		d.ByBuyer, d.ByListing = tables[0], tables[1]
	}
	return u.render(r, "seller", "Sell", d)
}

func (u *UI) sellerStatus(r *req) error {
	if err := u.require(r, contracts.ObjListings, contracts.ActWrite); err != nil {
		return err
	}
	st := listings.Status(r.c.FormValue("status"))
	_, err := u.d.Listings.Update(r.ctx, r.actor, strings.Clone(r.c.Params("id")), listings.UpdateInput{Status: &st})
	if err != nil {
		return err
	}
	return redirect(r, "/seller?notice=status")
}

func (u *UI) sellerRefresh(r *req) error {
	if err := u.require(r, contracts.ObjListings, contracts.ActWrite); err != nil {
		return err
	}
	id := strings.Clone(r.c.Params("id"))
	l, err := u.d.Listings.Refresh(r.ctx, r.actor, id)
	switch {
	case err == nil:
		return redirect(r, "/listings/"+id+"?notice=refreshed")
	case l == nil, agentmarket.KindOf(err) == agentmarket.Internal, errCode(err) == "not_refreshable":
		// Refused (another org's listing, none, a pasted card): the error
		// page says why, in the API's words.
		return err
	}
	// Fetched and failed: the listing is marked unhealthy, and its page
	// shows why.
	return redirect(r, "/listings/"+id+"?notice=refreshfailed")
}

// errCode is err's stable code, "" for an error that is not an
// *agentmarket.Error.
func errCode(err error) string {
	var ae *agentmarket.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// amountInput is an input of an amount, typed in currency units and sent
// to the catalog as micros.
type amountInput struct{ input, field, label, hint string }

// The listing form's inputs. Amounts are typed in currency units and sent
// to the catalog as micros; allowances are whole units.
var (
	amountInputs = []amountInput{
		{"monthly_fee", "monthly_fee_micros", "Monthly fee", "The flat fee per month, e.g. 19 or 19.99"},
		{"input_price", "input_tokens_per_million_micros", "Price per million input tokens", "e.g. 3 or 0.25"},
		{"output_price", "output_tokens_per_million_micros", "Price per million output tokens", "e.g. 15"},
		{"compute_price", "compute_per_hour_micros", "Price per compute hour", "Billed per millisecond"},
		{"task_price", "per_task_micros", "Price per task", "e.g. 0.002"},
	}
	allowanceInputs = []struct{ input, label string }{
		{"included_input_tokens", "Included input tokens per month"},
		{"included_output_tokens", "Included output tokens per month"},
		{"included_compute_ms", "Included compute per month (milliseconds)"},
		{"included_tasks", "Included tasks per month"},
	}
	// The per-call ceiling: what one call may use at most, reserved
	// against the buyers' budgets before the call is forwarded (empty: the
	// meter's defaults, listings.CallCeiling).
	ceilingInputs = []struct{ input, label string }{
		{"max_call_input_tokens", "Most input tokens one call may use"},
		{"max_call_output_tokens", "Most output tokens one call may use"},
		{"max_call_compute_ms", "Most compute one call may use (milliseconds)"},
	}
	// The free trial: its days and token allowance are whole numbers, its
	// cap an amount.
	trialCountInputs = []struct{ input, label, hint string }{
		{"trial_days", "Free trial (days)", "Each buyer's first subscription is free this long; empty for none"},
		{"trial_tokens", "Trial ends after this many tokens", "Input and output together; empty for no limit"},
	}
	trialCapInput = amountInput{"trial_cap", "trial_cap_micros", "Trial ends after usage worth",
		"List price of the trial's usage, e.g. 5"}
	// commitInput is a plan's minimum monthly commitment (private offers).
	commitInput = amountInput{"min_commit", "min_commit_micros", "Minimum per month",
		"A month that comes to less is charged the difference; empty for none"}
	// listingFieldInputs maps the catalog's field names to the form's.
	listingFieldInputs = map[string]string{
		"card_url":             "card_url",
		"card":                 "card",
		"pricing":              "currency",
		"pricing.currency":     "currency",
		"upstream_auth.header": "auth_header",
		"upstream_auth.value":  "auth_value",
		"refresh_seconds":      "refresh_seconds",
	}
)

func init() {
	for _, a := range amountInputs {
		listingFieldInputs["pricing."+a.field] = a.input
	}
	for _, a := range allowanceInputs {
		listingFieldInputs["pricing."+a.input] = a.input
	}
	for _, a := range ceilingInputs {
		listingFieldInputs["pricing."+a.input] = a.input
	}
	for _, a := range trialCountInputs {
		listingFieldInputs["pricing."+a.input] = a.input
	}
	listingFieldInputs["pricing."+trialCapInput.field] = trialCapInput.input
	listingFieldInputs["pricing."+commitInput.field] = commitInput.input
}

var listingFormNames = []string{"source", "card_url", "card", "currency", "auth_header", "auth_value", "refresh_seconds", "draft"}

type newListingData struct {
	form
	Amounts    []inputField
	Allowances []inputField
	Ceiling    []inputField
	Trial      []inputField
}

func (u *UI) listingFormData(f *form) *newListingData {
	d := &newListingData{form: *f}
	for _, a := range amountInputs {
		d.Amounts = append(d.Amounts, input(f, a.input, a.label, "text", "mode=decimal", "hint="+a.hint))
	}
	for _, a := range allowanceInputs {
		d.Allowances = append(d.Allowances, input(f, a.input, a.label, "text", "mode=numeric"))
	}
	for _, a := range ceilingInputs {
		d.Ceiling = append(d.Ceiling, input(f, a.input, a.label, "text", "mode=numeric"))
	}
	for _, a := range trialCountInputs {
		d.Trial = append(d.Trial, input(f, a.input, a.label, "text", "mode=numeric", "hint="+a.hint))
	}
	d.Trial = append(d.Trial, input(f, trialCapInput.input, trialCapInput.label, "text", "mode=decimal", "hint="+trialCapInput.hint))
	return d
}

func (u *UI) newListingForm(r *req) error {
	if err := u.require(r, contracts.ObjListings, contracts.ActWrite); err != nil {
		return err
	}
	f := &form{Values: map[string]string{"source": "url", "currency": "usd", "auth_header": "Authorization"}}
	return u.render(r, "newlisting", "List an agent", u.listingFormData(f))
}

// createListing lists an agent from the form. Every problem, whether
// found here (an amount that is not a number) or by the catalog (a card
// field, a negative price), is shown on the input it concerns.
func (u *UI) createListing(r *req) error {
	if err := u.require(r, contracts.ObjListings, contracts.ActWrite); err != nil {
		return err
	}
	f := &form{Values: map[string]string{}}
	for _, n := range listingFormNames {
		f.Values[n] = r.c.FormValue(n)
	}
	for _, a := range amountInputs {
		f.Values[a.input] = r.c.FormValue(a.input)
	}
	for _, a := range allowanceInputs {
		f.Values[a.input] = r.c.FormValue(a.input)
	}
	for _, a := range ceilingInputs {
		f.Values[a.input] = r.c.FormValue(a.input)
	}
	for _, a := range trialCountInputs {
		f.Values[a.input] = r.c.FormValue(a.input)
	}
	f.Values[trialCapInput.input] = r.c.FormValue(trialCapInput.input)
	in, ok := listingInput(f)
	if !ok {
		// Nothing is listed, but show what else the catalog would refuse
		// (the price plan, a pasted card) in the same answer.
		if _, err := listings.ParsePricing(in.Pricing); err != nil {
			absorbListing(f, err)
		}
		if len(in.Card) > 0 && json.Valid(in.Card) {
			if _, err := agentcard.Parse(in.Card); err != nil {
				absorbListing(f, cardFields(err))
			}
		}
	}
	if ok {
		l, err := u.d.Listings.Create(r.ctx, r.actor, in)
		if err == nil {
			return redirect(r, "/listings/"+l.ID+"?notice=listed")
		}
		if !absorbListing(f, err) {
			return err
		}
	}
	r.c.Status(fiber.StatusUnprocessableEntity)
	return u.render(r, "newlisting", "List an agent", u.listingFormData(f))
}

// absorbListing puts the catalog's field errors on the form's inputs.
// Errors inside the card (card.skills[0].id) go on the card's input (the
// pasted card, or the URL it was read from) and say which card field is
// wrong.
func absorbListing(f *form, err error) bool {
	var ae *agentmarket.Error
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.Kind {
	case agentmarket.Invalid, agentmarket.TooLarge, agentmarket.Conflict:
	default:
		return false
	}
	cardInput := "card_url"
	if f.V("source") == "paste" {
		cardInput = "card"
	}
	words := map[string]string{"card_url": "a card URL"}
	f.Message = inWords(ae.Message, words)
	for _, fe := range ae.Fields {
		name, msg := listingFieldInputs[fe.Field], inWords(pricingWords(fe, f.V("currency")), words)
		if sub, ok := strings.CutPrefix(fe.Field, "card."); ok {
			name = cardInput
			if !strings.Contains(msg, sub) {
				msg = "In the card, " + sub + ": " + msg
			}
		} else if fe.Field == "card" {
			name = cardInput
		}
		f.Errors = append(f.Errors, fieldMsg{Field: name, Message: msg})
	}
	if len(ae.Fields) == 0 {
		f.Errors = append(f.Errors, fieldMsg{Message: f.Message})
	}
	return true
}

// cardFields names a card parse error's fields as the catalog does
// ("card." + the card's own field).
func cardFields(err error) error {
	var ae *agentmarket.Error
	if !errors.As(err, &ae) {
		return err
	}
	out := *ae
	out.Fields = nil
	for _, fe := range ae.Fields {
		fe.Field = "card." + fe.Field
		out.Fields = append(out.Fields, fe)
	}
	return &out
}

// listingInput turns the form into the catalog's input, adding to f what
// cannot even be sent (text where a number belongs).
// formPricing reads the price plan inputs of a form (the listing form's,
// the private offer form's) into the API's pricing object; an input that
// is not a number is a form error.
func formPricing(f *form) map[string]any {
	pricing := map[string]any{"currency": strings.ToLower(strings.TrimSpace(f.V("currency")))}
	amounts := append(amountInputs[:len(amountInputs):len(amountInputs)], trialCapInput, commitInput)
	for _, a := range amounts {
		v := strings.TrimSpace(f.V(a.input))
		if v == "" {
			continue
		}
		n, msg := parseAmount(v)
		if msg != "" {
			f.add(a.input, a.label+" "+msg+".")
			continue
		}
		pricing[a.field] = n
	}
	counts := slices.Concat(allowanceInputs, ceilingInputs)
	for _, a := range trialCountInputs {
		counts = append(counts[:len(counts):len(counts)], struct{ input, label string }{a.input, a.label})
	}
	for _, a := range counts {
		v := strings.ReplaceAll(strings.TrimSpace(f.V(a.input)), ",", "")
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			f.add(a.input, a.label+" must be a whole number.")
			continue
		}
		pricing[a.input] = n
	}
	return pricing
}

func listingInput(f *form) (listings.CreateInput, bool) {
	var in listings.CreateInput
	switch f.V("source") {
	case "paste":
		if c := strings.TrimSpace(f.V("card")); c != "" {
			if !json.Valid([]byte(c)) {
				f.add("card", "The card is not valid JSON. Paste the whole agent card, from { to }.")
			}
			in.Card = json.RawMessage(c)
		}
	default:
		in.CardURL = strings.TrimSpace(f.V("card_url"))
	}
	in.Pricing, _ = json.Marshal(formPricing(f))
	if v := strings.TrimSpace(f.V("auth_value")); v != "" {
		h := strings.TrimSpace(f.V("auth_header"))
		if h == "" {
			h = "Authorization"
		}
		in.UpstreamAuth = &listings.UpstreamAuth{Header: h, Value: v}
	}
	if v := strings.TrimSpace(f.V("refresh_seconds")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			f.add("refresh_seconds", "The refresh interval must be a whole number of seconds.")
		} else {
			in.RefreshSeconds = &n
		}
	}
	in.Draft = f.V("draft") != ""
	f.Values["auth_value"] = "" // a secret is never sent back to the browser
	return in, len(f.Errors) == 0
}

// pricingWords is a catalog's pricing error in the form's words: the
// input's label for the API's field name (per_task_micros), and an amount
// bound in the currency's units rather than micros. Other errors keep
// their message.
func pricingWords(fe agentmarket.FieldError, currency string) string {
	k, ok := strings.CutPrefix(fe.Field, "pricing.")
	if !ok {
		return fe.Message
	}
	label, amount := "", false
	for _, a := range append(append([]amountInput{}, amountInputs...), trialCapInput, commitInput) {
		if a.field == k {
			label, amount = a.label, true
		}
	}
	for _, a := range slices.Concat(allowanceInputs, ceilingInputs) {
		if a.input == k {
			label = a.label
		}
	}
	for _, a := range trialCountInputs {
		if a.input == k {
			label = a.label
		}
	}
	if label == "" {
		return fe.Message
	}
	switch fe.Rule {
	case "non_negative":
		return label + " must not be negative."
	case "max":
		if i := strings.LastIndexByte(fe.Message, ' '); i >= 0 {
			if n, err := strconv.ParseInt(fe.Message[i+1:], 10, 64); err == nil {
				if amount {
					return label + " must be at most " + formatMicros(n, currency) + "."
				}
				return label + " must be at most " + strconv.FormatInt(n, 10) + "."
			}
		}
		return label + " is too large."
	case "integer", "type", "range":
		if amount {
			return label + " must be an amount like 19.99."
		}
		return label + " must be a whole number."
	case "requires_trial_days":
		return label + " limits a free trial: set the trial's days too."
	}
	return strings.ReplaceAll(fe.Message, k, label)
}
