package serve

import (
	"context"
	"strconv"

	"github.com/agentmarket/agentmarket/cmd/internal/ops"
)

// LimitsCheck is the meter's /readyz entry for where it holds rate limits,
// session caps and budgets (docs/limits.md): shared with every meter
// through Redis, or this meter's own. Down only while Redis fails, when
// the meter holds them on its own (never none, never refusing all).
func LimitsCheck(m *Meter) ops.Check {
	return ops.Check{Name: "admission_limits", Optional: true,
		Impact: "each meter holds rate limits, session caps, budgets and credit on its own until Redis answers, at its share of each (AGENTMARKET_METER_LIMIT_SHARE; at the default of 1 several meters together admit up to their number times a limit)",
		Check: func(ctx context.Context) (string, error) {
			shared, ok := m.Proxy.SharedRates.(interface{ Ping(context.Context) error })
			if !ok {
				return "held by this meter on its own (no AGENTMARKET_REDIS_URL): " + shareSaid(m.Proxy.Limits.LocalShare), nil
			}
			if err := shared.Ping(ctx); err != nil {
				return "", err
			}
			return "shared by every meter through Redis", nil
		}}
}

// shareSaid says what each meter admits of a limit it holds on its own
// (AGENTMARKET_METER_LIMIT_SHARE).
func shareSaid(share float64) string {
	if share <= 0 || share >= 1 {
		return "each meter admits the whole of each limit, so several meters together admit up to their number times it (AGENTMARKET_METER_LIMIT_SHARE=1/N keeps them within it)"
	}
	return "each meter admits " + strconv.FormatFloat(share, 'g', 4, 64) + " of each limit (AGENTMARKET_METER_LIMIT_SHARE)"
}
