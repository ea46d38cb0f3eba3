package casbin_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/casbin"
	contractsgorm "github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/migrations/relational"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// invoke is the right of org o1 to invoke listing l1, in every domain.
var invoke = contracts.Rule{PType: "p", V: [6]string{"org:o1", "*", "listing:l1", "invoke"}}

func mustNew(t *testing.T, db *relational.DB) *casbin.Authorizer {
	t.Helper()
	a, err := casbin.New(context.Background(), contractsgorm.New(db.DB))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func allowed(t *testing.T, a *casbin.Authorizer, sub, dom, obj, act string) bool {
	t.Helper()
	ok, err := a.Allowed(sub, dom, obj, act)
	if err != nil {
		t.Fatalf("Allowed(%s, %s, %s, %s): %v", sub, dom, obj, act, err)
	}
	return ok
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAuthorizer(t *testing.T) {
	for _, o := range relationaltest.Openers {
		t.Run(o.Name, func(t *testing.T) {
			t.Run("default role rules", func(t *testing.T) { testDefaultRules(t, o.Open(t)) })
			t.Run("seeding twice keeps one copy", func(t *testing.T) { testSeedIdempotent(t, o.Open(t)) })
			t.Run("grant and revoke", func(t *testing.T) { testGrantRevoke(t, o.Open(t)) })
			t.Run("another instance sees grants", func(t *testing.T) { testSharedRules(t, o.Open(t)) })
		})
	}
}

func testDefaultRules(t *testing.T, db *relational.DB) {
	a := mustNew(t, db)
	cases := []struct {
		role     agentmarket.Role
		obj, act string
		want     bool
	}{
		{agentmarket.RoleSeller, contracts.ObjListings, contracts.ActWrite, true},
		{agentmarket.RoleSeller, contracts.ObjListings, contracts.ActRead, true},
		{agentmarket.RoleSeller, contracts.ObjAPIKeys, contracts.ActWrite, true},
		{agentmarket.RoleSeller, contracts.ObjSubscriptions, contracts.ActWrite, false},
		{agentmarket.RoleSeller, contracts.ObjBilling, contracts.ActRead, false},
		{agentmarket.RoleBuyer, contracts.ObjListings, contracts.ActWrite, false},
		{agentmarket.RoleBuyer, contracts.ObjListings, contracts.ActRead, true},
		{agentmarket.RoleBuyer, contracts.ObjSubscriptions, contracts.ActWrite, true},
		{agentmarket.RoleBuyer, contracts.ObjBilling, contracts.ActRead, true},
		{agentmarket.RoleFinance, contracts.ObjBilling, contracts.ActRead, true},
		{agentmarket.RoleFinance, contracts.ObjBilling, contracts.ActWrite, false},
		{agentmarket.RoleFinance, contracts.ObjUsage, contracts.ActRead, true},
		{agentmarket.RoleFinance, contracts.ObjAPIKeys, contracts.ActWrite, false},
		{agentmarket.RoleAdmin, contracts.ObjListings, contracts.ActWrite, true},
		{agentmarket.RoleAdmin, contracts.ObjBilling, contracts.ActWrite, true},
		{agentmarket.RoleAdmin, "anything", "delete", true},
		{"root", contracts.ObjListings, contracts.ActRead, false},
	}
	for _, tc := range cases {
		actor := agentmarket.Actor{OrgID: "org_a", Role: tc.role}
		err := a.Authorize(context.Background(), actor, tc.obj, tc.act)
		switch {
		case tc.want && err != nil:
			t.Errorf("%s %s %s: %v, want allowed", tc.role, tc.act, tc.obj, err)
		case !tc.want && (agentmarket.KindOf(err) != agentmarket.Forbidden || agentmarket.CodeOf(err) != "forbidden"):
			t.Errorf("%s %s %s: %v, want forbidden", tc.role, tc.act, tc.obj, err)
		}
	}
}

func testSeedIdempotent(t *testing.T, db *relational.DB) {
	mustNew(t, db)
	mustNew(t, db) // a second process starting on the same database
	rules, err := contractsgorm.New(db.DB).LoadRules(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(rules), len(contracts.DefaultRules()); got != want {
		t.Errorf("%d rules stored, want %d", got, want)
	}
}

func testGrantRevoke(t *testing.T, db *relational.DB) {
	ctx := context.Background()
	a := mustNew(t, db)
	if allowed(t, a, "org:o1", "*", "listing:l1", "invoke") {
		t.Fatal("o1 may invoke l1 before any grant")
	}
	if err := a.Grant(ctx, invoke); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		sub, dom, obj, act string
		want               bool
	}{
		{"org:o1", "*", "listing:l1", "invoke", true},
		{"org:o1", "org_any", "listing:l1", "invoke", true},
		{"org:o2", "*", "listing:l1", "invoke", false},
		{"org:o1", "*", "listing:l2", "invoke", false},
		{"org:o1", "*", "listing:l1", "write", false},
	}
	for _, tc := range cases {
		if got := allowed(t, a, tc.sub, tc.dom, tc.obj, tc.act); got != tc.want {
			t.Errorf("after grant: Allowed(%s, %s, %s, %s) = %v, want %v", tc.sub, tc.dom, tc.obj, tc.act, got, tc.want)
		}
	}
	if err := a.Grant(ctx, invoke); err != nil {
		t.Fatalf("granting again: %v", err)
	}
	if err := a.Revoke(ctx, invoke); err != nil {
		t.Fatal(err)
	}
	if allowed(t, a, "org:o1", "*", "listing:l1", "invoke") {
		t.Error("o1 may still invoke l1 after revoke")
	}
	// Revoking a grant leaves the role rules alone.
	if err := a.Authorize(ctx, agentmarket.Actor{OrgID: "org_a", Role: agentmarket.RoleSeller}, contracts.ObjListings, contracts.ActWrite); err != nil {
		t.Errorf("seller after revoke: %v", err)
	}
}

func testSharedRules(t *testing.T, db *relational.DB) {
	ctx := context.Background()
	a := mustNew(t, db)
	b := mustNew(t, db)

	// Reload: b sees a's grant once it reloads, not before.
	if err := a.Grant(ctx, invoke); err != nil {
		t.Fatal(err)
	}
	if allowed(t, b, "org:o1", "*", "listing:l1", "invoke") {
		t.Fatal("b sees the grant before reloading")
	}
	if err := b.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if !allowed(t, b, "org:o1", "*", "listing:l1", "invoke") {
		t.Fatal("b does not see the grant after Reload")
	}

	// Run: b picks up changes by itself within a bounded time.
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	errs := make(chan error, 100)
	go func() {
		defer close(done)
		b.Run(runCtx, 10*time.Millisecond, func(err error) {
			select {
			case errs <- err:
			default:
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	second := contracts.Rule{PType: "p", V: [6]string{"org:o2", "*", "listing:l2", "invoke"}}
	if err := a.Grant(ctx, second); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b sees the second grant through Run", func() bool { return allowed(t, b, "org:o2", "*", "listing:l2", "invoke") })

	if err := a.Revoke(ctx, invoke); err != nil {
		t.Fatal(err)
	}
	if allowed(t, a, "org:o1", "*", "listing:l1", "invoke") {
		t.Error("a still allows after its own revoke")
	}
	eventually(t, "b sees the revoke through Run", func() bool { return !allowed(t, b, "org:o1", "*", "listing:l1", "invoke") })

	cancel()
	<-done
	close(errs)
	for err := range errs {
		t.Errorf("Run reported: %v", err)
	}
}

// stallingLoads is a policy store whose next load, once armed, reads the
// rules and then waits (a reload slowed down, by a loaded machine, say).
type stallingLoads struct {
	contracts.PolicyStore
	armed         atomic.Bool
	read, release chan struct{}
}

func (s *stallingLoads) LoadRules(ctx context.Context) ([]contracts.Rule, error) {
	rules, err := s.PolicyStore.LoadRules(ctx)
	if s.armed.CompareAndSwap(true, false) {
		close(s.read)
		<-s.release
	}
	return rules, err
}

// TestReloadNeverGoesBack: a periodic reload that read the rules before a
// grant, and finishes after the grant's own reload, does not put back the
// rules without the grant: the buyer who just subscribed is not refused
// until the next reload (a subscription's first call answered 403 in CI).
func TestReloadNeverGoesBack(t *testing.T) {
	ctx := context.Background()
	store := &stallingLoads{PolicyStore: contractsgorm.New(relationaltest.SQLite(t).DB), read: make(chan struct{}), release: make(chan struct{})}
	a, err := casbin.New(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	store.armed.Store(true)
	periodic := make(chan error, 1)
	go func() { periodic <- a.Reload(ctx) }() // Run's tick
	<-store.read                              // it has the rules without the grant
	granted := make(chan error, 1)
	go func() { granted <- a.Grant(ctx, invoke) }()
	select {
	case err := <-granted:
		// The grant's reload finished first; the periodic one ends now.
		if err != nil {
			t.Fatal(err)
		}
		close(store.release)
	case <-time.After(200 * time.Millisecond):
		// The grant's reload waits for the periodic one.
		close(store.release)
		if err := <-granted; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-periodic; err != nil {
		t.Fatal(err)
	}
	if !allowed(t, a, "org:o1", "*", "listing:l1", "invoke") {
		t.Error("after the grant returned, o1 may not invoke l1: a reload older than the grant replaced its rules")
	}
}

// TestReloadsQueueBriefly: a caller waiting behind a reload that hangs
// gives up when its own context ends; grants that queued behind one
// reload are covered by the next one, not one reload each.
func TestReloadsQueueBriefly(t *testing.T) {
	ctx := context.Background()
	loads := &countingLoads{stallingLoads: stallingLoads{PolicyStore: contractsgorm.New(relationaltest.SQLite(t).DB), read: make(chan struct{}), release: make(chan struct{})}}
	a, err := casbin.New(ctx, loads)
	if err != nil {
		t.Fatal(err)
	}
	loads.armed.Store(true)
	hung := make(chan error, 1)
	go func() { hung <- a.Reload(ctx) }()
	<-loads.read
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := a.Reload(short); err == nil {
		t.Error("a reload queued behind a hung one returned nil before its context ended, want its context's error")
	}
	// Five grants queue behind the hung reload.
	granted := make(chan error, 5)
	for i := range 5 {
		go func() {
			granted <- a.Grant(ctx, contracts.Rule{PType: "p", V: [6]string{"org:o" + string(rune('1'+i)), "*", "listing:l1", "invoke"}})
		}()
	}
	time.Sleep(100 * time.Millisecond)
	before := loads.n.Load()
	close(loads.release)
	if err := <-hung; err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := <-granted; err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		if !allowed(t, a, "org:o"+string(rune('1'+i)), "*", "listing:l1", "invoke") {
			t.Errorf("o%d may not invoke l1 after its grant returned", i+1)
		}
	}
	if n := loads.n.Load() - before; n > 2 {
		t.Errorf("%d loads for five queued grants, want at most 2", n)
	}
}

// countingLoads counts the loads of a stallingLoads.
type countingLoads struct {
	stallingLoads
	n atomic.Int64
}

func (s *countingLoads) LoadRules(ctx context.Context) ([]contracts.Rule, error) {
	s.n.Add(1)
	return s.stallingLoads.LoadRules(ctx)
}
