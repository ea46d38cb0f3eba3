package contracts

import (
	"context"
	"log/slog"
	"time"
)

// AlertSweeper records budgets' spend alerts (Alerts.Evaluate) on a
// schedule.
type AlertSweeper struct {
	Alerts *Alerts
	// Every is the time between two evaluations.
	Every  time.Duration
	Logger *slog.Logger
}

// Run evaluates the alerts at once, then every Every, until ctx ends. A
// failed evaluation is logged and the next one retries.
func (s *AlertSweeper) Run(ctx context.Context) {
	t := time.NewTicker(s.Every)
	defer t.Stop()
	for {
		if n, err := s.Alerts.Evaluate(ctx); err != nil && ctx.Err() == nil {
			s.Logger.Warn("spend alerts not evaluated", "err", err)
		} else if n > 0 {
			s.Logger.Info("spend alerts recorded", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
