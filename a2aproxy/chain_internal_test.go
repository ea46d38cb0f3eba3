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

// policyTable is an Entitlements of (subject, domain) pairs allowed to
// invoke listings, counting its checks.
type policyTable struct {
	allowed map[[2]string]bool
	checks  *int
}

func (p policyTable) Allowed(sub, dom, obj, act string) (bool, error) {
	*p.checks++
	return obj == "listings" && act == "invoke" && (p.allowed[[2]string{sub, dom}] || p.allowed[[2]string{sub, "*"}]), nil
}

// TestInvokersStage: by the policy, admin and buyer keys go on and a
// finance key is refused with -32041 and 403, until its org allows its
// role; the roles are read once per org for the cache TTL.
func TestInvokersStage(t *testing.T) {
	clock := agentmarket.NewManualClock(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
	checks := 0
	pol := policyTable{checks: &checks, allowed: map[[2]string]bool{{"role:admin", "*"}: true, {"role:buyer", "*"}: true}}
	st := invokers{ent: pol, roles: newTTLCache[roleSet](2*time.Second, clock.Now)}
	passed := 0
	next := func(*call) error { passed++; return nil }
	as := func(role agentmarket.Role) error {
		return st.serve(&call{actor: agentmarket.Actor{OrgID: "org_b", Role: role}}, next)
	}
	var re *rpcError
	for _, r := range []agentmarket.Role{agentmarket.RoleAdmin, agentmarket.RoleBuyer} {
		if err := as(r); err != nil {
			t.Errorf("a %s key: %v", r, err)
		}
	}
	for _, r := range []agentmarket.Role{agentmarket.RoleFinance, agentmarket.RoleSeller} {
		if err := as(r); !errors.As(err, &re) || re.Code != CodeNotEntitled || re.Status != http.StatusForbidden {
			t.Errorf("a %s key: %v, want -32041 with 403", r, err)
		}
	}
	if passed != 2 || checks != len(agentmarket.Roles) {
		t.Errorf("%d calls passed after %d policy checks; want 2 after %d (one org's roles read once)", passed, checks, len(agentmarket.Roles))
	}
	pol.allowed[[2]string{"role:finance", "org_b"}] = true
	if err := as(agentmarket.RoleFinance); err == nil {
		t.Errorf("a widened role went through within the cache TTL")
	}
	clock.Advance(2 * time.Second)
	if err := as(agentmarket.RoleFinance); err != nil {
		t.Errorf("a finance key once its org allows finance, past the TTL: %v", err)
	}
}
