package a2aproxy

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/metering"
)

// headerExchange is an exchange with request headers only.
type headerExchange map[string]string

func (h headerExchange) Context() context.Context                      { return context.Background() }
func (h headerExchange) Header(name string) string                     { return h[name] }
func (h headerExchange) Answer(int, string, []byte, ...string) error   { return nil }
func (h headerExchange) Stream(func(w *bufio.Writer), ...string) error { return nil }

// tracing is a stage that notes its name, then refuses or hands on.
type tracing struct {
	name   string
	seen   *[]string
	refuse error
}

func (s tracing) serve(cl *call, next handler) error {
	*s.seen = append(*s.seen, s.name)
	if s.refuse != nil {
		return s.refuse
	}
	return next(cl)
}

// TestComposeRunsStagesInOrder: the stages run in order, then the last
// handler; a stage that refuses stops the chain with its error.
func TestComposeRunsStagesInOrder(t *testing.T) {
	var seen []string
	last := func(*call) error { seen = append(seen, "last"); return nil }
	h := compose(last, tracing{name: "a", seen: &seen}, tracing{name: "b", seen: &seen})
	if err := h(&call{}); err != nil || !slices.Equal(seen, []string{"a", "b", "last"}) {
		t.Fatalf("ran %v (%v), want a, b, last", seen, err)
	}
	seen = nil
	no := errors.New("no")
	h = compose(last, tracing{name: "a", seen: &seen, refuse: no}, tracing{name: "b", seen: &seen})
	if err := h(&call{}); err != no || !slices.Equal(seen, []string{"a"}) {
		t.Fatalf("ran %v (%v), want a refusing", seen, err)
	}
}

// TestGateStage: a meter that cannot record refuses the call (-32057)
// before anything else; one whose projections lag past the limit holds
// it, then refuses it (-32058).
func TestGateStage(t *testing.T) {
	next := func(*call) error { return nil }
	clock := agentmarket.NewManualClock(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
	acct := &accounting{recorder: stubRecorder{err: errors.New("fsync failed")}, clock: clock}
	lim := &Limits{MaxUnsettled: 10, UnsettledWait: 20 * time.Millisecond}
	cl := &call{x: headerExchange{}}
	var re *rpcError
	if err := (gate{acct: acct, limits: lim}).serve(cl, next); !errors.As(err, &re) || re.Code != CodeMeterUnavailable {
		t.Errorf("a meter that cannot record: %v, want -32057", err)
	}
	acct.recorder = stubRecorder{}
	if err := (gate{acct: acct, limits: lim, unsettled: func() int { return 11 }}).serve(cl, next); !errors.As(err, &re) || re.Code != CodeMeterBusy {
		t.Errorf("projections past the limit: %v, want -32058", err)
	}
	if err := (gate{acct: acct, limits: lim, unsettled: func() int { return 0 }}).serve(cl, next); err != nil {
		t.Errorf("a meter that keeps up: %v", err)
	}
}

// TestAuthenticateStage: no bearer key is refused with 401 before any
// lookup; a key is looked up once and cached.
func TestAuthenticateStage(t *testing.T) {
	lookups := 0
	auth := authFunc(func(_ context.Context, secret string) (agentmarket.Actor, error) {
		lookups++
		return agentmarket.Actor{OrgID: "org_" + secret}, nil
	})
	clock := agentmarket.NewManualClock(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
	a := authenticate{auth: auth, actors: newTTLCache[agentmarket.Actor](time.Minute, clock.Now)}
	next := func(*call) error { return nil }
	var re *rpcError
	if err := a.serve(&call{x: headerExchange{"Authorization": "Basic eA=="}}, next); !errors.As(err, &re) || re.Status != http.StatusUnauthorized {
		t.Errorf("no bearer key: %v, want 401", err)
	}
	for range 2 {
		cl := &call{x: headerExchange{"Authorization": "Bearer amk_x"}}
		if err := a.serve(cl, next); err != nil || cl.actor.OrgID != "org_amk_x" {
			t.Fatalf("a key: %v, %+v", err, cl.actor)
		}
	}
	if lookups != 1 {
		t.Errorf("%d lookups of one key, want 1 (cached)", lookups)
	}
}

type authFunc func(ctx context.Context, secret string) (agentmarket.Actor, error)

func (f authFunc) Authenticate(ctx context.Context, secret string) (agentmarket.Actor, error) {
	return f(ctx, secret)
}

// stubRecorder is a spool whose Err is err.
type stubRecorder struct{ err error }

func (r stubRecorder) Record(context.Context, metering.Usage) error { return r.err }
func (r stubRecorder) Err() error                                   { return r.err }
