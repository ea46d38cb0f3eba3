package serve

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentmarket/agentmarket/cmd/internal/ops"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/httpfetch"
)

// startHealthChecks starts the active health checks of published
// listings' agents (AGENTMARKET_HEALTH_CHECK_INTERVAL; 0: none), counting
// the probes by result in the marketplace's /metrics.
func startHealthChecks(ctx context.Context, c *Core, o *ops.Ops, alerter listings.DownAlerter) {
	every := c.Config.HealthCheckInterval
	if every <= 0 {
		return
	}
	probes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "agentmarket", Subsystem: "marketplace", Name: "health_probes_total",
		Help: "Active health probes of listings' agents, by result (up: a well-formed A2A answer; down: none).",
	}, []string{"result"})
	o.Registry.MustRegister(probes)
	up, down := probes.WithLabelValues("up"), probes.WithLabelValues("down")
	checker := &listings.Checker{Store: c.ListingStore, Catalog: c.Catalog, Alerter: alerter, Clock: c.Clock, Every: every,
		Prober: &httpfetch.Prober{Guard: Guard(c.Config, c.Dialer), Dialer: c.Dialer, Timeout: min(every, httpfetch.DefaultProbeTimeout)},
		Observe: func(ok bool) {
			if ok {
				up.Inc()
			} else {
				down.Inc()
			}
		}}
	go checker.Run(ctx, c.Log.Warn)
}
