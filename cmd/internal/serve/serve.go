// Package serve holds the wiring both binaries share: the logger, the
// database, the stores and services over it, the meter, the marketplace,
// and their Fiber apps (served by httpserver).
package serve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/cmd/internal/config"
	"github.com/agentmarket/agentmarket/cmd/internal/httpserver"
	"github.com/agentmarket/agentmarket/migrations/relational"
	"github.com/agentmarket/agentmarket/web/api"
)

// Logger returns a JSON logger at the configured level, and the function
// that writes out the lines it buffered (lineBuffer) and stops buffering:
// call it when the program ends.
func Logger(cfg *config.Config, out io.Writer) (*slog.Logger, func()) {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel))
	w, flush := bufferedLog(out)
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})), flush
}

// OpenDB opens PostgreSQL when configured, else the embedded SQLite file in
// the data dir, and applies the migrations.
func OpenDB(ctx context.Context, cfg *config.Config) (*relational.DB, error) {
	if cfg.Embedded() {
		return relational.OpenSQLite(ctx, filepath.Join(cfg.DataDir, "agentmarket.db"))
	}
	return relational.OpenPostgres(ctx, cfg.DatabaseURL)
}

// RESTErrors answers a binary's errors outside the REST API (the meter's
// routes that are not JSON-RPC, /readyz, a refused request) with the REST
// API's one mapping, api.WriteError.
func RESTErrors(log *slog.Logger) fiber.ErrorHandler {
	return func(c *fiber.Ctx, err error) error { return api.WriteError(c, log, err) }
}

// meterPaths are the path prefixes the meter serves (a2aproxy.Proxy.Mount):
// buyers' calls and agents' push callbacks, whose bodies the meter limits
// per listing and answers in JSON-RPC.
var meterPaths = []string{"/a2a/", a2aproxy.CallbackPath}

// App returns a Fiber app with the settings both binaries use: the
// meter's paths take bodies up to meterBodyLimit (the largest any listing
// may allow, so its own limit answers in JSON-RPC), everything else, the
// control plane, up to api.MaxBodyBytes.
func App(name string, errorHandler fiber.ErrorHandler, meterBodyLimit int) *fiber.App {
	return httpserver.New(name, errorHandler, httpserver.BodyLimits{Large: meterBodyLimit, LargePrefixes: meterPaths, Default: api.MaxBodyBytes})
}

// CloseMeter stops the meter, shipping its spool until ctx ends, and says
// how many rows stay in the spool for the next start.
func CloseMeter(ctx context.Context, m *Meter) error {
	err := m.Close(ctx)
	if left := m.Spool.Stats().Rows; left > 0 {
		return fmt.Errorf("%d usage rows stay in the spool and ship at the next start (the usage store did not take them in time)", left)
	}
	return err
}
