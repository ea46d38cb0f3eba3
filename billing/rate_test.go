package billing_test

import (
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/listings"
)

func over(u billing.Usage, in, out, ms, tasks int64) billing.Usage {
	return billing.Usage{InputTokens: u.InputTokens + in, OutputTokens: u.OutputTokens + out,
		ComputeMs: u.ComputeMs + ms, Tasks: u.Tasks + tasks}
}

func TestRate(t *testing.T) {
	jan := billing.MonthOf(date(2026, 1, 1))     // 31 days
	apr := billing.MonthOf(date(2026, 4, 1))     // 30 days
	feb := billing.MonthOf(date(2027, 2, 1))     // 28 days
	leapFeb := billing.MonthOf(date(2028, 2, 1)) // 29 days
	cases := []struct {
		name   string
		fee    int64
		usage  billing.Usage
		billed billing.Period
		active billing.Period
		want   string
	}{
		{name: "zero usage, active the whole period", fee: 31_000_000, billed: jan, active: jan,
			want: "flat_fee=31000000[3100] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=31000000 total=3100"},
		{name: "active from before to after the period is the whole period", fee: 31_000_000, billed: jan,
			active: period(date(2025, 11, 3), date(2026, 5, 1)),
			want:   "flat_fee=31000000[3100] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=31000000 total=3100"},
		{name: "allowance exactly used", fee: 31_000_000, usage: included, billed: jan, active: jan,
			want: "flat_fee=31000000[3100] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=31000000 total=3100"},
		{name: "allowance exceeded by one unit of each", fee: 31_000_000, usage: over(included, 1, 1, 1, 1), billed: jan, active: jan,
			want: "flat_fee=31000000[3100] input_tokens=3[0] output_tokens=15[0] compute=0+1/10[0] tasks=10000[1] subtotal=31010018+1/10 total=3101"},
		{name: "well past the allowance", fee: 31_000_000, usage: over(included, 1_500_000, 1_000_000, 3_600_001, 250), billed: jan, active: jan,
			want: "flat_fee=31000000[3100] input_tokens=4500000[450] output_tokens=15000000[1500] compute=360000+1/10[36] tasks=2500000[250] subtotal=53360000+1/10 total=5336"},
		{name: "usage below the allowance costs nothing", fee: 0, usage: billing.Usage{InputTokens: 999_999, OutputTokens: 1, ComputeMs: 5, Tasks: 99},
			billed: jan, active: jan,
			want: "flat_fee=0[0] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=0 total=0"},

		// Proration of the flat fee by seconds.
		{name: "starts mid-month: 15 of 31 days", fee: 31_000_000, billed: jan, active: period(date(2026, 1, 17), date(2026, 3, 1)),
			want: "flat_fee=15000000[1500] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=15000000 total=1500"},
		{name: "ends mid-month: 10 of 31 days", fee: 31_000_000, billed: jan, active: period(date(2025, 12, 1), date(2026, 1, 11)),
			want: "flat_fee=10000000[1000] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=10000000 total=1000"},
		{name: "starts and ends inside the period: 7 of 31 days", fee: 31_000_000, billed: jan, active: period(date(2026, 1, 5), date(2026, 1, 12)),
			want: "flat_fee=7000000[700] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=7000000 total=700"},
		{name: "30-day month: 10 of 30 days", fee: 30_000_000, billed: apr, active: period(date(2026, 4, 21), date(2026, 6, 1)),
			want: "flat_fee=10000000[1000] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=10000000 total=1000"},
		{name: "28-day February: 14 of 28 days", fee: 28_000_000, billed: feb, active: period(date(2027, 2, 15), date(2027, 3, 1)),
			want: "flat_fee=14000000[1400] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=14000000 total=1400"},
		{name: "leap February: 15 of 29 days", fee: 29_000_000, billed: leapFeb, active: period(date(2028, 2, 15), date(2028, 4, 1)),
			want: "flat_fee=15000000[1500] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=15000000 total=1500"},
		{name: "a fraction of a micro is kept: 31 for 10 of 30 days", fee: 31_000_000, billed: apr, active: period(date(2026, 4, 21), date(2026, 5, 1)),
			want: "flat_fee=10333333+1/3[1033] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=10333333+1/3 total=1033"},
		{name: "30 for 10 of 31 days rounds up", fee: 30_000_000, billed: jan, active: period(date(2026, 1, 22), date(2026, 2, 1)),
			want: "flat_fee=9677419+11/31[968] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=9677419+11/31 total=968"},
		{name: "one second of January", fee: 31_000_000, billed: jan, active: period(date(2026, 1, 31, 23, 59, 59), date(2026, 2, 1)),
			want: "flat_fee=11+31/54[0] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=11+31/54 total=0"},
		{name: "sub-second boundaries are truncated to the second", fee: 31_000_000, billed: jan,
			active: period(date(2026, 1, 17).Add(999*time.Millisecond), date(2026, 3, 1).Add(time.Millisecond)),
			want:   "flat_fee=15000000[1500] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=15000000 total=1500"},
		{name: "an active period in another zone is the same instant", fee: 31_000_000, billed: jan,
			active: period(time.Date(2026, 1, 17, 1, 0, 0, 0, time.FixedZone("CET", 3600)), date(2026, 3, 1)),
			want:   "flat_fee=15000000[1500] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=15000000 total=1500"},

		// The allowance is per period, in full, whatever the proration.
		{name: "allowance is not prorated: exactly used in half a month", fee: 31_000_000, usage: included,
			billed: jan, active: period(date(2026, 1, 17), date(2026, 3, 1)),
			want: "flat_fee=15000000[1500] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=15000000 total=1500"},
		{name: "allowance is not prorated: exceeded by one in half a month", fee: 31_000_000, usage: over(included, 1, 1, 1, 1),
			billed: jan, active: period(date(2026, 1, 17), date(2026, 3, 1)),
			want: "flat_fee=15000000[1500] input_tokens=3[0] output_tokens=15[0] compute=0+1/10[0] tasks=10000[1] subtotal=15010018+1/10 total=1501"},

		// The one rounding: half up, on the exact total.
		{name: "half a cent rounds up", fee: 5_000, billed: jan, active: jan,
			want: "flat_fee=5000[1] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=5000 total=1"},
		{name: "just under half a cent rounds down", fee: 4_999, billed: jan, active: jan,
			want: "flat_fee=4999[0] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=4999 total=0"},
		{name: "1.5 cents rounds to 2", fee: 15_000, billed: jan, active: jan,
			want: "flat_fee=15000[2] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=15000 total=2"},
		{name: "2.5 cents rounds to 3, not to even", fee: 25_000, billed: jan, active: jan,
			want: "flat_fee=25000[3] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=25000 total=3"},
		{name: "exact total is not rounded to micros first", fee: 0, usage: over(included, 0, 0, 49_996, 0), billed: jan, active: jan,
			want: "flat_fee=0[0] input_tokens=0[0] output_tokens=0[0] compute=4999+3/5[0] tasks=0[0] subtotal=4999+3/5 total=0"},
		{name: "lines are summed before rounding", fee: 3_000, usage: over(included, 0, 0, 20_000, 0), billed: jan, active: jan,
			want: "flat_fee=3000[1] input_tokens=0[0] output_tokens=0[0] compute=2000[0] tasks=0[0] subtotal=5000 total=1"},

		// Largest remainder: the missing cents go to the largest fractions.
		{name: "largest remainders get the missing cents, ties to the earlier line", fee: 4_000, usage: over(included, 2_000, 400, 30_000, 0),
			billed: jan, active: jan,
			want: "flat_fee=4000[0] input_tokens=6000[1] output_tokens=6000[1] compute=3000[0] tasks=0[0] subtotal=19000 total=2"},
		{name: "as many missing cents as fractional lines", fee: 4_000, usage: over(included, 2_000, 400, 90_000, 0),
			billed: jan, active: jan,
			want: "flat_fee=4000[0] input_tokens=6000[1] output_tokens=6000[1] compute=9000[1] tasks=0[0] subtotal=25000 total=3"},
		{name: "equal remainders: the earlier line gets the cent", fee: 2_500, usage: over(included, 0, 0, 25_000, 0),
			billed: jan, active: jan,
			want: "flat_fee=2500[1] input_tokens=0[0] output_tokens=0[0] compute=2500[0] tasks=0[0] subtotal=5000 total=1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inv, err := billing.Rate(basePlan(tc.fee), tc.usage, tc.billed, tc.active)
			if err != nil {
				t.Fatalf("Rate: %v", err)
			}
			if got := summary(inv); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestRateInvoice(t *testing.T) {
	jan := billing.MonthOf(date(2026, 1, 9))
	active := period(date(2026, 1, 17, 6, 30), date(2026, 3, 1))
	inv, err := billing.Rate(basePlan(31_000_000), over(included, 500_000, 0, 7, 2), jan, active)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Currency != "usd" || inv.PlanVersion != 3 || inv.MinorUnitDigits != 2 || inv.Preview || !inv.AsOf.IsZero() {
		t.Errorf("currency, version, digits, preview, as of = %s, %d, %d, %v, %v; want usd, 3, 2, false, zero",
			inv.Currency, inv.PlanVersion, inv.MinorUnitDigits, inv.Preview, inv.AsOf)
	}
	if inv.Period != jan {
		t.Errorf("period = %v, want %v", inv.Period, jan)
	}
	if want := period(date(2026, 1, 17, 6, 30), date(2026, 2, 1)); inv.Active != want {
		t.Errorf("active = %v, want %v", inv.Active, want)
	}
	type line struct {
		kind                                     billing.LineKind
		desc                                     string
		used, included, qty, unitPrice, perUnits int64
	}
	want := []line{
		{billing.LineFlatFee, "Monthly fee, prorated for 1272600 of 2678400 seconds", 1_272_600, 0, 1_272_600, 31_000_000, 2_678_400},
		{billing.LineInputTokens, "Input tokens, per million", 1_500_000, 1_000_000, 500_000, 3_000_000, 1_000_000},
		{billing.LineOutputTokens, "Output tokens, per million", 200_000, 200_000, 0, 15_000_000, 1_000_000},
		{billing.LineCompute, "Compute, per hour, billed per millisecond", 3_600_007, 3_600_000, 7, 360_000, 3_600_000},
		{billing.LineTasks, "Tasks, per task", 102, 100, 2, 10_000, 1},
	}
	if len(inv.Lines) != len(want) {
		t.Fatalf("got %d lines, want %d", len(inv.Lines), len(want))
	}
	for i, l := range inv.Lines {
		got := line{l.Kind, l.Description, l.Used, l.Included, l.Quantity, l.UnitPriceMicros, l.PerUnits}
		if got != want[i] {
			t.Errorf("line %d:\ngot  %+v\nwant %+v", i, got, want[i])
		}
		if l.Kind != billing.LineKinds[i] {
			t.Errorf("line %d kind = %s, want %s", i, l.Kind, billing.LineKinds[i])
		}
		// The exact amount is Quantity × UnitPriceMicros / PerUnits.
		if wantExact := big.NewRat(l.Quantity*l.UnitPriceMicros, l.PerUnits); l.ExactMicros().Cmp(wantExact) != 0 {
			t.Errorf("line %d exact = %s, want %s", i, l.ExactMicros(), wantExact)
		}
	}
}

func TestRateFlatFeeDescription(t *testing.T) {
	jan := billing.MonthOf(date(2026, 1, 1))
	cases := []struct {
		name   string
		active billing.Period
		want   string
	}{
		{"whole period", jan, "Monthly fee"},
		{"whole days", period(date(2026, 1, 17), date(2026, 2, 1)), "Monthly fee, prorated for 15 of 31 days"},
		{"seconds", period(date(2026, 1, 31, 23, 59, 59), date(2026, 2, 1)), "Monthly fee, prorated for 1 of 2678400 seconds"},
	}
	for _, tc := range cases {
		inv, err := billing.Rate(basePlan(1), billing.Usage{}, jan, tc.active)
		if err != nil {
			t.Fatal(err)
		}
		if got := inv.Lines[0].Description; got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestMinorUnitDigits(t *testing.T) {
	cases := []struct {
		currency string
		want     int
	}{
		{"usd", 2}, {"eur", 2}, {"gbp", 2}, {"chf", 2}, {"inr", 2},
		{"jpy", 0}, {"krw", 0}, {"clp", 0}, {"vnd", 0},
		{"bhd", 3}, {"kwd", 3}, {"jod", 3}, {"omr", 3}, {"tnd", 3},
	}
	for _, tc := range cases {
		got, err := billing.MinorUnitDigits(tc.currency)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %d, %v; want %d, nil", tc.currency, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "xyz", "USD", "us"} {
		if _, err := billing.MinorUnitDigits(bad); err == nil {
			t.Errorf("%q: err = nil, want unknown_currency", bad)
		}
	}
}

func TestRateCurrencies(t *testing.T) {
	cases := []struct {
		currency   string
		fee        int64
		wantDigits int
		wantTotal  int64
	}{
		{"usd", 1_234_500, 2, 123},
		{"usd", 1_235_000, 2, 124},
		{"eur", 1_234_999, 2, 123},
		{"gbp", 0, 2, 0},
		{"jpy", 1_499_999, 0, 1},
		{"jpy", 1_500_000, 0, 2},
		{"krw", 500_000, 0, 1},
		{"krw", 499_999, 0, 0},
		{"bhd", 1_234_500, 3, 1235},
		{"kwd", 1_234_499, 3, 1234},
		{"tnd", 500, 3, 1},
	}
	jan := billing.MonthOf(date(2026, 1, 1))
	for _, tc := range cases {
		plan := listings.Plan{Currency: tc.currency, MonthlyFeeMicros: tc.fee}
		inv, err := billing.Rate(plan, billing.Usage{}, jan, jan)
		if err != nil {
			t.Fatalf("%s %d: %v", tc.currency, tc.fee, err)
		}
		if inv.MinorUnitDigits != tc.wantDigits || inv.TotalMinor != tc.wantTotal || inv.Lines[0].AmountMinor != tc.wantTotal {
			t.Errorf("%s %d micros: got digits %d, total %d, fee line %d; want %d, %d, %d", tc.currency, tc.fee,
				inv.MinorUnitDigits, inv.TotalMinor, inv.Lines[0].AmountMinor, tc.wantDigits, tc.wantTotal, tc.wantTotal)
		}
	}
}

func TestRateLimits(t *testing.T) {
	const maxI = math.MaxInt64
	const maxFee, maxPrice = agentmarket.MaxMonthlyFeeMicros, agentmarket.MaxUnitPriceMicros
	jan := billing.MonthOf(date(2026, 1, 1))
	half := period(date(2026, 1, 17), date(2026, 2, 1))
	cases := []struct {
		name   string
		plan   listings.Plan
		usage  billing.Usage
		active billing.Period
		want   string // summary, or the error's field:rule pairs
	}{
		{name: "10^12 tokens at 10^9 micros per million",
			plan:  listings.Plan{Currency: "usd", InputTokensPerMillionMicros: 1e9, OutputTokensPerMillionMicros: 1e9},
			usage: billing.Usage{InputTokens: 1e12, OutputTokens: 1e12}, active: jan,
			want: "flat_fee=0[0] input_tokens=1000000000000000[100000000000] output_tokens=1000000000000000[100000000000] compute=0[0] tasks=0[0] " +
				"subtotal=2000000000000000 total=200000000000"},
		{name: "10^10 tasks at a dollar", plan: listings.Plan{Currency: "usd", PerTaskMicros: 1e6},
			usage: billing.Usage{Tasks: 1e10}, active: jan,
			want: "flat_fee=0[0] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=10000000000000000[1000000000000] subtotal=10000000000000000 total=1000000000000"},
		{name: "10^12 ms of compute at 10^9 micros an hour", plan: listings.Plan{Currency: "usd", ComputePerHourMicros: 1e9},
			usage: billing.Usage{ComputeMs: 1e12}, active: jan,
			want: "flat_fee=0[0] input_tokens=0[0] output_tokens=0[0] compute=277777777777777+7/9[27777777778] tasks=0[0] subtotal=277777777777777+7/9 total=27777777778"},
		{name: "a line of exactly the largest amount", plan: listings.Plan{Currency: "usd", PerTaskMicros: 1},
			usage: billing.Usage{Tasks: maxI}, active: jan,
			want: "flat_fee=0[0] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=9223372036854775807[922337203685478] subtotal=9223372036854775807 total=922337203685478"},
		{name: "the largest amount in yen", plan: listings.Plan{Currency: "jpy", PerTaskMicros: 1},
			usage: billing.Usage{Tasks: maxI}, active: jan,
			want: "flat_fee=0[0] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=9223372036854775807[9223372036855] subtotal=9223372036854775807 total=9223372036855"},
		{name: "the largest count of tokens at a micro per token", plan: listings.Plan{Currency: "usd", InputTokensPerMillionMicros: 1e6},
			usage: billing.Usage{InputTokens: maxI}, active: jan,
			want: "flat_fee=0[0] input_tokens=9223372036854775807[922337203685478] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=9223372036854775807 total=922337203685478"},
		{name: "the largest fee, whole period", plan: listings.Plan{Currency: "usd", MonthlyFeeMicros: maxFee}, active: jan,
			want: "flat_fee=10000000000000[1000000000] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=10000000000000 total=1000000000"},
		{name: "the largest fee, prorated (fee × seconds is past int64)", plan: listings.Plan{Currency: "usd", MonthlyFeeMicros: maxFee}, active: half,
			want: "flat_fee=4838709677419+11/31[483870968] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=4838709677419+11/31 total=483870968"},
		{name: "the largest fee and price with the largest allowance used up exactly", plan: listings.Plan{Currency: "usd", MonthlyFeeMicros: maxFee,
			PerTaskMicros: maxPrice, IncludedTasks: agentmarket.MaxQuantity}, usage: billing.Usage{Tasks: agentmarket.MaxQuantity}, active: jan,
			want: "flat_fee=10000000000000[1000000000] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=0[0] subtotal=10000000000000 total=1000000000"},
		{name: "a saturated count past the largest allowance, at a micro a task", plan: listings.Plan{Currency: "usd", PerTaskMicros: 1,
			IncludedTasks: agentmarket.MaxQuantity}, usage: billing.Usage{Tasks: maxI}, active: jan,
			want: "flat_fee=0[0] input_tokens=0[0] output_tokens=0[0] compute=0[0] tasks=9223371036854775807[922337103685478] subtotal=9223371036854775807 total=922337103685478"},

		{name: "a line one micro past the largest", plan: listings.Plan{Currency: "usd", PerTaskMicros: 2},
			usage: billing.Usage{Tasks: 1 << 62}, active: jan, want: "lines.tasks:range"},
		{name: "every line fits, the subtotal does not", plan: listings.Plan{Currency: "usd", MonthlyFeeMicros: 1, PerTaskMicros: 1},
			usage: billing.Usage{Tasks: maxI}, active: jan, want: "subtotal:range"},
		{name: "every price at its bound, every count saturated", plan: listings.Plan{Currency: "usd", MonthlyFeeMicros: maxFee,
			InputTokensPerMillionMicros: maxPrice, OutputTokensPerMillionMicros: maxPrice, ComputePerHourMicros: maxPrice, PerTaskMicros: maxPrice},
			usage: billing.Usage{InputTokens: maxI, OutputTokens: maxI, ComputeMs: maxI, Tasks: maxI}, active: jan,
			want: "lines.input_tokens:range lines.output_tokens:range lines.compute:range lines.tasks:range"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inv, err := billing.Rate(tc.plan, tc.usage, jan, tc.active)
			var got string
			if err != nil {
				got = fieldRules(t, err, "amount_out_of_range")
			} else {
				got = summary(inv)
			}
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestRateInvalid(t *testing.T) {
	jan := billing.MonthOf(date(2026, 1, 1))
	cases := []struct {
		name   string
		plan   listings.Plan
		usage  billing.Usage
		billed billing.Period
		active billing.Period
		errs   string
	}{
		{name: "valid", plan: basePlan(1), billed: jan, active: jan},
		{name: "a period of 366 days", plan: basePlan(1), billed: period(date(2028, 1, 1), date(2029, 1, 1)), active: period(date(2028, 1, 1), date(2029, 1, 1))},
		{name: "everything wrong, all reported",
			plan: listings.Plan{MonthlyFeeMicros: -1, InputTokensPerMillionMicros: -1, OutputTokensPerMillionMicros: -1,
				ComputePerHourMicros: -1, PerTaskMicros: -1, IncludedInputTokens: -1, IncludedOutputTokens: -1,
				IncludedComputeMs: -1, IncludedTasks: -1},
			usage: billing.Usage{InputTokens: -1, OutputTokens: -1, ComputeMs: -1, Tasks: -1},
			errs: "plan.currency:unknown_currency plan.monthly_fee_micros:non_negative plan.input_tokens_per_million_micros:non_negative " +
				"plan.output_tokens_per_million_micros:non_negative plan.compute_per_hour_micros:non_negative plan.per_task_micros:non_negative " +
				"plan.included_input_tokens:non_negative plan.included_output_tokens:non_negative plan.included_compute_ms:non_negative " +
				"plan.included_tasks:non_negative usage.input_tokens:non_negative usage.output_tokens:non_negative " +
				"usage.compute_ms:non_negative usage.tasks:non_negative billed.start:required billed.end:required " +
				"active.start:required active.end:required"},
		{name: "unknown currency", plan: listings.Plan{Currency: "xyz"}, billed: jan, active: jan, errs: "plan.currency:unknown_currency"},
		{name: "amounts past their bounds (a plan stored before there were any)",
			plan: listings.Plan{Currency: "usd", MonthlyFeeMicros: agentmarket.MaxMonthlyFeeMicros + 1, InputTokensPerMillionMicros: math.MaxInt64,
				OutputTokensPerMillionMicros: agentmarket.MaxUnitPriceMicros, ComputePerHourMicros: agentmarket.MaxUnitPriceMicros + 1,
				PerTaskMicros: math.MaxInt64, IncludedTasks: agentmarket.MaxQuantity + 1, IncludedComputeMs: agentmarket.MaxQuantity},
			billed: jan, active: jan,
			errs: "plan.monthly_fee_micros:max plan.input_tokens_per_million_micros:max plan.compute_per_hour_micros:max " +
				"plan.per_task_micros:max plan.included_tasks:max"},
		{name: "billed backwards", plan: basePlan(1), billed: period(jan.End, jan.Start), active: jan, errs: "billed.end:after_start"},
		{name: "billed shorter than a second", plan: basePlan(1), active: jan,
			billed: period(jan.Start, jan.Start.Add(time.Second-time.Nanosecond)), errs: "billed.end:after_start"},
		{name: "billed longer than 366 days", plan: basePlan(1), billed: period(date(2028, 1, 1), date(2029, 1, 2)), active: period(date(2028, 1, 1), date(2028, 2, 1)),
			errs: "billed.end:max_length"},
		{name: "active backwards", plan: basePlan(1), billed: jan, active: period(jan.End, jan.Start), errs: "active.end:after_start"},
		{name: "active before the period", plan: basePlan(1), billed: jan, active: period(date(2025, 12, 1), date(2025, 12, 31)),
			errs: "active:outside_period"},
		{name: "active ends as the period starts", plan: basePlan(1), billed: jan, active: period(date(2025, 12, 1), jan.Start),
			errs: "active:outside_period"},
		{name: "active starts as the period ends", plan: basePlan(1), billed: jan, active: period(jan.End, date(2026, 3, 1)),
			errs: "active:outside_period"},
		{name: "active for less than a whole second of it", plan: basePlan(1), billed: jan,
			active: period(date(2025, 12, 1), jan.Start.Add(time.Second/2)), errs: "active:outside_period"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inv, err := billing.Rate(tc.plan, tc.usage, tc.billed, tc.active)
			if tc.errs == "" {
				if err != nil || inv == nil {
					t.Fatalf("got %v, %v; want an invoice", inv, err)
				}
				return
			}
			if inv != nil {
				t.Errorf("got an invoice with an error")
			}
			if got := fieldRules(t, err, "invalid_rating_input"); got != tc.errs {
				t.Errorf("got  %s\nwant %s", strings.ReplaceAll(got, " ", "\n     "), strings.ReplaceAll(tc.errs, " ", "\n     "))
			}
		})
	}
}
