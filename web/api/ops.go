package api

import (
	"context"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check is one readiness check (a database ping, say).
type Check struct {
	Name  string
	Check func(ctx context.Context) error
}

// Ops serves /healthz (the process is alive), /readyz (its dependencies
// answer) and /metrics (Prometheus), the same on both binaries.
type Ops struct {
	Registry *prometheus.Registry
	Checks   []Check
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// NewOps makes a registry with the Go and process collectors and the HTTP
// request metrics of service (e.g. "marketplace").
func NewOps(service string) *Ops {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	o := &Ops{
		Registry: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "agentmarket", Subsystem: service, Name: "http_requests_total",
			Help: "HTTP requests served, by route and status.",
		}, []string{"method", "route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "agentmarket", Subsystem: service, Name: "http_request_duration_seconds",
			Help: "HTTP request latency, by route.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"method", "route"}),
	}
	reg.MustRegister(o.requests, o.latency)
	return o
}

// Middleware records every request's route, status and latency.
//
// The label values come from closed sets, and none is a string Fiber hands
// out: those alias fasthttp's buffers, which the next request on the
// connection overwrites, so a label kept in the registry would change under
// it (two series turning into one make /metrics fail), and a caller could
// grow the series without bound with paths of their own. The method is one
// of the methods Fiber serves (else OTHER), the route the registered
// pattern (or "unmatched"), the status the one the caller got.
func (o *Ops) Middleware(c *fiber.Ctx) error {
	start := time.Now()
	self := c.Route()
	if err := c.Next(); err != nil {
		// The app's error handler picks the status of an error, so it runs
		// here, before the status is read (as Fiber's logger does).
		if herr := c.App().ErrorHandler(c, err); herr != nil {
			_ = c.SendStatus(fiber.StatusInternalServerError)
		}
	}
	method, route := methodLabel(c.Method()), c.Route().Path
	if c.Route() == self {
		route = "unmatched" // no route took the request: its path is the caller's
	}
	o.requests.WithLabelValues(method, route, strconv.Itoa(c.Response().StatusCode())).Inc()
	o.latency.WithLabelValues(method, route).Observe(time.Since(start).Seconds())
	return nil
}

// methodLabel is m as one of the constant method names.
func methodLabel(m string) string {
	for _, known := range fiber.DefaultMethods {
		if m == known {
			return known
		}
	}
	return "OTHER"
}

// Mount adds /healthz, /readyz and /metrics.
func (o *Ops) Mount(app *fiber.App) {
	app.Get("/healthz", func(c *fiber.Ctx) error {
		return c.JSON(fiber.Map{"status": "ok"})
	})
	app.Get("/readyz", func(c *fiber.Ctx) error {
		ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
		defer cancel()
		failed := fiber.Map{}
		for _, ch := range o.Checks {
			if err := ch.Check(ctx); err != nil {
				failed[ch.Name] = err.Error()
			}
		}
		if len(failed) > 0 {
			return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"status": "unavailable", "failed": failed})
		}
		return c.JSON(fiber.Map{"status": "ready"})
	})
	app.Get("/metrics", adaptor.HTTPHandler(promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{})))
}
