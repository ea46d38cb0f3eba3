package listings_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings"
)

// fieldRules renders an error's fields as "field:rule" pairs, in order.
func fieldRules(t *testing.T, err error) string {
	t.Helper()
	var ae *agentmarket.Error
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v (%T), want *agentmarket.Error", err, err)
	}
	var out []string
	for _, f := range ae.Fields {
		out = append(out, f.Field+":"+f.Rule)
	}
	return strings.Join(out, " ")
}

func TestParsePricing(t *testing.T) {
	full := listings.Plan{
		Currency:                     "usd",
		MonthlyFeeMicros:             5_000_000,
		InputTokensPerMillionMicros:  3_000_000,
		OutputTokensPerMillionMicros: 15_000_000,
		ComputePerHourMicros:         120_000,
		PerTaskMicros:                10_000,
		IncludedInputTokens:          1_000_000,
		IncludedOutputTokens:         200_000,
		IncludedComputeMs:            3_600_000,
		IncludedTasks:                100,
	}
	cases := []struct {
		name string
		raw  string
		want listings.Plan
		errs string // field:rule pairs; empty for success
	}{
		{
			name: "full plan",
			raw: `{"currency": "usd", "monthly_fee_micros": 5000000, "input_tokens_per_million_micros": 3000000,
				"output_tokens_per_million_micros": 15000000, "compute_per_hour_micros": 120000, "per_task_micros": 10000,
				"included_input_tokens": 1000000, "included_output_tokens": 200000, "included_compute_ms": 3600000, "included_tasks": 100}`,
			want: full,
		},
		{name: "omitted amounts are zero", raw: `{"currency": "eur"}`, want: listings.Plan{Currency: "eur"}},
		{name: "a zero-decimal currency", raw: `{"currency": "jpy"}`, want: listings.Plan{Currency: "jpy"}},
		// Three letters are not a currency: one AgentMarket cannot rate
		// would make every export and preview of its buyers fail.
		{name: "three letters that are no currency", raw: `{"currency": "zzz"}`, errs: "pricing.currency:unknown_currency"},
		{name: "zero and the largest amounts", raw: `{"currency": "usd", "per_task_micros": 0, "monthly_fee_micros": 10000000000000,
			"input_tokens_per_million_micros": 10000000000, "output_tokens_per_million_micros": 10000000000, "compute_per_hour_micros": 10000000000,
			"included_input_tokens": 1000000000000, "included_output_tokens": 1000000000000, "included_compute_ms": 1000000000000, "included_tasks": 1000000000000}`,
			want: listings.Plan{Currency: "usd", MonthlyFeeMicros: agentmarket.MaxMonthlyFeeMicros, InputTokensPerMillionMicros: agentmarket.MaxUnitPriceMicros,
				OutputTokensPerMillionMicros: agentmarket.MaxUnitPriceMicros, ComputePerHourMicros: agentmarket.MaxUnitPriceMicros,
				IncludedInputTokens: agentmarket.MaxQuantity, IncludedOutputTokens: agentmarket.MaxQuantity, IncludedComputeMs: agentmarket.MaxQuantity,
				IncludedTasks: agentmarket.MaxQuantity}},
		{name: "the price ceiling: one past each bound", raw: `{"currency": "usd", "monthly_fee_micros": 10000000000001,
			"input_tokens_per_million_micros": 10000000001, "output_tokens_per_million_micros": 10000000001, "compute_per_hour_micros": 10000000001,
			"per_task_micros": 10000000001, "included_input_tokens": 1000000000001, "included_output_tokens": 1000000000001,
			"included_compute_ms": 1000000000001, "included_tasks": 1000000000001}`,
			errs: "pricing.monthly_fee_micros:max pricing.input_tokens_per_million_micros:max pricing.output_tokens_per_million_micros:max " +
				"pricing.compute_per_hour_micros:max pricing.per_task_micros:max pricing.included_input_tokens:max pricing.included_output_tokens:max " +
				"pricing.included_compute_ms:max pricing.included_tasks:max"},
		{name: "a trial: days, tokens and a cap", raw: `{"currency": "usd", "trial_days": 14, "trial_tokens": 2000000, "trial_cap_micros": 5000000}`,
			want: listings.Plan{Currency: "usd", TrialDays: 14, TrialTokens: 2000000, TrialCapMicros: 5000000}},
		{name: "the longest trial", raw: `{"currency": "usd", "trial_days": 365, "trial_tokens": 1000000000000, "trial_cap_micros": 1000000000000000}`,
			want: listings.Plan{Currency: "usd", TrialDays: listings.MaxTrialDays, TrialTokens: agentmarket.MaxQuantity, TrialCapMicros: agentmarket.MaxBudgetMicros}},
		{name: "a trial past its bounds", raw: `{"currency": "usd", "trial_days": 366, "trial_tokens": 1000000000001, "trial_cap_micros": 1000000000000001}`,
			errs: "pricing.trial_days:max pricing.trial_tokens:max pricing.trial_cap_micros:max"},
		{name: "a per-call ceiling", raw: `{"currency": "usd", "max_call_input_tokens": 2000, "max_call_output_tokens": 1000, "max_call_compute_ms": 1000000000000}`,
			want: listings.Plan{Currency: "usd", MaxCallInputTokens: 2000, MaxCallOutputTokens: 1000, MaxCallComputeMs: agentmarket.MaxQuantity}},
		{name: "a per-call ceiling past its bounds", raw: `{"currency": "usd", "max_call_input_tokens": -1, "max_call_output_tokens": 1.5, "max_call_compute_ms": 1000000000001}`,
			errs: "pricing.max_call_input_tokens:non_negative pricing.max_call_output_tokens:integer pricing.max_call_compute_ms:max"},
		{name: "trial limits without trial days", raw: `{"currency": "usd", "trial_tokens": 10, "trial_cap_micros": 10}`,
			errs: "pricing.trial_tokens:requires_trial_days pricing.trial_cap_micros:requires_trial_days"},
		{name: "trial days that are not whole", raw: `{"currency": "usd", "trial_days": 1.5}`, errs: "pricing.trial_days:integer"},
		{name: "the largest int64 as a price", raw: `{"currency": "usd", "per_task_micros": 9223372036854775807}`, errs: "pricing.per_task_micros:max"},
		{name: "version echoed back is ignored", raw: `{"currency": "usd", "version": 7, "monthly_fee_micros": 1}`,
			want: listings.Plan{Currency: "usd", MonthlyFeeMicros: 1}},
		{name: "missing currency", raw: `{"monthly_fee_micros": 1}`, errs: "pricing.currency:required"},
		{name: "currency in capitals", raw: `{"currency": "USD"}`, errs: "pricing.currency:format"},
		{name: "currency of two letters", raw: `{"currency": "us"}`, errs: "pricing.currency:format"},
		{name: "currency of four letters", raw: `{"currency": "usdc"}`, errs: "pricing.currency:format"},
		{name: "currency as a number", raw: `{"currency": 5}`, errs: "pricing.currency:format"},
		{name: "currency empty", raw: `{"currency": ""}`, errs: "pricing.currency:format"},
		{name: "currency null", raw: `{"currency": null}`, errs: "pricing.currency:format"},
		{name: "negative amount", raw: `{"currency": "usd", "monthly_fee_micros": -1}`, errs: "pricing.monthly_fee_micros:non_negative"},
		{name: "fraction", raw: `{"currency": "usd", "per_task_micros": 1.5}`, errs: "pricing.per_task_micros:integer"},
		{name: "exponent", raw: `{"currency": "usd", "per_task_micros": 1e3}`, errs: "pricing.per_task_micros:integer"},
		{name: "whole number written with a fraction", raw: `{"currency": "usd", "per_task_micros": 10.0}`, errs: "pricing.per_task_micros:integer"},
		{name: "number in a string", raw: `{"currency": "usd", "included_tasks": "10"}`, errs: "pricing.included_tasks:type"},
		{name: "boolean amount", raw: `{"currency": "usd", "included_tasks": true}`, errs: "pricing.included_tasks:type"},
		{name: "null amount", raw: `{"currency": "usd", "included_tasks": null}`, errs: "pricing.included_tasks:type"},
		{name: "object amount", raw: `{"currency": "usd", "included_tasks": {"n": 1}}`, errs: "pricing.included_tasks:type"},
		{name: "beyond int64", raw: `{"currency": "usd", "monthly_fee_micros": 9223372036854775808}`, errs: "pricing.monthly_fee_micros:range"},
		{name: "far beyond int64", raw: `{"currency": "usd", "monthly_fee_micros": 123456789012345678901234567890}`, errs: "pricing.monthly_fee_micros:range"},
		{name: "unknown field", raw: `{"currency": "usd", "monthly_fee": 1}`, errs: "pricing.monthly_fee:unknown"},
		{name: "null", raw: `null`, errs: "pricing:required"},
		{name: "empty", raw: ``, errs: "pricing:required"},
		{name: "blank", raw: " \n ", errs: "pricing:required"},
		{name: "array", raw: `[{"currency": "usd"}]`, errs: "pricing:type"},
		{name: "string", raw: `"usd"`, errs: "pricing:type"},
		{name: "not JSON", raw: `{currency: usd}`, errs: "pricing:type"},
		{
			name: "every problem at once",
			raw:  `{"monthly_fee_micros": -1, "per_task_micros": 1.5, "included_tasks": "3", "bogus": 1, "compute_per_hour_micros": 99999999999999999999}`,
			errs: "pricing.bogus:unknown pricing.compute_per_hour_micros:range pricing.included_tasks:type " +
				"pricing.monthly_fee_micros:non_negative pricing.per_task_micros:integer pricing.currency:required",
		},
		{
			name: "bad currency reported with bad amounts",
			raw:  `{"currency": "USD", "monthly_fee_micros": 1e6}`,
			errs: "pricing.currency:format pricing.monthly_fee_micros:integer",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := listings.ParsePricing(json.RawMessage(tc.raw))
			if tc.errs == "" {
				if err != nil {
					t.Fatalf("ParsePricing: %v", err)
				}
				if got != tc.want {
					t.Errorf("ParsePricing =\n  %+v\nwant\n  %+v", got, tc.want)
				}
				return
			}
			if agentmarket.KindOf(err) != agentmarket.Invalid || agentmarket.CodeOf(err) != "invalid_pricing" {
				t.Fatalf("err = %v, want invalid invalid_pricing", err)
			}
			if f := fieldRules(t, err); f != tc.errs {
				t.Errorf("fields = %q\nwant     %q", f, tc.errs)
			}
			if got != (listings.Plan{}) {
				t.Errorf("plan on error = %+v, want the zero plan", got)
			}
		})
	}
}

func TestPricingJSONRoundTrip(t *testing.T) {
	p := listings.Plan{Version: 3, Currency: "gbp", MonthlyFeeMicros: 1, InputTokensPerMillionMicros: 2, OutputTokensPerMillionMicros: 3,
		ComputePerHourMicros: 4, PerTaskMicros: 5, IncludedInputTokens: 6, IncludedOutputTokens: 7, IncludedComputeMs: 8, IncludedTasks: 9,
		TrialDays: 10, TrialTokens: 11, TrialCapMicros: 12}
	raw, err := json.Marshal(p.PricingJSON())
	if err != nil {
		t.Fatal(err)
	}
	got, err := listings.ParsePricing(raw)
	if err != nil {
		t.Fatalf("ParsePricing(PricingJSON()): %v", err)
	}
	if !got.SamePrices(p) {
		t.Errorf("round trip = %+v, want the prices of %+v", got, p)
	}
}

func TestSamePrices(t *testing.T) {
	base := listings.Plan{Version: 1, Currency: "usd", MonthlyFeeMicros: 5, IncludedTasks: 10, CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	with := func(f func(*listings.Plan)) listings.Plan {
		p := base
		f(&p)
		return p
	}
	cases := []struct {
		name  string
		other listings.Plan
		want  bool
	}{
		{"identical", base, true},
		{"other version and time", with(func(p *listings.Plan) { p.Version, p.CreatedAt = 2, p.CreatedAt.Add(time.Hour) }), true},
		{"other fee", with(func(p *listings.Plan) { p.MonthlyFeeMicros = 6 }), false},
		{"other currency", with(func(p *listings.Plan) { p.Currency = "eur" }), false},
		{"other allowance", with(func(p *listings.Plan) { p.IncludedTasks = 11 }), false},
		{"other usage rate", with(func(p *listings.Plan) { p.OutputTokensPerMillionMicros = 1 }), false},
		{"other trial", with(func(p *listings.Plan) { p.TrialDays = 7 }), false},
		{"other trial cap", with(func(p *listings.Plan) { p.TrialCapMicros = 1 }), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := base.SamePrices(tc.other); got != tc.want {
				t.Errorf("SamePrices = %v, want %v", got, tc.want)
			}
			if got := tc.other.SamePrices(base); got != tc.want {
				t.Errorf("SamePrices (swapped) = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCallCeiling: a plan's declared per-call ceiling, each counter the
// documented default where it declares none.
func TestCallCeiling(t *testing.T) {
	in, out, ms := listings.Plan{MaxCallOutputTokens: 300}.CallCeiling()
	if in != listings.DefaultMaxCallInputTokens || out != 300 || ms != listings.DefaultMaxCallComputeMs {
		t.Errorf("CallCeiling = %d, %d, %d; want the defaults but 300 output tokens", in, out, ms)
	}
}
