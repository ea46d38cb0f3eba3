// Package serve holds the wiring both binaries share: the logger, the
// database, and serving a Fiber app until the context ends.
package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket/cmd/internal/config"
	"github.com/agentmarket/agentmarket/migrations/gormdb"
)

// Logger returns a JSON logger at the configured level.
func Logger(cfg *config.Config, out io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel))
	return slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: lvl}))
}

// OpenDB opens PostgreSQL when configured, else the embedded SQLite file in
// the data dir, and applies the migrations.
func OpenDB(ctx context.Context, cfg *config.Config) (*gormdb.DB, error) {
	if cfg.Embedded() {
		return gormdb.OpenSQLite(ctx, filepath.Join(cfg.DataDir, "agentmarket.db"))
	}
	return gormdb.OpenPostgres(ctx, cfg.DatabaseURL)
}

// App returns a Fiber app with the settings both binaries use.
func App(name string, errorHandler fiber.ErrorHandler, bodyLimit int) *fiber.App {
	return fiber.New(fiber.Config{
		AppName:               "agentmarket-" + name,
		DisableStartupMessage: true,
		ErrorHandler:          errorHandler,
		BodyLimit:             bodyLimit,
		ReadTimeout:           30 * time.Second,
		IdleTimeout:           120 * time.Second,
	})
}

// Listen binds addr (port 0 picks a free port) and returns the listener
// and the base URL it serves.
func Listen(addr string) (net.Listener, string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, "http://" + ln.Addr().String(), nil
}

// Run serves app on ln until ctx ends, then shuts down gracefully.
func Run(ctx context.Context, app *fiber.App, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- app.Listener(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	if err := app.ShutdownWithTimeout(10 * time.Second); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
