package serve

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentmarket/agentmarket/a2aproxy"
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

// registerEjectionMetrics counts the meter's ejections of agent endpoints
// (a2aproxy/eject.go) and shows how many are ejected now.
func registerEjectionMetrics(reg prometheus.Registerer, p *a2aproxy.Proxy) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "endpoint_ejections_total",
			Help: "Agent endpoints ejected after failed calls in a row (a failed half-open call ejects again)."}, func() float64 { return float64(p.Ejections()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "endpoints_ejected",
			Help: "Agent endpoints ejected now."}, func() float64 { return float64(len(p.Ejected())) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "endpoint_retries_total",
			Help: "Calls sent once more to another agent endpoint because the first accepted nothing (connection or TLS failure, HTTP 502/503 naming no task)."},
			func() float64 { return float64(p.Retries()) }),
	)
}

// EjectedCheck is the meter's /readyz entry for the agent endpoints it
// ejected: always up (the meter serves), its detail listing them.
func EjectedCheck(m *Meter) ops.Check {
	return ops.Check{Name: "agent_endpoints", Optional: true, Check: func(context.Context) (string, error) {
		ej := m.Proxy.Ejected()
		if len(ej) == 0 {
			return "none ejected", nil
		}
		parts := make([]string, len(ej))
		for i, e := range ej {
			shown := e.URL
			if u, err := url.Parse(e.URL); err == nil {
				shown = u.Redacted()
			}
			parts[i] = fmt.Sprintf("%s until %s (%d failed calls in a row)", shown, e.Until.Format(time.RFC3339), e.Fails)
		}
		return fmt.Sprintf("%d ejected: %s", len(ej), strings.Join(parts, "; ")), nil
	}}
}

// KillSwitchCheck is the meter's /readyz entry for its kill switches:
// down (degraded, the meter serves) while it cannot read them.
func KillSwitchCheck(m *Meter) ops.Check {
	return ops.Check{Name: "kill_switches", Optional: true,
		Impact: "the meter keeps the kill switches it last read: one set or lifted meanwhile does not act here",
		Check:  func(context.Context) (string, error) { return m.Proxy.SwitchesHealth() }}
}
