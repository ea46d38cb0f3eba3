package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket/cmd/internal/config"
	"github.com/agentmarket/agentmarket/cmd/internal/serve"
	"github.com/agentmarket/agentmarket/contracts/casbin"
	contractsgorm "github.com/agentmarket/agentmarket/contracts/gormstore"
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
	db, err := serve.OpenDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()

	authz, err := casbin.New(ctx, contractsgorm.New(db.DB))
	if err != nil {
		return err
	}
	go authz.Run(ctx, cfg.PolicyReload, func(err error) { log.Warn("policy reload failed", "err", err) })

	ops := api.NewOps("meter")
	ops.Checks = append(ops.Checks, api.Check{Name: "database", Check: db.Ping})
	app := serve.App("meter", func(c *fiber.Ctx, err error) error { return api.WriteError(c, log, err) }, 1<<20)
	app.Use(ops.Middleware)
	ops.Mount(app)

	ln, baseURL, err := serve.Listen(cfg.MeterAddr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "AgentMarket meter listening on %s\n", baseURL)
	log.Info("listening", "addr", baseURL)
	return serve.Run(ctx, app, ln)
}
