package a2aproxy

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts"
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
	st := invokers{ent: pol, roles: newRoleCache(2*time.Second, clock.Now)}
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

// fixedSpend is a usage store that says the same spend for every budget.
type fixedSpend int64

func (f fixedSpend) Spent(context.Context, string, string, time.Time) (int64, error) {
	return int64(f), nil
}

// TestReserveStage: calls reserve against a key's budget until the next
// one cannot fit, whatever the interleaving (run with -race); a call that
// ends settles what it cost at once, releasing its reservation; a call
// reserving nothing goes while spent and held stay below the budget; a
// refusal further on in the chain releases the reservation.
func TestReserveStage(t *testing.T) {
	clock := agentmarket.NewManualClock(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
	book := newBudgetBook(fixedSpend(0), nil, clock, 2*time.Second, nil)
	budget := int64(10_000)
	newCall := func() *call {
		return &call{x: headerExchange{}, actor: agentmarket.Actor{OrgID: "org_b", KeyID: "key_b", KeyBudgetMicros: &budget}, contract: &contracts.Contract{ID: "ctr_1"}}
	}
	var mu sync.Mutex
	var held []*call
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := newCall()
			if book.reserve(context.Background(), cl, 1000) == nil {
				mu.Lock()
				held = append(held, cl)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(held) != 10 {
		t.Fatalf("%d of 50 concurrent calls of 1,000 reserved under 10,000, want 10", len(held))
	}
	var re *rpcError
	if err := book.reserve(context.Background(), newCall(), 1); !errors.As(err, &re) || re.Code != CodeBudgetExhausted {
		t.Errorf("an eleventh call: %v, want -32042", err)
	}
	book.settle(held[0], 1500) // used past its reservation
	book.settle(held[0], 1500) // settled once
	for _, cl := range held[1:5] {
		book.settle(cl, 500)
	}
	// Spent 3,500, held 5,000: 1,500 are left.
	if err := book.reserve(context.Background(), newCall(), 1501); !errors.As(err, &re) || re.Code != CodeBudgetExhausted ||
		!strings.Contains(re.Message, "3500 micros are spent this month and 5000 held") {
		t.Errorf("a call of 1,501: %v, want -32042 with 3,500 spent and 5,000 held", err)
	}
	next := func(*call) error { return wire.TaskNotFound("t") }
	cl := newCall()
	cl.req = &wire.Request{Method: wire.MethodSend}
	stage := reserve{book: book}
	if err := stage.serve(cl, next); err == nil || cl.hold.n != 0 {
		t.Errorf("a call refused further on: %v, hold %+v; want the refusal, the hold released", err, cl.hold)
	}
	for _, cl := range held[5:] {
		book.settle(cl, 0)
	}
	if err := book.reserve(context.Background(), newCall(), 6500); err != nil {
		t.Errorf("the rest of the budget: %v", err)
	}
	if err := book.reserve(context.Background(), newCall(), 0); !errors.As(err, &re) || re.Code != CodeBudgetExhausted {
		t.Errorf("a call reserving nothing at a budget fully held: %v, want -32042", err)
	}
}

// downBudgets is a shared state that does not answer.
type downBudgets struct{}

func (downBudgets) ReserveBudgets(context.Context, []string, []int64, []int64, int64) (int, int64, int64, error) {
	return 0, 0, 0, agentmarket.Errorf(agentmarket.Unavailable, "redis_unavailable", "down")
}
func (downBudgets) SettleBudgets(context.Context, []string, int64, int64) error {
	return agentmarket.Errorf(agentmarket.Unavailable, "redis_unavailable", "down")
}

// TestReserveSharedDown: while the shared state does not answer, the
// meter holds budgets in its own memory, neither dropping them nor
// refusing every call.
func TestReserveSharedDown(t *testing.T) {
	clock := agentmarket.NewManualClock(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
	book := newBudgetBook(fixedSpend(0), nil, clock, 2*time.Second, slog.New(slog.DiscardHandler))
	book.shared, book.base = downBudgets{}, context.Background()
	budget := int64(2500)
	var held []*call
	for i := range 3 {
		cl := &call{x: headerExchange{}, actor: agentmarket.Actor{OrgID: "org_b", KeyID: "key_b", KeyBudgetMicros: &budget}, contract: &contracts.Contract{ID: "ctr_1"}}
		err := book.reserve(context.Background(), cl, 1000)
		if (err == nil) != (i < 2) || (err == nil && (cl.hold.ids != nil || cl.hold.n != 1)) {
			t.Fatalf("reservation %d with the shared state down: %v, hold %+v; want two held in memory, the third refused", i, err, cl.hold)
		}
		held = append(held, cl)
	}
	book.settle(held[0], 400)
	cl := &call{x: headerExchange{}, actor: agentmarket.Actor{OrgID: "org_b", KeyID: "key_b", KeyBudgetMicros: &budget}, contract: &contracts.Contract{ID: "ctr_1"}}
	if err := book.reserve(context.Background(), cl, 1000); err != nil {
		t.Errorf("after a settle of 400 (1,400 spent and held): %v", err)
	}
}
