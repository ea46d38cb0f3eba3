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
func (o *Ops) Middleware(c *fiber.Ctx) error {
	start := time.Now()
	err := c.Next()
	status := c.Response().StatusCode()
	if err != nil {
		if fe, ok := err.(*fiber.Error); ok {
			status = fe.Code
		}
	}
	route := c.Route().Path
	o.requests.WithLabelValues(c.Method(), route, strconv.Itoa(status)).Inc()
	o.latency.WithLabelValues(c.Method(), route).Observe(time.Since(start).Seconds())
	return err
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
