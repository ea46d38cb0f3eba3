package serve

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket/cmd/internal/config"
	"github.com/agentmarket/agentmarket/cmd/internal/httpserver"
	"github.com/agentmarket/agentmarket/cmd/internal/ops"
	"github.com/agentmarket/agentmarket/web/api"
)

// StartPingTimeout is ops.StartPingTimeout: opening the usage store
// waits as long as a ping at start does.
const StartPingTimeout = ops.StartPingTimeout

// CloseStep is the shutdown step that closes what OpenCore opened.
func (c *Core) CloseStep() httpserver.Step {
	return httpserver.Step{Name: "close the database and the usage store", Run: func(context.Context) error { c.Close(); return nil }}
}

// MeterDependencies are a standalone meter's: the core's, the usage store
// with what a meter does without it, and its spool.
func MeterDependencies(core []ops.Dependency, cfg *config.Config, m *Meter) []ops.Dependency {
	deps := append([]ops.Dependency(nil), core...)
	for i := range deps {
		switch deps[i].Name {
		case "usage_store":
			deps[i].Impact = "calls go on; their usage waits in the spool and ships when it answers; budget checks fail meanwhile"
		case "database":
			// The meter's call path reads no database in steady state: it
			// goes on with what it last read (up to 10 minutes), binds new
			// tasks in memory and projects them when the database is back.
			deps[i].Optional = true
			deps[i].Impact = "calls go on with the keys, listings, contracts and grants last read (10 min at most); their bindings and bills wait in the spool and are applied when it answers; revocations made meanwhile wait for it too"
		}
	}
	return append(deps, spoolDependency(cfg, m))
}

// spoolDependency reports the meter's spool: how much usage waits for the
// store, or the failure that stopped the spool (then no call can be
// metered, and the meter is not ready).
func spoolDependency(cfg *config.Config, m *Meter) ops.Dependency {
	return ops.Dependency{Name: "spool", Where: "usage spool at " + filepath.Join(cfg.DataDir, "spool"), Ping: func(context.Context) (string, error) {
		// Not ready while the meter cannot record usage (it then refuses
		// calls): a failed fsync, or an append that failed a moment ago.
		if err := m.Proxy.RecordingErr(); err != nil {
			return "", err
		}
		st := m.Spool.Stats()
		return fmt.Sprintf("%d rows (%d bytes) waiting to ship", st.Rows, st.Bytes), nil
	}}
}

// MountOps adds a binary's ops endpoints to its public app: /healthz and
// /readyz (the probes and load balancers ask there), and /metrics unless
// the configuration names an operator listener for it (ListenOps), where
// only the operator reaches it: the series name every listing.
func MountOps(cfg *config.Config, o *ops.Ops, app *fiber.App) {
	o.MountProbes(app)
	if cfg.MetricsAddr == "" {
		o.MountMetrics(app)
	}
}

// ListenOps binds the operator listener AGENTMARKET_METRICS_ADDR and
// returns the server of o's /metrics, /healthz and /readyz there, and its
// base URL; nil when the configuration names none.
func ListenOps(cfg *config.Config, name string, o *ops.Ops, log *slog.Logger) (*httpserver.Server, string, error) {
	if cfg.MetricsAddr == "" {
		return nil, "", nil
	}
	ln, url, err := httpserver.Listen(cfg.MetricsAddr)
	if err != nil {
		return nil, "", fmt.Errorf("operator listener (AGENTMARKET_METRICS_ADDR): %w", err)
	}
	app := httpserver.New(name+"-ops", RESTErrors(log), httpserver.BodyLimits{Large: api.MaxBodyBytes, Default: api.MaxBodyBytes})
	o.Mount(app)
	return &httpserver.Server{App: app, Listener: ln}, url, nil
}

// MetricsNote is the start banner's line saying where /metrics is served:
// on the operator listener opsURL, or (empty) on the public one, baseURL.
func MetricsNote(baseURL, opsURL string) [2]string {
	if opsURL == "" {
		return [2]string{"metrics", baseURL + "/metrics, on the public listener (AGENTMARKET_METRICS_ADDR serves it apart)"}
	}
	return [2]string{"metrics", opsURL + "/metrics, on the operator listener only"}
}
