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

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/cmd/internal/config"
	"github.com/agentmarket/agentmarket/cmd/internal/serve"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/casbin"
	contractsgorm "github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/aesgcm"
	listingsgorm "github.com/agentmarket/agentmarket/listings/gormstore"
	"github.com/agentmarket/agentmarket/listings/httpfetch"
	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/web/api"
)

// run is the whole program: it returns when ctx ends or on a fatal error.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg, err := config.Load("marketplace", args, getenv, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log := serve.Logger(cfg, stdout)
	clock := agentmarket.SystemClock{}

	db, err := serve.OpenDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()

	key, err := cfg.SealerKey()
	if err != nil {
		return fmt.Errorf("secret key: %w", err)
	}
	sealer, err := aesgcm.New(key)
	if err != nil {
		return err
	}

	accountStore := contractsgorm.New(db.DB)
	accounts := &contracts.Accounts{Store: accountStore, Clock: clock}
	authz, err := casbin.New(ctx, accountStore)
	if err != nil {
		return err
	}
	go authz.Run(ctx, cfg.PolicyReload, func(err error) { log.Warn("policy reload failed", "err", err) })

	operatorKeyFile, err := ensureOperator(ctx, cfg, accounts)
	if err != nil {
		return err
	}

	listingStore := listingsgorm.New(db.DB)
	catalog := &listings.Service{
		Store: listingStore,
		Fetcher: &httpfetch.Fetcher{
			Guard:   httpfetch.Guard{Allow: cfg.AllowCIDRs()},
			Timeout: cfg.CardFetchTimeout,
		},
		Sealer:         sealer,
		Clock:          clock,
		AutoApprove:    cfg.AutoApproveOn(),
		DefaultRefresh: time.Duration(cfg.CardRefreshSeconds) * time.Second,
	}
	go refreshLoop(ctx, catalog, log)

	ln, baseURL, err := serve.Listen(cfg.Addr)
	if err != nil {
		return err
	}
	publicMeter := cfg.PublicMeterURL
	if publicMeter == "" {
		publicMeter = baseURL // the embedded meter shares the marketplace's address
		if !cfg.EmbeddedMeter {
			publicMeter = "http://" + cfg.MeterAddr
		}
	}

	usageStore, closeUsage, err := serve.UsageStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeUsage()
	subs := &contracts.Subscriptions{Store: accountStore, Listings: serve.CatalogTerms{Catalog: catalog}, Policies: authz, Clock: clock}
	bill, hooks, err := serve.Billing(ctx, cfg, serve.BillingDeps{DB: db, Usage: usageStore, Contracts: accountStore, Listings: listingStore,
		States: subs, Clock: clock, Logger: log})
	if err != nil {
		return err
	}
	subs.Billing = hooks
	go bill.Run(ctx, subs)
	srv := &api.Server{Accounts: accounts, Listings: catalog, Subscriptions: subs, Usage: &metering.Reports{Store: usageStore, Clock: clock},
		Invoices: &billing.Previews{Contracts: subs, Plans: listingStore, Usage: usageStore, Clock: clock},
		Billing:  bill.Service, Webhooks: bill.Webhooks,
		Authorizer: authz, Logger: log, PublicMeterURL: publicMeter}
	ops := api.NewOps("marketplace")
	ops.Checks = append(ops.Checks, api.Check{Name: "database", Check: db.Ping})
	app := serve.App("marketplace", srv.ErrorHandler, max(4<<20, cfg.MeterLimits.MaxRequestBytes+1, listings.MaxBodyBytes+1))
	app.Use(ops.Middleware)
	ops.Mount(app)

	if cfg.EmbeddedMeter {
		meterCtx, stopMeter := context.WithCancel(context.WithoutCancel(ctx))
		meter, err := serve.StartMeter(meterCtx, serve.MeterDeps{Config: cfg, DB: db, Store: usageStore, Accounts: accounts, Authz: authz,
			Catalog: catalog, Listings: listingStore, Registry: ops.Registry, Logger: log, Clock: clock, PublicURL: publicMeter})
		if err != nil {
			stopMeter()
			return err
		}
		defer func() {
			flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			meter.Close(flushCtx)
			stopMeter()
		}()
		meter.Proxy.Mount(app)
	}
	srv.Mount(app)

	if cfg.Demo {
		d := &demo{accounts: accounts, catalog: catalog, subs: subs, dataDir: cfg.DataDir, meterURL: publicMeter, apiURL: baseURL + "/api/v1"}
		if err := d.start(ctx, stdout); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}

	fmt.Fprintf(stdout, "AgentMarket marketplace listening on %s\n", baseURL)
	if cfg.Embedded() {
		fmt.Fprintf(stdout, "  embedded mode: data in %s (SQLite), listings auto-approved=%v\n", cfg.DataDir, cfg.AutoApproveOn())
	}
	if operatorKeyFile != "" {
		fmt.Fprintf(stdout, "  platform operator key written to %s\n", operatorKeyFile)
	}
	fmt.Fprintf(stdout, "  try: curl %s/healthz\n", baseURL)
	log.Info("listening", "addr", baseURL, "embedded", cfg.Embedded())
	return serve.Run(ctx, app, ln)
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
