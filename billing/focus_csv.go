package billing

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket"
)

// FocusColumns are the columns of the FOCUS CSV, in order: the FOCUS 1.2
// cost and usage columns (alphabetically, as the specification lists
// them), then AgentMarket's own, prefixed x_ as FOCUS reserves for
// providers. docs/billing.md maps each to where its value comes from.
var FocusColumns = []string{
	"AvailabilityZone", "BilledCost", "BillingAccountId", "BillingAccountName", "BillingAccountType", "BillingCurrency",
	"BillingPeriodEnd", "BillingPeriodStart", "CapacityReservationId", "CapacityReservationStatus", "ChargeCategory",
	"ChargeClass", "ChargeDescription", "ChargeFrequency", "ChargePeriodEnd", "ChargePeriodStart",
	"CommitmentDiscountCategory", "CommitmentDiscountId", "CommitmentDiscountName", "CommitmentDiscountQuantity",
	"CommitmentDiscountStatus", "CommitmentDiscountType", "CommitmentDiscountUnit", "ConsumedQuantity", "ConsumedUnit",
	"ContractedCost", "ContractedUnitPrice", "EffectiveCost", "InvoiceId", "InvoiceIssuerName", "ListCost", "ListUnitPrice",
	"PricingCategory", "PricingCurrency", "PricingCurrencyContractedUnitPrice", "PricingCurrencyEffectiveCost",
	"PricingCurrencyListUnitPrice", "PricingQuantity", "PricingUnit", "ProviderName", "PublisherName", "RegionId",
	"RegionName", "ResourceId", "ResourceName", "ResourceType", "ServiceCategory", "ServiceName", "ServiceSubcategory",
	"SkuId", "SkuMeter", "SkuPriceDetails", "SkuPriceId", "SubAccountId", "SubAccountName", "SubAccountType", "Tags",
	"x_BilledCostMicros", "x_FreeTrial", "x_InvoiceStatus", "x_LineKind", "x_ListingId", "x_PlanVersion",
}

// The constant values of the export.
const (
	focusProvider           = "AgentMarket"
	focusServiceCategory    = "AI and Machine Learning"
	focusServiceSubcategory = "Generative AI"
)

// Record is the row as the FOCUS CSV writes it, one value per
// FocusColumns (empty for null). Costs are decimals of the currency's
// major unit with six places. The columns follow FOCUS 1.2's definitions:
// BilledCost and EffectiveCost are the row's share of the invoice, exactly
// its micros (the allowance, the trial and the one rounding of the
// invoice are in them); PricingQuantity is the volume priced, in
// PricingUnits (what was consumed, for usage; the share of the month, for
// the fee); ListCost and ContractedCost are ListUnitPrice (the plan's
// price) × PricingQuantity, rounded half up to the micro: the usage at
// the plan's prices before its allowance, so a FinOps tool sees what
// tokens inside the allowance are worth.
func (r FocusRow) Record() []string {
	cost, price := decimalMicros(r.CostMicros), decimalMicros(r.UnitPriceMicros)
	priced := r.Quantity
	if r.Usage() {
		priced = r.Consumed
	}
	list := decimalMicros(listMicros(r.UnitPriceMicros, priced, r.PerUnits))
	currency := strings.ToUpper(r.Currency)
	category, frequency := "Purchase", "Recurring"
	var consumed, consumedUnit string
	if r.Usage() {
		category, frequency = "Usage", "Usage-Based"
		consumed, consumedUnit = strconv.FormatInt(r.Consumed, 10), focusUnits[r.Kind][1]
	}
	v := map[string]string{
		"BilledCost": cost, "BillingAccountId": r.BillingAccountID, "BillingAccountName": r.BillingAccountName,
		"BillingAccountType": "Organization", "BillingCurrency": currency,
		"BillingPeriodEnd": focusTime(r.BillingPeriod.End), "BillingPeriodStart": focusTime(r.BillingPeriod.Start),
		"ChargeCategory": category, "ChargeDescription": r.Description, "ChargeFrequency": frequency,
		"ChargePeriodEnd": focusTime(r.ChargePeriod.End), "ChargePeriodStart": focusTime(r.ChargePeriod.Start),
		"ConsumedQuantity": consumed, "ConsumedUnit": consumedUnit,
		"ContractedCost": list, "ContractedUnitPrice": price, "EffectiveCost": cost,
		"InvoiceId": r.InvoiceID, "InvoiceIssuerName": focusProvider, "ListCost": list, "ListUnitPrice": price,
		"PricingCategory": "Standard", "PricingCurrency": currency, "PricingCurrencyContractedUnitPrice": price,
		"PricingCurrencyEffectiveCost": cost, "PricingCurrencyListUnitPrice": price,
		"PricingQuantity": quantity(priced, r.PerUnits), "PricingUnit": focusUnits[r.Kind][0],
		"ProviderName": focusProvider, "PublisherName": r.SellerName,
		"ResourceId": r.ResourceID, "ResourceName": r.ResourceName, "ResourceType": r.ResourceType,
		"ServiceCategory": focusServiceCategory, "ServiceName": r.ListingName, "ServiceSubcategory": focusServiceSubcategory,
		"SkuId": r.ListingID + "/" + string(r.Kind), "SkuMeter": meterName(r.Kind),
		"SkuPriceId":   fmt.Sprintf("%s/v%d/%s", r.ListingID, r.PlanVersion, r.Kind),
		"SubAccountId": r.SubAccountID, "SubAccountName": r.SubAccountName, "SubAccountType": "Subscription",
		"Tags":               string(r.Tags),
		"x_BilledCostMicros": strconv.FormatInt(r.CostMicros, 10), "x_FreeTrial": strconv.FormatBool(r.Trial),
		"x_InvoiceStatus": string(r.Status), "x_LineKind": string(r.Kind), "x_ListingId": r.ListingID,
		"x_PlanVersion": strconv.Itoa(r.PlanVersion),
	}
	out := make([]string, len(FocusColumns))
	for i, c := range FocusColumns {
		out[i] = v[c]
	}
	return out
}

// WriteFocusCSV writes rows as a FOCUS CSV: a header of FocusColumns, then
// one record per row.
func WriteFocusCSV(w io.Writer, rows []FocusRow) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(FocusColumns); err != nil {
		return err
	}
	for _, r := range rows {
		if err := cw.Write(agentmarket.CSVRecord(r.Record())); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// listMicros is price × units / perUnits micros, rounded half up to the
// micro (saturated at the int64 range).
func listMicros(price, units, perUnits int64) int64 {
	if perUnits <= 0 {
		perUnits = 1
	}
	n := new(big.Int).Mul(big.NewInt(price), big.NewInt(units))
	n.Mul(n, big.NewInt(2)).Add(n, big.NewInt(perUnits))
	n.Quo(n, big.NewInt(2*perUnits))
	if !n.IsInt64() {
		return math.MaxInt64
	}
	return n.Int64()
}

// decimalMicros writes an amount of micros as a decimal of the major unit with
// six places ("12.345678"): exact, no rounding.
func decimalMicros(m int64) string {
	sign := ""
	u := uint64(m)
	if m < 0 {
		sign, u = "-", uint64(-m)
	}
	return fmt.Sprintf("%s%d.%06d", sign, u/1_000_000, u%1_000_000)
}

// quantity writes units / perUnits as a decimal: exact when it ends (a
// count of tokens per million does), else to 12 places (the hours of a
// count of milliseconds, the months of a count of seconds). It is a
// quantity, never an amount: costs are never computed from it.
func quantity(units, perUnits int64) string {
	if perUnits <= 1 {
		return strconv.FormatInt(units, 10)
	}
	r := big.NewRat(units, perUnits)
	d := new(big.Int).Set(r.Denom())
	places := 0
	for _, p := range []int64{2, 5} {
		n := 0
		for new(big.Int).Mod(d, big.NewInt(p)).Sign() == 0 {
			d.Quo(d, big.NewInt(p))
			n++
		}
		places = max(places, n)
	}
	if d.Cmp(big.NewInt(1)) != 0 {
		places = 12
	}
	return r.FloatString(places)
}

// focusTime writes a time as FOCUS does: ISO 8601 in UTC, to the
// millisecond when it has one.
func focusTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.999Z07:00")
}
