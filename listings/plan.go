package listings

import (
	"bytes"
	"encoding/json"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket"
)

// Plan is one version of a listing's price plan: a flat monthly fee plus
// usage rates, all in integer micro-units of Currency (1 USD = 1,000,000
// micros), with an optional monthly allowance before usage is charged.
// A plan version never changes once stored: contracts freeze one.
type Plan struct {
	Version                      int
	Currency                     string
	MonthlyFeeMicros             int64
	InputTokensPerMillionMicros  int64
	OutputTokensPerMillionMicros int64
	ComputePerHourMicros         int64
	PerTaskMicros                int64
	IncludedInputTokens          int64
	IncludedOutputTokens         int64
	IncludedComputeMs            int64
	IncludedTasks                int64
	// The free trial a buyer's first subscription to the listing starts
	// in: TrialDays long (0: no trial), ending earlier once the trial's
	// input and output tokens together reach TrialTokens, or the list
	// price of its usage reaches TrialCapMicros (0: no such limit). Usage
	// in the trial is free; docs/billing.md has the rules.
	TrialDays      int64
	TrialTokens    int64
	TrialCapMicros int64
	// MinCommitMicros is a minimum the plan charges per month: a month
	// whose fee and usage come to less is charged the difference (prorated
	// by the second like the fee). 0: none.
	MinCommitMicros int64
	// The most a single call may use, which the meter reserves at the
	// plan's rates (with PerTaskMicros) before it forwards a call under a
	// budget; 0: the meter's default (CallCeiling). A call that uses more
	// is still answered and billed what it used: the ceiling bounds how
	// far a budget can be overshot, not the call.
	MaxCallInputTokens  int64
	MaxCallOutputTokens int64
	MaxCallComputeMs    int64
	// BuyerOrgID is the one org a private plan (a private offer's) is for;
	// empty for the listing's public plans. Other orgs never see it.
	BuyerOrgID string
	CreatedAt  time.Time
}

// The per-call ceiling of a plan that declares none: what the meter
// reserves for a call under a budget (docs/billing.md, "Budgets").
const (
	DefaultMaxCallInputTokens  = 8_000
	DefaultMaxCallOutputTokens = 4_000
	DefaultMaxCallComputeMs    = 60_000
)

// CallCeiling is the most a single call may use under the plan: its
// declared ceiling, each counter the default where it declares none.
func (p Plan) CallCeiling() (inputTokens, outputTokens, computeMs int64) {
	pick := func(v, def int64) int64 {
		if v > 0 {
			return v
		}
		return def
	}
	return pick(p.MaxCallInputTokens, DefaultMaxCallInputTokens), pick(p.MaxCallOutputTokens, DefaultMaxCallOutputTokens),
		pick(p.MaxCallComputeMs, DefaultMaxCallComputeMs)
}

// MaxTrialDays bounds a plan's trial: a year is no longer a trial.
const MaxTrialDays = 365

// HasTrial reports whether the plan offers a free trial.
func (p Plan) HasTrial() bool { return p.TrialDays > 0 }

// SamePrices reports whether two plans charge the same (ignoring version
// and time; a private plan never charges the same as a public one), so an
// unchanged PATCH makes no new plan version.
func (p Plan) SamePrices(q Plan) bool {
	p.Version, q.Version = 0, 0
	p.CreatedAt, q.CreatedAt = time.Time{}, time.Time{}
	return p == q
}

// pricingFields maps the API's pricing field names to the plan's fields.
func (p *Plan) pricingFields() map[string]*int64 {
	return map[string]*int64{
		"monthly_fee_micros":               &p.MonthlyFeeMicros,
		"input_tokens_per_million_micros":  &p.InputTokensPerMillionMicros,
		"output_tokens_per_million_micros": &p.OutputTokensPerMillionMicros,
		"compute_per_hour_micros":          &p.ComputePerHourMicros,
		"per_task_micros":                  &p.PerTaskMicros,
		"included_input_tokens":            &p.IncludedInputTokens,
		"included_output_tokens":           &p.IncludedOutputTokens,
		"included_compute_ms":              &p.IncludedComputeMs,
		"included_tasks":                   &p.IncludedTasks,
		"trial_days":                       &p.TrialDays,
		"trial_tokens":                     &p.TrialTokens,
		"trial_cap_micros":                 &p.TrialCapMicros,
		"min_commit_micros":                &p.MinCommitMicros,
		"max_call_input_tokens":            &p.MaxCallInputTokens,
		"max_call_output_tokens":           &p.MaxCallOutputTokens,
		"max_call_compute_ms":              &p.MaxCallComputeMs,
	}
}

// CheckAmounts reports every amount of the plan that is negative or above
// its bound (maxAmount), with field names under prefix (e.g. "plan."):
// the one check of a stored plan that billing and its providers rely on,
// and of every plan the API parses.
func (p Plan) CheckAmounts(fe *agentmarket.Fields, prefix string) {
	fields := p.pricingFields()
	for _, k := range pricingOrder {
		switch v, limit := *fields[k], maxAmount(k); {
		case v < 0:
			fe.Add(prefix+k, "non_negative", "%s must not be negative", k)
		case v > limit:
			fe.Add(prefix+k, "max", "%s must be at most %d", k, limit)
		}
	}
	for _, k := range []string{"trial_tokens", "trial_cap_micros"} {
		if *fields[k] > 0 && p.TrialDays == 0 {
			fe.Add(prefix+k, "requires_trial_days", "%s limits a trial: set trial_days too", k)
		}
	}
}

// maxAmount is the bound of a pricing field (see agentmarket.MaxUnitPriceMicros
// and docs/billing.md): allowances are quantities, the monthly fee and a
// monthly commitment have the fee's bound, a trial's cap is bounded like a
// budget, every other field is a usage price.
func maxAmount(field string) int64 {
	switch {
	case field == "monthly_fee_micros", field == "min_commit_micros":
		return agentmarket.MaxMonthlyFeeMicros
	case field == "trial_days":
		return MaxTrialDays
	case field == "trial_cap_micros":
		return agentmarket.MaxBudgetMicros
	case strings.HasPrefix(field, "included_"), strings.HasPrefix(field, "max_call_"), field == "trial_tokens":
		return agentmarket.MaxQuantity
	}
	return agentmarket.MaxUnitPriceMicros
}

// pricingOrder is the documented order of the pricing fields.
var pricingOrder = []string{
	"monthly_fee_micros", "input_tokens_per_million_micros", "output_tokens_per_million_micros",
	"compute_per_hour_micros", "per_task_micros", "included_input_tokens", "included_output_tokens",
	"included_compute_ms", "included_tasks", "trial_days", "trial_tokens", "trial_cap_micros",
	"min_commit_micros", "max_call_input_tokens", "max_call_output_tokens", "max_call_compute_ms",
}

// PricingJSON is the plan as the API shows it.
func (p Plan) PricingJSON() map[string]any {
	out := map[string]any{"currency": p.Currency, "version": p.Version}
	for k, v := range p.pricingFields() {
		out[k] = *v
	}
	return out
}

var currencyRE = regexp.MustCompile(`^[a-z]{3}$`)

// ParsePricing reads the API's pricing object. Every field is checked and
// every problem reported: unknown fields, a missing or malformed currency,
// amounts that are not non-negative integers (1.5, -1, "10", 1e3 and
// values past int64 are all refused) and amounts above their bound
// (CheckAmounts). Omitted amounts are zero.
func ParsePricing(raw json.RawMessage) (Plan, error) {
	var p Plan
	var fe agentmarket.Fields
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		fe.Add("pricing", "required", "pricing is required: at least {\"currency\": \"usd\"}")
		return p, fe.Err("invalid_pricing", "the price plan is not valid")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		fe.Add("pricing", "type", "pricing must be a JSON object")
		return p, fe.Err("invalid_pricing", "the price plan is not valid")
	}
	fields := p.pricingFields()
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := obj[k]
		if k == "currency" {
			var c string
			if json.Unmarshal(v, &c) != nil || !currencyRE.MatchString(c) {
				fe.Add("pricing.currency", "format", "currency must be an ISO 4217 code in lower case, like \"usd\"")
				continue
			}
			if _, ok := agentmarket.MinorUnitDigits(c); !ok {
				fe.Add("pricing.currency", "unknown_currency", "currency %q is not one AgentMarket can bill in; it bills in %s", c, agentmarket.CurrencyList())
				continue
			}
			p.Currency = c
			continue
		}
		if k == "version" { // echoed back by clients that PATCH what they read
			continue
		}
		dst, ok := fields[k]
		if !ok {
			fe.Add("pricing."+k, "unknown", "unknown pricing field %q", k)
			continue
		}
		n, rule, msg := parseAmount(v)
		if rule != "" {
			fe.Add("pricing."+k, rule, "%s %s", k, msg)
			continue
		}
		*dst = n
	}
	if _, ok := obj["currency"]; !ok {
		fe.Add("pricing.currency", "required", "currency is required, like \"usd\"")
	}
	p.CheckAmounts(&fe, "pricing.")
	if err := fe.Err("invalid_pricing", "the price plan is not valid"); err != nil {
		return Plan{}, err
	}
	return p, nil
}

// parseAmount accepts a JSON integer literal in [0, MaxInt64].
func parseAmount(v json.RawMessage) (int64, string, string) {
	s := string(bytes.TrimSpace(v))
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return 0, "type", "must be an integer number of micro-units (or units for allowances)"
	}
	if s[0] == '-' {
		return 0, "non_negative", "must not be negative"
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, "integer", "must be a whole number (money is integer micro-units)"
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, "range", "is too large"
	}
	return n, "", ""
}
