package agentmarket

import "math"

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
