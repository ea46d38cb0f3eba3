package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/cmd/internal/config"
	"github.com/agentmarket/agentmarket/cmd/internal/serve"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/casbin"
	contractsgorm "github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/aesgcm"
	listingsgorm "github.com/agentmarket/agentmarket/listings/gormstore"
	"github.com/agentmarket/agentmarket/web/api"
)

// run is the whole program: it returns when ctx ends or on a fatal error.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg, err := config.Load("meter", args, getenv, stdout)
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
	authz, err := casbin.New(ctx, accountStore)
	if err != nil {
		return err
	}
	go authz.Run(ctx, cfg.PolicyReload, func(err error) { log.Warn("policy reload failed", "err", err) })
	listingStore := listingsgorm.New(db.DB)
	catalog := &listings.Service{Store: listingStore, Sealer: sealer, Clock: clock}

	usageStore, closeUsage, err := serve.UsageStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeUsage()

	ln, baseURL, err := serve.Listen(cfg.MeterAddr)
	if err != nil {
		return err
	}
	publicURL := cfg.PublicMeterURL
	if publicURL == "" {
		publicURL = baseURL
	}
	ops := api.NewOps("meter")
	ops.Checks = append(ops.Checks, api.Check{Name: "database", Check: db.Ping})

	meterCtx, stopMeter := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMeter()
	meter, err := serve.StartMeter(meterCtx, serve.MeterDeps{Config: cfg, DB: db, Store: usageStore,
		Accounts: &contracts.Accounts{Store: accountStore, Clock: clock}, Authz: authz, Catalog: catalog, Listings: listingStore,
		Registry: ops.Registry, Logger: log, Clock: clock, PublicURL: publicURL})
	if err != nil {
		return err
	}
	defer func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		meter.Close(flushCtx)
	}()

	app := serve.App("meter", func(c *fiber.Ctx, err error) error { return api.WriteError(c, log, err) }, max(4<<20, cfg.MeterLimits.MaxRequestBytes+1, listings.MaxBodyBytes+1))
	app.Use(ops.Middleware)
	ops.Mount(app)
	meter.Proxy.Mount(app)

	fmt.Fprintf(stdout, "AgentMarket meter listening on %s\n", baseURL)
	log.Info("listening", "addr", baseURL)
	return serve.Run(ctx, app, ln)
}
