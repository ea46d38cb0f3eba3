package billing_test

import (
	"math/big"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/listings"
)

// The properties run on random but seeded input, so a failure reproduces.
const propertyRuns = 5000

var propertyCurrencies = []string{"usd", "eur", "gbp", "jpy", "krw", "clp", "bhd", "kwd", "tnd"}

// magnitude draws a count or price across scales, zero included, staying
// far enough from the int64 limit that most draws rate.
func magnitude(r *rand.Rand) int64 {
	switch r.IntN(5) {
	case 0:
		return 0
	case 1:
		return r.Int64N(1_000)
	case 2:
		return r.Int64N(1_000_000)
	case 3:
		return r.Int64N(1_000_000_000)
	default:
		return r.Int64N(1_000_000_000_000)
	}
}

type ratingInput struct {
	plan           listings.Plan
	usage          billing.Usage
	billed, active billing.Period
}

func randomInput(r *rand.Rand) ratingInput {
	plan := listings.Plan{
		Currency:                     propertyCurrencies[r.IntN(len(propertyCurrencies))],
		MonthlyFeeMicros:             magnitude(r),
		InputTokensPerMillionMicros:  magnitude(r) / 100, // within agentmarket.MaxUnitPriceMicros
		OutputTokensPerMillionMicros: magnitude(r) / 100,
		ComputePerHourMicros:         magnitude(r) / 100,
		PerTaskMicros:                magnitude(r) / 1_000_000,
		IncludedInputTokens:          magnitude(r),
		IncludedOutputTokens:         magnitude(r),
		IncludedComputeMs:            magnitude(r),
		IncludedTasks:                magnitude(r),
	}
	usage := billing.Usage{InputTokens: magnitude(r), OutputTokens: magnitude(r), ComputeMs: magnitude(r), Tasks: magnitude(r)}
	billed := billing.MonthOf(date(2024+r.IntN(6), time.Month(1+r.IntN(12)), 1))
	return ratingInput{plan, usage, billed, randomActive(r, billed)}
}

// randomActive is a span overlapping billed by at least a whole second:
// it may start before it, end after it, or both, and has sub-second ends.
func randomActive(r *rand.Rand, billed billing.Period) billing.Period {
	length := billed.End.Sub(billed.Start)
	start := billed.Start.Add(time.Duration(r.Int64N(int64(length - time.Second))))
	if r.IntN(3) == 0 {
		start = billed.Start.Add(-time.Duration(r.Int64N(int64(length))))
	}
	end := maxTime(start, billed.Start).Add(time.Second + time.Duration(r.Int64N(int64(length))))
	if r.IntN(3) == 0 {
		end = billed.End.Add(time.Duration(r.Int64N(int64(length))))
	}
	return billing.Period{Start: start, End: end}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func perMinor(digits int) *big.Rat {
	return new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(6-digits)), nil))
}

// rateOK rates in, failing the test on an error.
func rateOK(t *testing.T, in ratingInput) *billing.Invoice {
	t.Helper()
	inv, err := billing.Rate(in.plan, in.usage, in.billed, in.active)
	if err != nil {
		t.Fatalf("Rate(%+v): %v", in, err)
	}
	return inv
}

// The lines' minor amounts sum to the total; each is its exact amount
// rounded down or up; the exact lines sum to the exact subtotal; and the
// total is the subtotal rounded to within half a minor unit.
func TestPropertyLinesSumToTotal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	half := big.NewRat(1, 2)
	for range propertyRuns {
		in := randomInput(r)
		inv := rateOK(t, in)
		unit := perMinor(inv.MinorUnitDigits)
		var sumMinor int64
		sumExact := new(big.Rat)
		for _, l := range inv.Lines {
			sumMinor += l.AmountMinor
			sumExact.Add(sumExact, l.ExactMicros())
			f := l.AmountFraction
			if f.Den < 1 || f.Num < 0 || f.Num >= f.Den || big.NewRat(f.Num, f.Den).Denom().Int64() != f.Den {
				t.Fatalf("%+v: line %s fraction %v is not a reduced proper fraction", in, l.Kind, f)
			}
			// |AmountMinor − exact in minor units| < 1.
			diff := new(big.Rat).Sub(new(big.Rat).SetInt64(l.AmountMinor), new(big.Rat).Quo(l.ExactMicros(), unit))
			if diff.Abs(diff).Cmp(big.NewRat(1, 1)) >= 0 {
				t.Fatalf("%+v: line %s minor %d is a unit or more from its exact amount %s micros", in, l.Kind, l.AmountMinor, l.ExactMicros())
			}
		}
		if sumMinor != inv.TotalMinor {
			t.Fatalf("%+v: lines sum to %d minor units, total is %d", in, sumMinor, inv.TotalMinor)
		}
		if sumExact.Cmp(inv.ExactMicros()) != 0 {
			t.Fatalf("%+v: exact lines sum to %s micros, subtotal is %s", in, sumExact, inv.ExactMicros())
		}
		diff := new(big.Rat).Sub(new(big.Rat).SetInt64(inv.TotalMinor), new(big.Rat).Quo(inv.ExactMicros(), unit))
		if diff.Cmp(half) >= 0 || diff.Cmp(new(big.Rat).Neg(half)) < 0 {
			t.Fatalf("%+v: total %d is not the subtotal %s micros rounded half up", in, inv.TotalMinor, inv.ExactMicros())
		}
	}
}

// More of any counter never costs less, in total or on its line.
func TestPropertyMoreUsageNeverCostsLess(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	counters := []struct {
		line billing.LineKind
		ptr  func(*billing.Usage) *int64
	}{
		{billing.LineInputTokens, func(u *billing.Usage) *int64 { return &u.InputTokens }},
		{billing.LineOutputTokens, func(u *billing.Usage) *int64 { return &u.OutputTokens }},
		{billing.LineCompute, func(u *billing.Usage) *int64 { return &u.ComputeMs }},
		{billing.LineTasks, func(u *billing.Usage) *int64 { return &u.Tasks }},
	}
	for range propertyRuns {
		in := randomInput(r)
		before := rateOK(t, in)
		for i, c := range counters {
			more := in
			*c.ptr(&more.usage) += 1 + magnitude(r)/int64(1+r.IntN(1_000))
			after := rateOK(t, more)
			if after.TotalMinor < before.TotalMinor || after.ExactMicros().Cmp(before.ExactMicros()) < 0 {
				t.Fatalf("%+v: more %s (%+v) cost less: %d < %d", in, c.line, more.usage, after.TotalMinor, before.TotalMinor)
			}
			if after.Lines[i+1].ExactMicros().Cmp(before.Lines[i+1].ExactMicros()) < 0 {
				t.Fatalf("%+v: more %s made its line cheaper", in, c.line)
			}
		}
	}
}

// A longer active span in the same period never costs less.
func TestPropertyLongerActiveNeverCostsLess(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for range propertyRuns {
		in := randomInput(r)
		before := rateOK(t, in)
		longer := in
		longer.active.Start = in.active.Start.Add(-time.Duration(r.Int64N(int64(20 * 24 * time.Hour))))
		longer.active.End = in.active.End.Add(time.Duration(r.Int64N(int64(20 * 24 * time.Hour))))
		after := rateOK(t, longer)
		if after.TotalMinor < before.TotalMinor || after.ExactMicros().Cmp(before.ExactMicros()) < 0 {
			t.Fatalf("%+v: active %v costs %d, shorter %v costs %d", in, longer.active, after.TotalMinor, in.active, before.TotalMinor)
		}
	}
}

// Rating the same input twice, or with the same instants in another time
// zone, gives the same invoice.
func TestPropertyDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	zone := time.FixedZone("UTC-7", -7*3600)
	in := func(p billing.Period) billing.Period {
		return billing.Period{Start: p.Start.In(zone), End: p.End.In(zone)}
	}
	for range propertyRuns {
		x := randomInput(r)
		first, second := rateOK(t, x), rateOK(t, x)
		zoned := rateOK(t, ratingInput{x.plan, x.usage, in(x.billed), in(x.active)})
		if !reflect.DeepEqual(first, second) || !reflect.DeepEqual(first, zoned) {
			t.Fatalf("%+v rated differently:\n%+v\n%+v\n%+v", x, first, second, zoned)
		}
	}
}

// Near the limit every input either rates or is refused as out of range:
// never a wrapped, negative or smaller amount. Prices are bounded, so the
// limit is reached by usage sums near 2^63 (a saturated sum is 2^63-1).
func TestPropertyNoWrapNearTheLimit(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	big63 := func() int64 { return 1<<62 + r.Int64N(1<<62) }
	var rated, refused int
	for range propertyRuns {
		in := randomInput(r)
		in.plan.MonthlyFeeMicros = agentmarket.MaxMonthlyFeeMicros - r.Int64N(1000)
		switch r.IntN(4) {
		case 0:
			in.usage.Tasks, in.plan.PerTaskMicros = big63(), r.Int64N(4)
		case 1:
			in.usage.InputTokens, in.plan.InputTokensPerMillionMicros = big63(), r.Int64N(4_000_000)
		case 2:
			in.usage.ComputeMs, in.plan.ComputePerHourMicros = big63(), r.Int64N(8_000_000)
		default:
			in.usage.OutputTokens, in.plan.OutputTokensPerMillionMicros = big63(), r.Int64N(3_000_000)
		}
		inv, err := billing.Rate(in.plan, in.usage, in.billed, in.active)
		if err != nil {
			fieldRules(t, err, "amount_out_of_range")
			refused++
			continue
		}
		rated++
		if inv.TotalMinor < 0 || inv.SubtotalMicros < 0 {
			t.Fatalf("%+v: negative amounts %d, %d", in, inv.SubtotalMicros, inv.TotalMinor)
		}
		for _, l := range inv.Lines {
			if l.AmountMicros < 0 || l.AmountMicros > inv.SubtotalMicros {
				t.Fatalf("%+v: line %s of %d micros, subtotal %d", in, l.Kind, l.AmountMicros, inv.SubtotalMicros)
			}
		}
	}
	if rated == 0 || refused == 0 {
		t.Errorf("rated %d, refused %d: the draws do not straddle the limit", rated, refused)
	}
}
