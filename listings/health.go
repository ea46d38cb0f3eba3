package listings

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings/agentcard"
)

// A listing's card can be read while its agent does not answer (its
// process moved to another port, say): the card's health says nothing of
// that. The Checker probes each published listing's agent endpoints
// every interval with a call that changes nothing at the agent (GetTask
// of a task that does not exist) and keeps, per endpoint URL, whether it
// answered and since when. A listing's agent health is its endpoints':
// answering while one answers, down when all are down.

// EndpointHealth is what the probes last said of one agent endpoint.
type EndpointHealth struct {
	URL string
	Up  bool
	// Since is when the endpoint last went up or down (the first probe
	// that saw it so).
	Since time.Time
	// Cause is why it is down, in words the seller can act on; "" when
	// up.
	Cause string
}

// AgentState is a listing's agent health.
type AgentState string

const (
	// AgentUnknown: not probed yet (or probes are off).
	AgentUnknown   AgentState = "unknown"
	AgentAnswering AgentState = "answering"
	AgentDown      AgentState = "down"
)

// AgentHealth is a listing's agent health: answering while one of its
// endpoints answers, down (since the last of them went down, with the
// first's cause) when all are.
type AgentHealth struct {
	State AgentState
	Since time.Time
	Cause string
}

// AgentHealth sums up the listing's endpoints' health.
func (l *Listing) AgentHealth() AgentHealth {
	return agentHealth(l.Endpoints)
}

func agentHealth(eps []EndpointHealth) AgentHealth {
	if len(eps) == 0 {
		return AgentHealth{State: AgentUnknown}
	}
	h := AgentHealth{State: AgentDown}
	for _, e := range eps {
		if e.Up {
			if h.State != AgentAnswering || e.Since.Before(h.Since) {
				h = AgentHealth{State: AgentAnswering, Since: e.Since}
			}
			continue
		}
		if h.State == AgentDown {
			if h.Cause == "" {
				h.Cause = e.Cause
			}
			if e.Since.After(h.Since) {
				h.Since = e.Since
			}
		}
	}
	return h
}

// ProbeEndpoints are the endpoints of a card the Checker probes: today the
// one the meter calls, the first JSON-RPC or HTTP+JSON interface of A2A
// 0.3 or 1.0 in the agent's order of preference (a listing has one
// endpoint; replicas will add theirs here).
func ProbeEndpoints(card *agentcard.Card) []agentcard.Interface {
	if card == nil {
		return nil
	}
	for _, in := range card.Interfaces {
		if (in.Binding == agentcard.BindingJSONRPC || in.Binding == agentcard.BindingHTTPJSON) &&
			(in.ProtocolVersion == "0.3" || in.ProtocolVersion == "1.0") {
			return []agentcard.Interface{in}
		}
	}
	return nil
}

// probeTargets are the card's endpoint the meter calls and the seller's
// own endpoints (routing.go), each once.
func probeTargets(l *Listing) []agentcard.Interface {
	ifaces := ProbeEndpoints(l.Card)
	for _, e := range l.AgentEndpoints {
		if !slices.ContainsFunc(ifaces, func(in agentcard.Interface) bool { return in.URL == e.URL }) {
			ifaces = append(ifaces, agentcard.Interface{URL: e.URL, Binding: e.Binding, ProtocolVersion: e.ProtocolVersion})
		}
	}
	return ifaces
}

// ProbeResult is one probe's answer: up when the agent gave a well-formed
// A2A answer (TaskNotFound, even method not found); else Cause says what
// happened (refused, timed out, TLS, HTTP 5xx, not an A2A answer).
type ProbeResult struct {
	Up    bool
	Cause string
}

// Prober sends one health probe to an agent endpoint, in its binding and
// protocol version, with the seller's credential (nil: none), through the
// same address guard as every connection to agents
// (listings/httpfetch.Prober).
type Prober interface {
	Probe(ctx context.Context, in agentcard.Interface, auth *UpstreamAuth) ProbeResult
}

// DownAlerter tells a seller that a listing's agent stopped answering
// (contracts' alerts, through the alert outbox); it is called once per
// down period, when the last endpoint goes down.
type DownAlerter interface {
	AgentDown(ctx context.Context, l *Listing, h AgentHealth) error
}

// HealthStore keeps the endpoints' health (listings/gormstore).
type HealthStore interface {
	// Probeable returns up to limit published listings whose id is after
	// afterID, in id order, each with its endpoints' health.
	Probeable(ctx context.Context, afterID string, limit int) ([]*Listing, error)
	// SetEndpoints replaces a listing's endpoints' health with eps; it is
	// called on a change only (an endpoint up or down, a new cause, an
	// endpoint added or gone), not at every probe.
	SetEndpoints(ctx context.Context, listingID string, eps []EndpointHealth) error
}

// Checker probes published listings' agents (the marketplace runs it
// beside the card refresh).
type Checker struct {
	Store   HealthStore
	Catalog *Service // opens the sellers' credentials
	Prober  Prober
	Alerter DownAlerter // nil: no alert
	Clock   agentmarket.Clock
	// Every is the interval between two rounds; 0 stops Run at once.
	Every time.Duration
	// Parallel is how many probes run at once (0: 8).
	Parallel int
	// Observe, when set, hears each probe's result (metrics).
	Observe func(up bool)
}

// Run probes every published listing every c.Every until ctx ends.
func (c *Checker) Run(ctx context.Context, warn func(msg string, args ...any)) {
	if c.Every <= 0 {
		return
	}
	t := time.NewTicker(c.Every)
	defer t.Stop()
	for {
		if _, err := c.CheckAll(ctx); err != nil && ctx.Err() == nil {
			warn("agent health check failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// CheckAll probes every published listing once and returns how many it
// probed. A listing that cannot be recorded does not stop the others.
func (c *Checker) CheckAll(ctx context.Context) (int, error) {
	par := c.Parallel
	if par <= 0 {
		par = 8
	}
	var (
		n    int
		mu   sync.Mutex
		errs []error
	)
	after := ""
	for {
		ls, err := c.Store.Probeable(ctx, after, 100)
		if err != nil {
			return n, err
		}
		if len(ls) == 0 {
			return n, errors.Join(errs...)
		}
		sem := make(chan struct{}, par)
		var wg sync.WaitGroup
		for _, l := range ls {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				if err := c.Check(ctx, l); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("listing %s: %w", l.ID, err))
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		n += len(ls)
		after = ls[len(ls)-1].ID
	}
}

// Check probes one listing's endpoints, records what changed, and alerts
// the seller when the last of them went down. l.Endpoints is updated.
func (c *Checker) Check(ctx context.Context, l *Listing) error {
	auth, err := c.Catalog.OpenUpstreamAuth(l)
	if err != nil {
		return err
	}
	ifaces := probeTargets(l)
	next := make([]EndpointHealth, 0, len(ifaces))
	changed := len(ifaces) != len(l.Endpoints)
	for _, in := range ifaces {
		r := c.Prober.Probe(ctx, in, auth)
		if ctx.Err() != nil {
			return ctx.Err() // a stopped probe says nothing of the agent
		}
		if c.Observe != nil {
			c.Observe(r.Up)
		}
		e := EndpointHealth{URL: in.URL, Up: r.Up, Cause: r.Cause}
		prev, ok := endpointOf(l.Endpoints, in.URL)
		switch {
		case ok && prev.Up == e.Up:
			e.Since = prev.Since
			changed = changed || prev.Cause != e.Cause
		default:
			e.Since = c.Clock.Now().UTC()
			changed = true
		}
		next = append(next, e)
	}
	if !changed {
		return nil
	}
	was := agentHealth(l.Endpoints)
	if err := c.Store.SetEndpoints(ctx, l.ID, next); err != nil {
		return err
	}
	l.Endpoints = next
	now := agentHealth(next)
	if now.State == AgentDown && was.State != AgentDown && c.Alerter != nil {
		return c.Alerter.AgentDown(ctx, l, now)
	}
	return nil
}

func endpointOf(eps []EndpointHealth, url string) (EndpointHealth, bool) {
	for _, e := range eps {
		if e.URL == url {
			return e, true
		}
	}
	return EndpointHealth{}, false
}
