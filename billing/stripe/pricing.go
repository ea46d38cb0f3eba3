package stripe

import (
	"math/big"
	"strconv"
	"strings"

	stripego "github.com/stripe/stripe-go/v76"

	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/listings"
)

// decimalPlaces is how many decimals Stripe keeps of unit_amount_decimal.
const decimalPlaces = 12

// unitPrice is the price of one unit in the currency's minor unit: Whole
// when it is a whole number of minor units (Stripe's unit_amount), else
// Decimal (unit_amount_decimal). Exact is false when the price has no
// finite decimal and Decimal is rounded half up at the 12th place.
type unitPrice struct {
	IsWhole bool
	Whole   int64
	Decimal string
	Exact   bool
}

// minorUnitPrice converts a price of perUnits units in micros to the price
// of one unit in minor units of a currency with digits decimals:
// priceMicros / perUnits / 10^(6−digits), with integer arithmetic only.
func minorUnitPrice(priceMicros, perUnits int64, digits int) unitPrice {
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(decimalPlaces), nil)
	num := new(big.Int).Mul(big.NewInt(priceMicros), scale)
	den := new(big.Int).Mul(big.NewInt(perUnits),
		new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(6-digits)), nil))
	q, r := new(big.Int).QuoRem(num, den, new(big.Int))
	p := unitPrice{Exact: r.Sign() == 0}
	if new(big.Int).Lsh(r, 1).Cmp(den) >= 0 { // half up
		q.Add(q, big.NewInt(1))
	}
	whole, frac := new(big.Int).QuoRem(q, scale, new(big.Int))
	if frac.Sign() == 0 {
		// whole ≤ priceMicros (perUnits ≥ 1, digits ≤ 6): fits an int64.
		p.IsWhole, p.Whole = true, whole.Int64()
		return p
	}
	f := frac.String()
	f = strings.Repeat("0", decimalPlaces-len(f)) + f
	p.Decimal = whole.String() + "." + strings.TrimRight(f, "0")
	return p
}

// meteredTerms is one usage line of a plan: its unit price per perUnits
// units and the units included each period.
type meteredTerms struct {
	priceMicros, perUnits, included int64
	nickname                        string
}

func terms(plan listings.Plan, kind billing.LineKind) meteredTerms {
	switch kind {
	case billing.LineInputTokens:
		return meteredTerms{plan.InputTokensPerMillionMicros, 1_000_000, plan.IncludedInputTokens, "Input tokens, per token"}
	case billing.LineOutputTokens:
		return meteredTerms{plan.OutputTokensPerMillionMicros, 1_000_000, plan.IncludedOutputTokens, "Output tokens, per token"}
	case billing.LineCompute:
		return meteredTerms{plan.ComputePerHourMicros, 3_600_000, plan.IncludedComputeMs, "Compute, per millisecond"}
	default: // billing.LineTasks
		return meteredTerms{plan.PerTaskMicros, 1, plan.IncludedTasks, "Tasks, per task"}
	}
}

// flatPriceParams is the plan's monthly fee: a licensed monthly price.
func flatPriceParams(productID string, plan listings.Plan, digits int) *stripego.PriceParams {
	p := &stripego.PriceParams{
		Currency:      stripego.String(plan.Currency),
		Product:       stripego.String(productID),
		Nickname:      stripego.String("Monthly fee, plan v" + strconv.Itoa(plan.Version)),
		BillingScheme: stripego.String(string(stripego.PriceBillingSchemePerUnit)),
		Recurring: &stripego.PriceRecurringParams{
			Interval:  stripego.String(string(stripego.PriceRecurringIntervalMonth)),
			UsageType: stripego.String(string(stripego.PriceRecurringUsageTypeLicensed)),
		},
	}
	setUnitAmount(&p.Params, &p.UnitAmount, "unit_amount_decimal", minorUnitPrice(plan.MonthlyFeeMicros, 1, digits))
	return p
}

// meteredPriceParams is one usage line: a metered monthly price summing
// the reported usage, per unit, with the allowance as a free first tier.
func meteredPriceParams(productID string, plan listings.Plan, kind billing.LineKind, digits int) *stripego.PriceParams {
	t := terms(plan, kind)
	p := &stripego.PriceParams{
		Currency: stripego.String(plan.Currency),
		Product:  stripego.String(productID),
		Nickname: stripego.String(t.nickname + ", plan v" + strconv.Itoa(plan.Version)),
		Recurring: &stripego.PriceRecurringParams{
			Interval:       stripego.String(string(stripego.PriceRecurringIntervalMonth)),
			UsageType:      stripego.String(string(stripego.PriceRecurringUsageTypeMetered)),
			AggregateUsage: stripego.String(string(stripego.PriceRecurringAggregateUsageSum)),
		},
	}
	price := minorUnitPrice(t.priceMicros, t.perUnits, digits)
	if t.included == 0 {
		p.BillingScheme = stripego.String(string(stripego.PriceBillingSchemePerUnit))
		setUnitAmount(&p.Params, &p.UnitAmount, "unit_amount_decimal", price)
		return p
	}
	p.BillingScheme = stripego.String(string(stripego.PriceBillingSchemeTiered))
	p.TiersMode = stripego.String(string(stripego.PriceTiersModeGraduated))
	free := &stripego.PriceTierParams{UpTo: stripego.Int64(t.included), UnitAmount: stripego.Int64(0)}
	paid := &stripego.PriceTierParams{UpToInf: stripego.Bool(true)}
	setUnitAmount(&p.Params, &paid.UnitAmount, "tiers[1][unit_amount_decimal]", price)
	p.Tiers = []*stripego.PriceTierParams{free, paid}
	return p
}

// setUnitAmount sets a whole price on the typed field, and a fractional one
// as the decimal string itself: stripe-go's unit_amount_decimal fields are
// float64, which cannot hold most decimals exactly.
func setUnitAmount(params *stripego.Params, whole **int64, decimalKey string, p unitPrice) {
	if p.IsWhole {
		*whole = stripego.Int64(p.Whole)
		return
	}
	params.AddExtra(decimalKey, p.Decimal)
}
