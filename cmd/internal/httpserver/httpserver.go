// Package httpserver serves a binary's Fiber app: request bodies bounded
// as soon as the headers are read, the connections of refused requests
// closed gently, and a way down that keeps to a budget (Serve).
package httpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// MaxHeaderBytes bounds a request's line (method, URL) and headers
// together; larger ones are answered 431 (api.Status). It is also the
// connection's read buffer, which every held stream keeps: the meter's
// memory per open stream (BENCHMARKS.md) is counted with it.
const MaxHeaderBytes = 4 << 10

// BodyLimits bound request bodies by path.
type BodyLimits struct {
	// Large bounds the bodies of the paths under LargePrefixes.
	Large         int
	LargePrefixes []string
	// Default bounds every other request's body.
	Default int
}

// New returns a Fiber app named agentmarket-<name> with the settings both
// binaries use. Request bodies are bounded as soon as the headers are
// read, before the body is (limits); beyond, they are answered 413 by
// errorHandler, as are headers beyond MaxHeaderBytes (431), and the
// connection then lingers (lingerListener).
func New(name string, errorHandler fiber.ErrorHandler, limits BodyLimits) *fiber.App {
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
		BodyLimit:      limits.Large,
		ReadBufferSize: MaxHeaderBytes,
		ReadTimeout:    30 * time.Second,
		IdleTimeout:    120 * time.Second,
	})
	large := make([][]byte, len(limits.LargePrefixes))
	for i, p := range limits.LargePrefixes {
		large[i] = []byte(p)
	}
	app.Server().HeaderReceived = func(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
		uri := h.RequestURI()
		for _, p := range large {
			if bytes.HasPrefix(uri, p) {
				return fasthttp.RequestConfig{}
			}
		}
		return fasthttp.RequestConfig{MaxRequestBodySize: limits.Default}
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
