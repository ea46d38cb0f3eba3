package serve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket/cmd/internal/config"
	"github.com/agentmarket/agentmarket/metering/clickhouse"
	"github.com/agentmarket/agentmarket/web/api"
)

// StartPingTimeout bounds each service's ping at start: a server that
// does not answer by then is reported down, and the process goes on (or
// stops, for a required one).
const StartPingTimeout = 5 * time.Second

// Dependency is a service a process talks to. Each is pinged at start,
// with a line each saying where it is, whether it answered and its
// version, and then by every /readyz.
type Dependency struct {
	Name string // the /readyz key: "database", "usage_store", "stripe"
	// Where says what and where it is, for people, without credentials:
	// "PostgreSQL at db:5432/agentmarket".
	Where string
	// Optional: the process serves while it is down (/readyz "degraded");
	// Impact says what fails meanwhile.
	Optional bool
	Impact   string
	// Ping answers with the server's version.
	Ping func(ctx context.Context) (string, error)
}

// Checks turns deps into /readyz checks.
func Checks(deps []Dependency) []api.Check {
	out := make([]api.Check, len(deps))
	for i, d := range deps {
		out[i] = api.Check{Name: d.Name, Optional: d.Optional, Impact: d.Impact, Check: d.Ping}
	}
	return out
}

// Announce pings every dependency (at once, each within StartPingTimeout)
// and writes a line each to out, and logs it. Unconfigured services get a
// line too (notes), so the banner names every choice the configuration
// made.
func Announce(ctx context.Context, out io.Writer, log *slog.Logger, deps []Dependency, notes ...[2]string) {
	type result struct {
		version string
		err     error
		took    time.Duration
	}
	results := make([]result, len(deps))
	var wg sync.WaitGroup
	for i, d := range deps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, StartPingTimeout)
			defer cancel()
			t0 := time.Now()
			v, err := d.Ping(pctx)
			results[i] = result{v, err, time.Since(t0)}
		}()
	}
	wg.Wait()
	// The lines first, then the log records: both go to stdout.
	for i, d := range deps {
		r := results[i]
		switch {
		case r.err == nil:
			fmt.Fprintf(out, "  %-12s %s: up, %s\n", d.Name, d.Where, r.version)
		case d.Optional:
			fmt.Fprintf(out, "  %-12s %s: DOWN (%s); serving without it: %s\n", d.Name, d.Where, api.SafeCause(r.err), d.Impact)
		default:
			fmt.Fprintf(out, "  %-12s %s: DOWN (%s); /readyz answers 503 until it is back\n", d.Name, d.Where, api.SafeCause(r.err))
		}
	}
	for _, n := range notes {
		fmt.Fprintf(out, "  %-12s %s\n", n[0], n[1])
	}
	for i, d := range deps {
		r := results[i]
		switch {
		case r.err == nil:
			log.Info("dependency up", "check", d.Name, "where", d.Where, "detail", r.version, "took_ms", r.took.Milliseconds())
		case d.Optional:
			log.Warn("dependency down", "check", d.Name, "where", d.Where, "optional", true, "impact", d.Impact, "err", r.err)
		default:
			log.Error("dependency down", "check", d.Name, "where", d.Where, "err", r.err)
		}
	}
}

// CloseStep is the shutdown step that closes what OpenCore opened.
func (c *Core) CloseStep() Step {
	return Step{Name: "close the database and the usage store", Run: func(context.Context) error { c.Close(); return nil }}
}

// databaseWhere names the database cfg uses, without credentials.
func databaseWhere(cfg *config.Config) string {
	if cfg.Embedded() {
		return "SQLite at " + filepath.Join(cfg.DataDir, "agentmarket.db")
	}
	u, err := url.Parse(cfg.DatabaseURL)
	if err != nil {
		return "PostgreSQL"
	}
	return "PostgreSQL at " + u.Host + u.Path
}

// usageWhere names the usage store cfg uses, without credentials.
func usageWhere(cfg *config.Config) string {
	if cfg.ClickHouseURL == "" {
		return "embedded (SQLite) at " + filepath.Join(cfg.DataDir, "usage.db")
	}
	if cfg.ClickHouseCluster != "" {
		return clickhouse.Describe(cfg.ClickHouseURL) + " (cluster " + cfg.ClickHouseCluster + ")"
	}
	return clickhouse.Describe(cfg.ClickHouseURL)
}

// stripeWhere names the Stripe API cfg uses.
func stripeWhere(cfg *config.Config) string {
	if cfg.StripeAPIBase == "" {
		return "Stripe at api.stripe.com"
	}
	u, err := url.Parse(cfg.StripeAPIBase)
	if err != nil {
		return "Stripe"
	}
	return "Stripe at " + strings.TrimSuffix(u.Host+u.Path, "/")
}

// MeterDependencies are a standalone meter's: the core's, the usage store
// with what a meter does without it, and its spool.
func MeterDependencies(core []Dependency, cfg *config.Config, m *Meter) []Dependency {
	deps := append([]Dependency(nil), core...)
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
func spoolDependency(cfg *config.Config, m *Meter) Dependency {
	return Dependency{Name: "spool", Where: "usage spool at " + filepath.Join(cfg.DataDir, "spool"), Ping: func(context.Context) (string, error) {
		// Not ready while the meter cannot record usage (it then refuses
		// calls): a failed fsync, or an append that failed a moment ago.
		if err := m.Proxy.RecordingErr(); err != nil {
			return "", err
		}
		st := m.Spool.Stats()
		return fmt.Sprintf("%d rows (%d bytes) waiting to ship", st.Rows, st.Bytes), nil
	}}
}
