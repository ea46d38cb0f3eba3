package stripe_test

import (
	"context"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/form"

	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/listings"
)

// stripePrice is a price as Stripe would apply it: the first Free units
// cost nothing, each further one Unit minor units.
type stripePrice struct {
	Free int64
	Unit *big.Rat
	// Raw is the unit amount as sent.
	Raw string
}

// parsePrice reads a recorded POST /v1/prices back into what Stripe bills.
func parsePrice(t *testing.T, c call) stripePrice {
	t.Helper()
	f := c.Form
	amount := func(key func(string) string) (string, *big.Rat) {
		whole, dec := f.Get(key("unit_amount")), f.Get(key("unit_amount_decimal"))
		s := whole
		switch {
		case whole != "" && dec != "":
			t.Fatalf("%s: both unit_amount and unit_amount_decimal", c.Key)
		case whole != "":
			if _, err := strconv.ParseInt(whole, 10, 64); err != nil {
				t.Fatalf("%s: unit_amount %q is not an integer", c.Key, whole)
			}
		case dec != "":
			s = dec
			if i := strings.IndexByte(dec, '.'); i >= 0 && len(dec)-i-1 > 12 {
				t.Fatalf("%s: unit_amount_decimal %q has more than 12 decimals", c.Key, dec)
			}
		default:
			t.Fatalf("%s: no unit amount in %v", c.Key, f)
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("%s: unit amount %q is not a decimal", c.Key, s)
		}
		return s, r
	}
	switch f.Get("billing_scheme") {
	case "per_unit":
		raw, unit := amount(func(k string) string { return k })
		return stripePrice{Unit: unit, Raw: raw}
	case "tiered":
		if f.Get("tiers_mode") != "graduated" || f.Get("tiers[0][unit_amount]") != "0" || f.Get("tiers[1][up_to]") != "inf" {
			t.Fatalf("%s: tiers are not [free up to N, paid up to inf]: %v", c.Key, f)
		}
		free, err := strconv.ParseInt(f.Get("tiers[0][up_to]"), 10, 64)
		if err != nil || free <= 0 {
			t.Fatalf("%s: tiers[0][up_to] %q", c.Key, f.Get("tiers[0][up_to]"))
		}
		raw, unit := amount(func(k string) string { return "tiers[1][" + k + "]" })
		return stripePrice{Free: free, Unit: unit, Raw: raw}
	}
	t.Fatalf("%s: billing_scheme %q", c.Key, f.Get("billing_scheme"))
	return stripePrice{}
}

// stripeLine is what Stripe bills for used units, exactly (before it
// rounds the line to the minor unit).
func (p stripePrice) stripeLine(used int64) *big.Rat {
	return new(big.Rat).Mul(big.NewRat(max(0, used-p.Free), 1), p.Unit)
}

// pricesOf runs EnsurePlan on a fake Stripe and returns the prices it sent,
// by line kind.
func pricesOf(t *testing.T, plan listings.Plan) map[billing.LineKind]stripePrice {
	t.Helper()
	p, rec := fakeStripe(t, okJSON)
	if _, err := p.EnsurePlan(context.Background(), "lst_p", "Priced", plan); err != nil {
		t.Fatalf("EnsurePlan(%+v): %v", plan, err)
	}
	out := map[billing.LineKind]stripePrice{}
	for _, c := range rec.take() {
		if c.Path == "/v1/prices" {
			out[billing.LineKind(c.Form.Get("metadata[agentmarket_line_kind]"))] = parsePrice(t, c)
		}
	}
	if len(out) != len(billing.LineKinds) {
		t.Fatalf("got prices for %d kinds, want %d", len(out), len(billing.LineKinds))
	}
	return out
}

// TestUnitAmounts pins the conversion of micros to Stripe's unit amounts.
func TestUnitAmounts(t *testing.T) {
	for _, c := range []struct {
		name string
		plan listings.Plan
		want map[billing.LineKind]string
	}{
		{"usd", listings.Plan{Version: 1, Currency: "usd", MonthlyFeeMicros: 9_995_000, InputTokensPerMillionMicros: 1,
			OutputTokensPerMillionMicros: 15_000_000, ComputePerHourMicros: 360_000, PerTaskMicros: 10_000},
			map[billing.LineKind]string{"flat_fee": "999.5", "input_tokens": "0.0000000001", "output_tokens": "0.0015", "compute": "0.00001", "tasks": "1"}},
		{"usd inexact compute", listings.Plan{Version: 1, Currency: "usd", ComputePerHourMicros: 1_000_000, InputTokensPerMillionMicros: 9_999_999_999},
			map[billing.LineKind]string{"flat_fee": "0", "compute": "0.000027777778", "input_tokens": "0.9999999999", "output_tokens": "0", "tasks": "0"}},
		{"jpy", listings.Plan{Version: 1, Currency: "jpy", MonthlyFeeMicros: 1_000_000_000, InputTokensPerMillionMicros: 1,
			ComputePerHourMicros: 1_800_000, PerTaskMicros: 1_500_000},
			map[billing.LineKind]string{"flat_fee": "1000", "input_tokens": "0.000000000001", "output_tokens": "0", "compute": "0.0000005", "tasks": "1.5"}},
		{"jpy compute not a multiple of 18", listings.Plan{Version: 1, Currency: "jpy", ComputePerHourMicros: 9},
			map[billing.LineKind]string{"compute": "0.000000000003", "flat_fee": "0", "input_tokens": "0", "output_tokens": "0", "tasks": "0"}},
		{"kwd", listings.Plan{Version: 1, Currency: "kwd", MonthlyFeeMicros: 1_234_567, OutputTokensPerMillionMicros: 7, ComputePerHourMicros: 9},
			map[billing.LineKind]string{"flat_fee": "1234.567", "input_tokens": "0", "output_tokens": "0.000000007", "compute": "0.0000000025", "tasks": "0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := pricesOf(t, c.plan)
			for kind, w := range c.want {
				if got[kind].Raw != w {
					t.Errorf("%s: unit amount %s, want %s", kind, got[kind].Raw, w)
				}
			}
		})
	}
}

// TestStripeBillsWhatRateRates applies the prices EnsurePlan sends the way
// Stripe applies them (graduated tiers, quantity × unit amount) to a month
// of usage and compares each line with billing.Rate's exact line: equal,
// except a per-ms compute price that has no finite decimal, which stays
// within the documented bound. It also checks the documented bound between
// Stripe's per-line rounding and Rate's one rounding of the total.
func TestStripeBillsWhatRateRates(t *testing.T) {
	month := billing.MonthOf(time.Date(2026, time.April, 10, 0, 0, 0, 0, time.UTC))
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(vals ...int64) int64 { return vals[rng.IntN(len(vals))] }
	type tc struct {
		plan  listings.Plan
		usage billing.Usage
	}
	cases := []tc{{
		plan:  listings.Plan{Version: 1, Currency: "usd", MonthlyFeeMicros: 49_000_000, InputTokensPerMillionMicros: 3_000_000, OutputTokensPerMillionMicros: 15_000_000, ComputePerHourMicros: 1_000_000, PerTaskMicros: 10_000, IncludedInputTokens: 1_000_000, IncludedComputeMs: 3_600_000, IncludedTasks: 100},
		usage: billing.Usage{InputTokens: 1_250_001, OutputTokens: 33_333, ComputeMs: 7_200_001, Tasks: 101},
	}}
	for range 300 {
		cases = append(cases, tc{
			plan: listings.Plan{
				Version:                      1 + rng.IntN(9),
				Currency:                     []string{"usd", "eur", "jpy", "kwd", "krw", "bhd"}[rng.IntN(6)],
				MonthlyFeeMicros:             pick(0, 1, 999_999, 49_000_000, rng.Int64N(1e12)),
				InputTokensPerMillionMicros:  pick(0, 1, 7, 3_000_000, rng.Int64N(1e9)),
				OutputTokensPerMillionMicros: pick(0, 13, 15_000_000, rng.Int64N(1e9)),
				ComputePerHourMicros:         pick(0, 9, 18, 360_000, 1_000_000, 9*rng.Int64N(1e8), rng.Int64N(1e9)),
				PerTaskMicros:                pick(0, 1, 10_000, 333_333, rng.Int64N(1e9)),
				IncludedInputTokens:          pick(0, 1_000_000, rng.Int64N(1e7)),
				IncludedOutputTokens:         pick(0, 200_000, rng.Int64N(1e6)),
				IncludedComputeMs:            pick(0, 3_600_000, rng.Int64N(1e8)),
				IncludedTasks:                pick(0, 100, rng.Int64N(1e4)),
			},
			usage: billing.Usage{
				InputTokens:  pick(0, 1, rng.Int64N(1e6), rng.Int64N(1e10)),
				OutputTokens: pick(0, 1, rng.Int64N(1e6), rng.Int64N(1e9)),
				ComputeMs:    pick(0, 1, rng.Int64N(1e7), 2_592_000_000),
				Tasks:        pick(0, 1, rng.Int64N(1e3), rng.Int64N(1e6)),
			},
		})
	}
	for i, c := range cases {
		inv, err := billing.Rate(c.plan, c.usage, month, month)
		if err != nil {
			t.Fatalf("case %d: Rate: %v", i, err)
		}
		prices := pricesOf(t, c.plan)
		perMinor := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(6-inv.MinorUnitDigits)), nil))
		used := map[billing.LineKind]int64{billing.LineFlatFee: 1, billing.LineInputTokens: c.usage.InputTokens,
			billing.LineOutputTokens: c.usage.OutputTokens, billing.LineCompute: c.usage.ComputeMs, billing.LineTasks: c.usage.Tasks}
		var stripeTotal int64
		fractional := 0
		for _, l := range inv.Lines {
			rated := new(big.Rat).Quo(l.ExactMicros(), perMinor) // Rate's exact line, in minor units
			billed := prices[l.Kind].stripeLine(used[l.Kind])
			diff := new(big.Rat).Sub(billed, rated)
			// Bound of an inexact per-ms price: half of 10^-12 per billable ms.
			bound := big.NewRat(l.Quantity, 2_000_000_000_000)
			if exact := diff.Sign() == 0; !exact && (l.Kind != billing.LineCompute || new(big.Rat).Abs(diff).Cmp(bound) > 0) {
				t.Errorf("case %d %s: Stripe bills %s minor units, Rate %s (plan %+v, used %d, price %s)",
					i, l.Kind, billed.FloatString(15), rated.FloatString(15), c.plan, used[l.Kind], prices[l.Kind].Raw)
			}
			if !rated.IsInt() {
				fractional++
			}
			stripeTotal += roundHalfUp(billed)
		}
		// Stripe rounds each line, Rate the total: at most half a minor
		// unit per fractional line, plus one half, apart.
		if d := stripeTotal - inv.TotalMinor; 2*abs(d) > int64(fractional)+1 {
			t.Errorf("case %d: Stripe's total %d vs Rate's %d: beyond the documented bound (%d fractional lines)", i, stripeTotal, inv.TotalMinor, fractional)
		}
	}
}

func roundHalfUp(r *big.Rat) int64 {
	n := new(big.Int).Add(new(big.Int).Lsh(r.Num(), 1), r.Denom())
	return n.Quo(n, new(big.Int).Lsh(r.Denom(), 1)).Int64()
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestDecimalKeysMatchStripeGo checks the two parameter names the adapter
// writes by hand (decimal amounts go out as strings, not through
// stripe-go's float64 fields) against the names stripe-go's generated
// params encode; stripe-mock does not check names inside tiers[n].
func TestDecimalKeysMatchStripeGo(t *testing.T) {
	typed := &stripego.PriceParams{
		UnitAmountDecimal: stripego.Float64(0.5),
		Tiers:             []*stripego.PriceTierParams{{UpTo: stripego.Int64(1)}, {UnitAmountDecimal: stripego.Float64(0.5)}},
	}
	var v form.Values
	form.AppendTo(&v, typed)
	got := v.ToValues()
	for _, k := range []string{"unit_amount_decimal", "tiers[1][unit_amount_decimal]"} {
		if _, ok := got[k]; !ok {
			t.Errorf("stripe-go encodes no %s (it encodes %v)", k, got)
		}
	}
	p, rec := fakeStripe(t, okJSON)
	plan := listings.Plan{Version: 1, Currency: "usd", InputTokensPerMillionMicros: 1, OutputTokensPerMillionMicros: 1, IncludedOutputTokens: 5}
	if _, err := p.EnsurePlan(context.Background(), "lst_k", "Keys", plan); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range rec.take() {
		for k := range c.Form {
			seen[k] = true
		}
	}
	for _, k := range []string{"unit_amount_decimal", "tiers[1][unit_amount_decimal]"} {
		if !seen[k] {
			t.Errorf("EnsurePlan sent no %s", k)
		}
	}
}
