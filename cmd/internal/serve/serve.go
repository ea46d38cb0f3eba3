// Package serve holds the wiring both binaries share: the logger, the
// database, and serving a Fiber app until the context ends.
package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/cmd/internal/config"
	"github.com/agentmarket/agentmarket/migrations/gormdb"
	"github.com/agentmarket/agentmarket/web/api"
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

// RESTErrors answers a binary's errors outside the REST API (the meter's
// routes that are not JSON-RPC, /readyz, a refused request) with the REST
// API's one mapping, api.WriteError.
func RESTErrors(log *slog.Logger) fiber.ErrorHandler {
	return func(c *fiber.Ctx, err error) error { return api.WriteError(c, log, err) }
}

// MaxHeaderBytes bounds a request's line (method, URL) and headers
// together; larger ones are answered 431 (api.Status). It is also the
// connection's read buffer, which every held stream keeps: the meter's
// memory per open stream (BENCHMARKS.md) is counted with it.
const MaxHeaderBytes = 4 << 10

// meterPaths are the path prefixes the meter serves (a2aproxy.Proxy.Mount):
// buyers' calls and agents' push callbacks, whose bodies the meter limits
// per listing and answers in JSON-RPC.
var meterPaths = [][]byte{[]byte("/a2a/"), []byte(a2aproxy.CallbackPath)}

// App returns a Fiber app with the settings both binaries use. Request
// bodies are bounded as soon as the headers are read, before the body is:
// the meter's paths up to meterBodyLimit (the largest any listing may
// allow, so its own limit answers in JSON-RPC), everything else, the
// control plane, up to api.MaxBodyBytes. Both are answered 413 beyond.
func App(name string, errorHandler fiber.ErrorHandler, meterBodyLimit int) *fiber.App {
	app := fiber.New(fiber.Config{
		AppName:               "agentmarket-" + name,
		DisableStartupMessage: true,
		ErrorHandler: func(c *fiber.Ctx, err error) error {
			var fe *fiber.Error
			if errors.As(err, &fe) && (fe.Code == fiber.StatusRequestEntityTooLarge || fe.Code == fiber.StatusRequestHeaderFieldsTooLarge) {
				if lc, ok := c.Context().Conn().(*lingerConn); ok {
					lc.linger.Store(true)
				}
			}
			return errorHandler(c, err)
		},
		BodyLimit:      meterBodyLimit,
		ReadBufferSize: MaxHeaderBytes,
		ReadTimeout:    30 * time.Second,
		IdleTimeout:    120 * time.Second,
	})
	app.Server().HeaderReceived = func(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
		uri := h.RequestURI()
		for _, p := range meterPaths {
			if bytes.HasPrefix(uri, p) {
				return fasthttp.RequestConfig{}
			}
		}
		return fasthttp.RequestConfig{MaxRequestBodySize: api.MaxBodyBytes}
	}
	return app
}

// lingerListener hands out connections that can close gently. A request
// refused before its body was read (413, 431) leaves the client still
// sending; closing the socket with unread bytes resets the connection,
// and the client may lose the answer it was sent. So such a connection
// stops writing, reads and drops what still comes for a moment, and only
// then closes, as RFC 9112 (9.6) advises.
type lingerListener struct{ net.Listener }

func (l lingerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &lingerConn{Conn: c}, nil
}

// How long, and how much, a refused request's connection reads on.
const (
	lingerTime  = 2 * time.Second
	lingerBytes = 64 << 20
)

type lingerConn struct {
	net.Conn
	linger atomic.Bool
}

func (c *lingerConn) Close() error {
	if tc, ok := c.Conn.(*net.TCPConn); ok && c.linger.Load() {
		if tc.CloseWrite() == nil && tc.SetReadDeadline(time.Now().Add(lingerTime)) == nil {
			io.CopyN(io.Discard, tc, lingerBytes)
		}
	}
	return c.Conn.Close()
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
	go func() { errc <- app.Listener(lingerListener{ln}) }()
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
