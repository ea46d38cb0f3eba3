package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/agentmarket/agentmarket/cmd/internal/config"
	"github.com/agentmarket/agentmarket/cmd/internal/httpserver"
	"github.com/agentmarket/agentmarket/cmd/internal/ops"
	"github.com/agentmarket/agentmarket/cmd/internal/serve"
)

// run is the whole program: it returns when ctx ends or on a fatal error.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg, err := config.Load("meter", serve.ConfigFormats(), args, getenv, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log, flushLog := serve.Logger(cfg, stdout)
	defer flushLog()
	core, err := serve.OpenCore(ctx, cfg, log, serve.WithService("meter"))
	if err != nil {
		return err
	}
	defer core.Close()

	ln, baseURL, err := httpserver.Listen(cfg.MeterAddr)
	if err != nil {
		return err
	}
	publicURL := cfg.PublicMeterURL
	if publicURL == "" {
		publicURL = baseURL
	}
	endpoints := ops.New("meter")
	endpoints.Log = log

	meterCtx, stopMeter := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMeter()
	meter, err := serve.StartMeter(meterCtx, serve.MeterDeps{Config: cfg, DB: core.DB, Store: core.Usage, Shared: core.Shared,
		Accounts: core.Accounts, Authz: core.Authz, Catalog: core.Catalog, Listings: core.ListingStore, Sealer: core.Sealer, PushKeys: core.PushKeys, CardKeys: core.CardKeys,
		Registry: endpoints.Registry, Logger: log, Clock: core.Clock, PublicURL: publicURL, Dialer: core.Dialer, Traces: core.Traces})
	if err != nil {
		return err
	}
	defer func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		meter.Close(flushCtx)
	}()
	deps := serve.MeterDependencies(core.Dependencies, cfg, meter)
	endpoints.Checks = append(ops.Checks(deps), serve.EjectedCheck(meter), serve.LimitsCheck(meter), serve.KillSwitchCheck(meter))

	app := serve.App("meter", serve.RESTErrors(log), core.MeterBodyLimit())
	app.Use(endpoints.Middleware)
	serve.MountOps(cfg, endpoints, app)
	meter.Proxy.Mount(app)
	// The meter's routes are served ahead of Fiber (a2aproxy.Front).
	app.Server().Handler = meter.Proxy.Front(app.Server().Handler)
	servers := []httpserver.Server{{App: app, Listener: ln}}
	opsServer, opsURL, err := serve.ListenOps(cfg, "meter", endpoints, log)
	if err != nil {
		ln.Close()
		return err
	}
	if opsServer != nil {
		servers = append(servers, *opsServer)
	}

	fmt.Fprintf(stdout, "AgentMarket meter listening on %s\n", baseURL)
	ops.Announce(ctx, stdout, log, deps, serve.MetricsNote(baseURL, opsURL),
		[2]string{"public URL", publicURL + "/a2a/{listing} (written into proxied cards)"})
	log.Info("listening", "addr", baseURL)
	return httpserver.Serve(ctx, servers, log, cfg.ShutdownTimeout,
		httpserver.Step{Name: "meter: ship the usage spool", Run: func(ctx context.Context) error {
			defer stopMeter()
			return serve.CloseMeter(ctx, meter)
		}}, core.CloseStep())
}
