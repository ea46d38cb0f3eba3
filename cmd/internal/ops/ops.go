// Package ops serves what operators and orchestrators ask both binaries:
// /healthz, /readyz over the dependencies' checks, and /metrics; and it
// announces those dependencies at start.
package ops

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentmarket/agentmarket"
)

// Check is one readiness check: a service the process talks to.
type Check struct {
	Name string
	// Optional: the process still serves while the check fails; /readyz
	// then answers 200 with status "degraded", and Impact says what is
	// missing meanwhile.
	Optional bool
	Impact   string
	// Check answers with a short detail (the server's version, say) or
	// why it failed.
	Check func(ctx context.Context) (string, error)
}

// CheckState is one check's entry in the /readyz answer.
type CheckState struct {
	State    string `json:"state"` // "up" or "down"
	Detail   string `json:"detail,omitempty"`
	Error    string `json:"error,omitempty"`
	Optional bool   `json:"optional,omitempty"`
	Impact   string `json:"impact,omitempty"`
}

// Readiness is the /readyz answer.
type Readiness struct {
	// Status is "ready" (every check up), "degraded" (optional ones down)
	// or "unavailable" (a required one down: 503).
	Status string                `json:"status"`
	Checks map[string]CheckState `json:"checks"`
}

// Ops serves /healthz (the process is alive), /readyz (its dependencies
// answer) and /metrics (Prometheus), the same on both binaries.
type Ops struct {
	Registry *prometheus.Registry
	Checks   []Check
	// Log, when set, hears when a check goes down or comes back up.
	Log      *slog.Logger
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	mu       sync.Mutex
	down     map[string]bool
}

// Ready runs every check (each bounded by ctx) and logs the ones whose
// state changed since the last run.
func (o *Ops) Ready(ctx context.Context) Readiness {
	r := Readiness{Status: "ready", Checks: make(map[string]CheckState, len(o.Checks))}
	states := make([]CheckState, len(o.Checks))
	var wg sync.WaitGroup
	for i, ch := range o.Checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			detail, err := ch.Check(ctx)
			st := CheckState{State: "up", Detail: detail}
			if err != nil {
				st = CheckState{State: "down", Error: SafeCause(err), Optional: ch.Optional, Impact: ch.Impact}
			}
			states[i] = st
			o.noteState(ch, err)
		}()
	}
	wg.Wait()
	for i, ch := range o.Checks {
		r.Checks[ch.Name] = states[i]
		if states[i].State == "up" {
			continue
		}
		if !ch.Optional {
			r.Status = "unavailable"
		} else if r.Status == "ready" {
			r.Status = "degraded"
		}
	}
	return r
}

// noteState logs a check's changes of state; its first state is the
// process's to announce at start.
func (o *Ops) noteState(ch Check, err error) {
	o.mu.Lock()
	was, known := o.down[ch.Name]
	if o.down == nil {
		o.down = map[string]bool{}
	}
	o.down[ch.Name] = err != nil
	o.mu.Unlock()
	switch {
	case o.Log == nil || !known || was == (err != nil):
	case err != nil:
		o.Log.Warn("dependency down", "check", ch.Name, "optional", ch.Optional, "impact", ch.Impact, "err", err)
	default:
		o.Log.Info("dependency up again", "check", ch.Name)
	}
}

// SafeCause says why err happened in words fit for any caller: the
// message of an application error (written to be shown), else the network
// failure it names (agentmarket.Cause), else nothing specific. The full
// error goes to the logs only.
func SafeCause(err error) string {
	var ae *agentmarket.Error
	if errors.As(err, &ae) && ae.Message != "" {
		return ae.Message
	}
	if c := agentmarket.Cause(err); c != "" {
		return c
	}
	return "failed (the logs say why)"
}

// New makes a registry with the Go and process collectors and the HTTP
// request metrics of service (e.g. "marketplace").
func New(service string) *Ops {
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
	o.MountProbes(app)
	o.MountMetrics(app)
}

// MountMetrics adds /metrics. A scraper that asks for OpenMetrics (as
// Prometheus does) gets the exemplars that link the meter's latency
// histogram to its traces (AGENTMARKET_OTEL_ENDPOINT); any other gets the
// text format.
func (o *Ops) MountMetrics(app *fiber.App) {
	app.Get("/metrics", adaptor.HTTPHandler(promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{EnableOpenMetrics: true})))
}

// MountProbes adds /healthz and /readyz.
func (o *Ops) MountProbes(app *fiber.App) {
	app.Get("/healthz", func(c *fiber.Ctx) error {
		return c.JSON(fiber.Map{"status": "ok"})
	})
	app.Get("/readyz", func(c *fiber.Ctx) error {
		ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
		defer cancel()
		r := o.Ready(ctx)
		if r.Status == "unavailable" {
			c.Status(fiber.StatusServiceUnavailable)
		}
		return c.JSON(r)
	})
}
