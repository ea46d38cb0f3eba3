package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/agentmarket/agentmarket/cmd/internal/config"
	"github.com/agentmarket/agentmarket/cmd/internal/demoagent"
	"github.com/agentmarket/agentmarket/cmd/internal/httpserver"
	"github.com/agentmarket/agentmarket/cmd/internal/ops"
	"github.com/agentmarket/agentmarket/cmd/internal/serve"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
)

// run is the whole program: it returns when ctx ends or on a fatal error.
// opts adjust the core (tests: the dialer toward agents).
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, opts ...serve.Option) error {
	cfg, err := config.Load("marketplace", serve.ConfigFormats(), args, getenv, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log, flushLog := serve.Logger(cfg, stdout)
	defer flushLog()
	core, err := serve.OpenCore(ctx, cfg, log, opts...)
	if err != nil {
		return err
	}
	defer core.Close()
	operatorKeyFile, err := ensureOperator(ctx, cfg, core.Accounts)
	if err != nil {
		return err
	}
	go refreshLoop(ctx, core.Catalog, log)

	ln, baseURL, err := httpserver.Listen(cfg.Addr)
	if err != nil {
		return err
	}
	market, err := serve.NewMarketplace(ctx, core, baseURL)
	if err != nil {
		ln.Close()
		return err
	}
	defer market.Close()
	servers := []httpserver.Server{{App: market.App, Listener: ln}}
	opsServer, opsURL, err := serve.ListenOps(cfg, "marketplace", market.Ops, log)
	if err != nil {
		ln.Close()
		return err
	}
	if opsServer != nil {
		servers = append(servers, *opsServer)
	}

	var d *demo
	if cfg.Demo {
		d = &demo{accounts: core.Accounts, catalog: core.Catalog, subs: market.Subscriptions, dataDir: cfg.DataDir,
			meterURL: market.PublicMeterURL, apiURL: baseURL + "/api/v1", webURL: baseURL, operatorKey: cfg.OperatorKey != ""}
		d.addrs, err = cfg.DemoAddrs(len(demoagent.Presets()))
		if err == nil {
			err = d.start(ctx)
		}
		// Stopped before run returns, so that a restart finds their ports free.
		defer d.close()
		if err != nil {
			for _, s := range servers {
				s.Listener.Close()
			}
			return fmt.Errorf("demo: %w", err)
		}
	}

	fmt.Fprintf(stdout, "AgentMarket marketplace listening on %s\n", baseURL)
	ops.Announce(ctx, stdout, log, market.Dependencies, banner(cfg, market.PublicMeterURL, baseURL, opsURL)...)
	if operatorKeyFile != "" {
		fmt.Fprintf(stdout, "  platform operator key written to %s\n", operatorKeyFile)
	}
	fmt.Fprintf(stdout, "  web UI: %s/   API: %s/api/v1/openapi.json\n", baseURL, baseURL)
	fmt.Fprintf(stdout, "  try: curl %s/readyz\n", baseURL)
	if d != nil {
		d.print(stdout)
	}
	log.Info("listening", "addr", baseURL, "embedded", cfg.Embedded())
	return httpserver.Serve(ctx, servers, log, cfg.ShutdownTimeout,
		httpserver.Step{Name: "embedded meter: ship the usage spool", Run: market.Stop}, core.CloseStep())
}

// banner names the choices the configuration made that are no service to
// ping: billing without Stripe, where the meter runs, listing review,
// where /metrics is.
func banner(cfg *config.Config, meterURL, baseURL, opsURL string) [][2]string {
	var notes [][2]string
	if cfg.StripeSecretKey == "" {
		notes = append(notes, [2]string{"stripe", "not configured: billing on the platform's own ledger"})
	}
	if cfg.EmbeddedMeter {
		notes = append(notes, [2]string{"meter", "embedded in this process, at " + meterURL + "/a2a/{listing}"})
	} else {
		notes = append(notes, [2]string{"meter", "separate (cmd/meter); buyers reach it at " + meterURL})
	}
	review := "new ones are published at once (auto-approve)"
	if !cfg.AutoApproveOn() {
		review = "new ones wait for the operator's review (PATCH /api/v1/listings/{id} {\"status\":\"published\"})"
	}
	return append(notes, [2]string{"listings", review}, serve.MailNote(cfg), serve.MetricsNote(baseURL, opsURL))
}

// ensureOperator creates the platform org on first start. Its first key is
// the configured one, or a generated one written (0600) into the data dir.
func ensureOperator(ctx context.Context, cfg *config.Config, accounts *contracts.Accounts) (string, error) {
	_, secret, err := accounts.EnsurePlatform(ctx, cfg.OperatorKey)
	if err != nil {
		return "", fmt.Errorf("platform org: %w", err)
	}
	if secret == "" || cfg.OperatorKey != "" {
		return "", nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(cfg.DataDir, "operator.key")
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write operator key: %w", err)
	}
	return path, nil
}

// refreshLoop re-fetches cards whose refresh time has come.
func refreshLoop(ctx context.Context, catalog *listings.Service, log interface {
	Warn(msg string, args ...any)
}) {
	t := time.NewTicker(15 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := catalog.RefreshDue(ctx); err != nil && ctx.Err() == nil {
				log.Warn("card refresh failed", "err", err)
			}
		}
	}
}
