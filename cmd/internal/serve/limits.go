package serve

import (
	"context"

	"github.com/agentmarket/agentmarket/cmd/internal/ops"
)

// LimitsCheck is the meter's /readyz entry for where it holds rate limits,
// session caps and budgets (docs/limits.md): shared with every meter
// through Redis, or this meter's own. Down only while Redis fails, when
// the meter holds them on its own (never none, never refusing all).
func LimitsCheck(m *Meter) ops.Check {
	return ops.Check{Name: "admission_limits", Optional: true,
		Impact: "each meter holds rate limits, session caps and budgets on its own until Redis answers: several meters together admit up to their number times a limit",
		Check: func(ctx context.Context) (string, error) {
			shared, ok := m.Proxy.SharedRates.(interface{ Ping(context.Context) error })
			if !ok {
				return "held by this meter on its own (no AGENTMARKET_REDIS_URL): several meters together admit up to their number times a limit", nil
			}
			if err := shared.Ping(ctx); err != nil {
				return "", err
			}
			return "shared by every meter through Redis", nil
		}}
}
