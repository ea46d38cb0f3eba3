package ops

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
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
func Checks(deps []Dependency) []Check {
	out := make([]Check, len(deps))
	for i, d := range deps {
		out[i] = Check{Name: d.Name, Optional: d.Optional, Impact: d.Impact, Check: d.Ping}
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
			fmt.Fprintf(out, "  %-12s %s: DOWN (%s); serving without it: %s\n", d.Name, d.Where, SafeCause(r.err), d.Impact)
		default:
			fmt.Fprintf(out, "  %-12s %s: DOWN (%s); /readyz answers 503 until it is back\n", d.Name, d.Where, SafeCause(r.err))
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
