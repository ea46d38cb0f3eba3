package agentmarket

import "math"

// Bounds of every amount AgentMarket accepts. They are far above what a
// real marketplace charges and far enough below the int64 range that a
// century of usage at the limit still sums exactly: docs/billing.md shows
// the arithmetic. Amounts are micro-units of a currency (1 USD = 1,000,000
// micros); quantities are tokens, milliseconds of compute or tasks.
const (
	// MaxUnitPriceMicros bounds a plan's usage prices: per task, per
	// million input or output tokens, per hour of compute. $10,000 in USD.
	MaxUnitPriceMicros int64 = 10_000_000_000
	// MaxMonthlyFeeMicros bounds a plan's flat monthly fee: $10 million.
	MaxMonthlyFeeMicros int64 = 10_000_000_000_000
	// MaxBudgetMicros bounds a monthly budget of an API key or a
	// contract: $1 billion. A budget that high caps nothing real; saying
	// none does the same.
	MaxBudgetMicros int64 = 1_000_000_000_000_000
	// MaxQuantity bounds a plan's monthly allowances and what an agent can
	// report for one task (each of input tokens, output tokens, compute
	// milliseconds): 10^12, a trillion tokens or 31 years of compute.
	MaxQuantity int64 = 1_000_000_000_000
)

// AddSat returns a + b, saturated at the int64 range instead of wrapping:
// the one overflow rule for sums of money and usage counters in Go (the
// stores saturate their SQL sums at the same bound). A saturated sum reads
// as math.MaxInt64.
func AddSat(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}
