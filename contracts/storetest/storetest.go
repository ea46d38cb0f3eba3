// Package storetest is the contract every accounts store must meet: the
// contracts.Store (orgs, users, API keys) and the contracts.PolicyStore
// (casbin rules) it keeps beside them. Each implementation's tests call Run
// with a factory of fresh, empty stores; the same assertions then hold on
// SQLite and on PostgreSQL alike. RunTasks is the contract of the stores
// the meter shares: contracts, task bindings, task life and push.
package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// Store is what the suite exercises: accounts and policies together, as
// every adapter keeps them in one database.
type Store = interface {
	contracts.Store
	contracts.PolicyStore
}

// t0 is deliberately not in UTC and has sub-second digits, so the suite
// sees whether stores keep the instant and hand it back in UTC.
var t0 = time.Date(2026, 3, 1, 9, 30, 15, 123456000, time.FixedZone("CET", 3600))

func org(id string, platform bool) *contracts.Org {
	return &contracts.Org{ID: id, Name: "Org " + id, Platform: platform, CreatedAt: t0}
}

func user(id, orgID, email string) *contracts.User {
	return &contracts.User{ID: id, OrgID: orgID, Email: email, PasswordHash: "$2a$04$hash-of-" + id, Role: agentmarket.RoleAdmin, CreatedAt: t0}
}

func key(id, orgID string, created time.Time) *contracts.APIKey {
	return &contracts.APIKey{
		ID: id, OrgID: orgID, Name: "key " + id, Prefix: "amk_" + id,
		Hash: contracts.HashKey("amk_secret_" + id), Role: agentmarket.RoleBuyer, CreatedAt: created,
	}
}

func ptr[T any](v T) *T { return &v }

// Run runs the contract suite; newStore must return a fresh, empty store
// each time it is called.
func Run(t *testing.T, newStore func(t *testing.T) interface {
	contracts.Store
	contracts.PolicyStore
}) {
	ctx := context.Background()

	// mustOrg creates an org with one admin user and one key.
	mustOrg := func(t *testing.T, s Store, id, email string) {
		t.Helper()
		if err := s.CreateOrg(ctx, org(id, false), user("usr_"+id, id, email), key("key_"+id, id, t0)); err != nil {
			t.Fatalf("CreateOrg(%s): %v", id, err)
		}
	}

	t.Run("an org's monthly budget: set, read back, removed", func(t *testing.T) {
		s := newStore(t)
		mustOrg(t, s, "org_a", "alice@example.com")
		budget := int64(5_000_000)
		if o, err := s.SetOrgBudget(ctx, "org_a", &budget); err != nil || o.MonthlyBudgetMicros == nil || *o.MonthlyBudgetMicros != budget {
			t.Fatalf("SetOrgBudget = %+v, %v", o, err)
		}
		if o, err := s.GetOrg(ctx, "org_a"); err != nil || o.MonthlyBudgetMicros == nil || *o.MonthlyBudgetMicros != budget {
			t.Fatalf("GetOrg after SetOrgBudget = %+v, %v", o, err)
		}
		if o, err := s.SetOrgBudget(ctx, "org_a", nil); err != nil || o.MonthlyBudgetMicros != nil {
			t.Fatalf("SetOrgBudget(nil) = %+v, %v", o, err)
		}
		if _, err := s.SetOrgBudget(ctx, "org_nope", &budget); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("SetOrgBudget of no org: %v, want not found", err)
		}
	})

	t.Run("an org's and a key's rate limits: set, read back, removed", func(t *testing.T) {
		s := newStore(t)
		mustOrg(t, s, "org_a", "alice@example.com")
		l := agentmarket.RateLimits{RequestsPerSecond: 5, TokensPerMinute: 90_000, MaxInFlight: 3}
		if o, err := s.SetOrgRateLimits(ctx, "org_a", l); err != nil || o.RateLimits != l {
			t.Fatalf("SetOrgRateLimits = %+v, %v", o, err)
		}
		if o, err := s.GetOrg(ctx, "org_a"); err != nil || o.RateLimits != l {
			t.Fatalf("GetOrg after SetOrgRateLimits = %+v, %v", o, err)
		}
		if k, err := s.SetKeyRateLimits(ctx, "org_a", "key_org_a", l); err != nil || k.RateLimits != l || k.ID != "key_org_a" {
			t.Fatalf("SetKeyRateLimits = %+v, %v", k, err)
		}
		if k, err := s.APIKeyByHash(ctx, contracts.HashKey("amk_secret_key_org_a")); err != nil || k.RateLimits != l {
			t.Errorf("the key read back: %+v, %v", k, err)
		}
		if _, err := s.SetKeyRateLimits(ctx, "org_b", "key_org_a", l); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("SetKeyRateLimits of another org's key: %v, want not found", err)
		}
		if o, err := s.SetOrgRateLimits(ctx, "org_a", agentmarket.RateLimits{}); err != nil || !o.RateLimits.IsZero() {
			t.Fatalf("SetOrgRateLimits(none) = %+v, %v", o, err)
		}
	})

	t.Run("users and keys read by id, whichever org (NameStore)", func(t *testing.T) {
		s := newStore(t)
		ns, ok := any(s).(contracts.NameStore)
		if !ok {
			t.Skip("the store reads no names (pages show ids)")
		}
		mustOrg(t, s, "org_a", "alice@example.com")
		mustOrg(t, s, "org_b", "bob@example.com")
		if u, err := ns.UserByID(ctx, "usr_org_b"); err != nil || u.Email != "bob@example.com" || u.OrgID != "org_b" || u.PasswordHash != "" {
			t.Errorf("UserByID = %+v, %v; want bob of org_b, without the password's hash", u, err)
		}
		if k, err := ns.APIKeyByID(ctx, "key_org_a"); err != nil || k.Name != "key key_org_a" || k.OrgID != "org_a" || k.Prefix != "amk_key_org_a" {
			t.Errorf("APIKeyByID = %+v, %v", k, err)
		}
		if _, err := ns.UserByID(ctx, "usr_nope"); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("UserByID of no user: %v, want not found", err)
		}
		if _, err := ns.APIKeyByID(ctx, "key_nope"); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("APIKeyByID of no key: %v, want not found", err)
		}
	})

	t.Run("create org with user and key, then read them back", func(t *testing.T) {
		s := newStore(t)
		mustOrg(t, s, "org_a", "alice@example.com")

		o, err := s.GetOrg(ctx, "org_a")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := *o, (contracts.Org{ID: "org_a", Name: "Org org_a", CreatedAt: t0.UTC()}); got != want {
			t.Errorf("GetOrg = %+v, want %+v", got, want)
		}
		u, err := s.GetUserByEmail(ctx, "alice@example.com")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := *u, *user("usr_org_a", "org_a", "alice@example.com"); got.ID != want.ID || got.OrgID != want.OrgID ||
			got.Email != want.Email || got.PasswordHash != want.PasswordHash || got.Role != want.Role {
			t.Errorf("GetUserByEmail = %+v, want %+v", got, want)
		}
		ks, err := s.ListAPIKeys(ctx, "org_a")
		if err != nil {
			t.Fatal(err)
		}
		if len(ks) != 1 || ks[0].ID != "key_org_a" {
			t.Errorf("ListAPIKeys = %+v, want the first key", ks)
		}
	})

	t.Run("a taken e-mail is a conflict and leaves no org behind", func(t *testing.T) {
		s := newStore(t)
		mustOrg(t, s, "org_a", "alice@example.com")

		err := s.CreateOrg(ctx, org("org_b", false), user("usr_b", "org_b", "alice@example.com"), key("key_b", "org_b", t0))
		if agentmarket.KindOf(err) != agentmarket.Conflict || err == nil {
			t.Fatalf("second CreateOrg: %v, want a conflict", err)
		}
		if _, err := s.GetOrg(ctx, "org_b"); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("GetOrg(org_b) after the conflict: %v, want not found (CreateOrg must be atomic)", err)
		}
		if ks, err := s.ListAPIKeys(ctx, "org_b"); err != nil || len(ks) != 0 {
			t.Errorf("ListAPIKeys(org_b) after the conflict = %+v, %v; want none", ks, err)
		}
		if _, err := s.APIKeyByHash(ctx, key("key_b", "org_b", t0).Hash); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("APIKeyByHash of the refused key: %v, want not found", err)
		}
	})

	t.Run("a key that cannot be stored leaves no org behind", func(t *testing.T) {
		s := newStore(t)
		mustOrg(t, s, "org_a", "alice@example.com")

		// The user is new, but the key's hash is taken: the org and the
		// user must go with the refused key.
		dup := key("key_b", "org_b", t0)
		dup.Hash = key("key_org_a", "org_a", t0).Hash
		err := s.CreateOrg(ctx, org("org_b", false), user("usr_b", "org_b", "bob@example.com"), dup)
		if err == nil {
			t.Fatal("CreateOrg with a duplicate key hash succeeded")
		}
		if _, err := s.GetOrg(ctx, "org_b"); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("GetOrg(org_b): %v, want not found", err)
		}
		if _, err := s.GetUserByEmail(ctx, "bob@example.com"); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("GetUserByEmail(bob): %v, want not found", err)
		}
	})

	t.Run("an org may be created without user or key", func(t *testing.T) {
		s := newStore(t)
		if err := s.CreateOrg(ctx, org("org_a", false), nil, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetOrg(ctx, "org_a"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("unknown org is not found", func(t *testing.T) {
		s := newStore(t)
		_, err := s.GetOrg(ctx, "org_nope")
		if got, want := agentmarket.KindOf(err), agentmarket.NotFound; got != want {
			t.Fatalf("GetOrg: kind %q (%v), want %q", got, err, want)
		}
	})

	t.Run("platform org", func(t *testing.T) {
		s := newStore(t)
		mustOrg(t, s, "org_a", "alice@example.com")
		if _, err := s.PlatformOrg(ctx); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Fatalf("PlatformOrg before one exists: %v, want not found", err)
		}
		if err := s.CreateOrg(ctx, org("org_p", true), nil, key("key_p", "org_p", t0)); err != nil {
			t.Fatal(err)
		}
		o, err := s.PlatformOrg(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if o.ID != "org_p" || !o.Platform {
			t.Errorf("PlatformOrg = %+v, want org_p with Platform set", o)
		}
	})

	t.Run("e-mail lookup ignores case", func(t *testing.T) {
		s := newStore(t)
		mustOrg(t, s, "org_a", "alice@example.com")
		mustOrg(t, s, "org_c", "Carol@Example.com")
		cases := []struct{ lookup, wantID string }{
			{"alice@example.com", "usr_org_a"},
			{"Alice@Example.COM", "usr_org_a"},
			{"carol@example.com", "usr_org_c"},
			{"CAROL@EXAMPLE.COM", "usr_org_c"},
			{"Carol@Example.com", "usr_org_c"},
		}
		for _, tc := range cases {
			u, err := s.GetUserByEmail(ctx, tc.lookup)
			if err != nil {
				t.Errorf("GetUserByEmail(%q): %v, want %s", tc.lookup, err, tc.wantID)
				continue
			}
			if u.ID != tc.wantID {
				t.Errorf("GetUserByEmail(%q) = %s, want %s", tc.lookup, u.ID, tc.wantID)
			}
		}
		if _, err := s.GetUserByEmail(ctx, "nobody@example.com"); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("GetUserByEmail(nobody): %v, want not found", err)
		}
	})

	t.Run("an e-mail taken in another case is a conflict", func(t *testing.T) {
		s := newStore(t)
		mustOrg(t, s, "org_a", "alice@example.com")
		err := s.CreateOrg(ctx, org("org_b", false), user("usr_b", "org_b", "ALICE@example.com"), nil)
		if agentmarket.KindOf(err) != agentmarket.Conflict || err == nil {
			t.Errorf("CreateOrg with ALICE@example.com: %v, want a conflict (alice@example.com is taken)", err)
		}
	})

	t.Run("api keys: create, find by hash, list in creation order", func(t *testing.T) {
		s := newStore(t)
		mustOrg(t, s, "org_a", "alice@example.com")
		mustOrg(t, s, "org_b", "bob@example.com")
		// Inserted out of order: the list follows CreatedAt, not insertion.
		for _, k := range []*contracts.APIKey{
			key("key_3", "org_a", t0.Add(3*time.Minute)),
			key("key_1", "org_a", t0.Add(1*time.Minute)),
			key("key_2", "org_a", t0.Add(2*time.Minute)),
			key("key_x", "org_b", t0.Add(90*time.Second)),
		} {
			if err := s.CreateAPIKey(ctx, k); err != nil {
				t.Fatalf("CreateAPIKey(%s): %v", k.ID, err)
			}
		}
		ks, err := s.ListAPIKeys(ctx, "org_a")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, k := range ks {
			got = append(got, k.ID)
		}
		if want := []string{"key_org_a", "key_1", "key_2", "key_3"}; !slices.Equal(got, want) {
			t.Errorf("ListAPIKeys(org_a) = %v, want %v", got, want)
		}
		if ks, err := s.ListAPIKeys(ctx, "org_nope"); err != nil || len(ks) != 0 {
			t.Errorf("ListAPIKeys(org_nope) = %v, %v; want empty", ks, err)
		}

		want := key("key_2", "org_a", t0.Add(2*time.Minute))
		k, err := s.APIKeyByHash(ctx, want.Hash)
		if err != nil {
			t.Fatal(err)
		}
		if k.ID != want.ID || k.OrgID != want.OrgID || k.Name != want.Name || k.Prefix != want.Prefix ||
			k.Hash != want.Hash || k.Role != want.Role || k.RevokedAt != nil {
			t.Errorf("APIKeyByHash = %+v, want %+v", k, want)
		}
		if _, err := s.APIKeyByHash(ctx, contracts.HashKey("amk_unknown")); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("APIKeyByHash(unknown): %v, want not found", err)
		}
	})

	t.Run("a duplicate key hash is a conflict", func(t *testing.T) {
		s := newStore(t)
		mustOrg(t, s, "org_a", "alice@example.com")
		dup := key("key_2", "org_a", t0)
		dup.Hash = key("key_org_a", "org_a", t0).Hash
		if err := s.CreateAPIKey(ctx, dup); agentmarket.KindOf(err) != agentmarket.Conflict || err == nil {
			t.Errorf("CreateAPIKey with a taken hash: %v, want a conflict", err)
		}
	})

	t.Run("monthly budget: nil, zero and a value round trip", func(t *testing.T) {
		s := newStore(t)
		mustOrg(t, s, "org_a", "alice@example.com")
		cases := []struct {
			id     string
			budget *int64
		}{
			{"key_nil", nil},
			{"key_zero", ptr(int64(0))},
			{"key_five", ptr(int64(5_000_000))},
			{"key_max", ptr(int64(1<<63 - 1))},
		}
		for _, tc := range cases {
			k := key(tc.id, "org_a", t0)
			k.MonthlyBudgetMicros = tc.budget
			if err := s.CreateAPIKey(ctx, k); err != nil {
				t.Fatal(err)
			}
			got, err := s.APIKeyByHash(ctx, k.Hash)
			if err != nil {
				t.Fatal(err)
			}
			if show(got.MonthlyBudgetMicros) != show(tc.budget) {
				t.Errorf("%s: budget = %s, want %s", tc.id, show(got.MonthlyBudgetMicros), show(tc.budget))
			}
		}
	})

	t.Run("a key minted from a capped key takes its budget out of the parent's", func(t *testing.T) {
		s := newStore(t)
		mustOrg(t, s, "org_a", "alice@example.com")
		mustOrg(t, s, "org_b", "bob@example.com")
		parent := key("key_parent", "org_a", t0)
		parent.MonthlyBudgetMicros = ptr(int64(100))
		if err := s.CreateAPIKey(ctx, parent); err != nil {
			t.Fatal(err)
		}
		budgetOf := func(k *contracts.APIKey) string {
			t.Helper()
			got, err := s.APIKeyByHash(ctx, k.Hash)
			if err != nil {
				return err.Error()
			}
			return show(got.MonthlyBudgetMicros)
		}
		child := key("key_child", "org_a", t0)
		child.MonthlyBudgetMicros = ptr(int64(30))
		if err := s.CreateAPIKeyFrom(ctx, child, "key_parent", 100); err != nil {
			t.Fatal(err)
		}
		if budgetOf(parent) != "70" || budgetOf(child) != "30" {
			t.Errorf("budgets parent, child = %s, %s; want 70, 30", budgetOf(parent), budgetOf(child))
		}
		// Minted against a budget read before the first mint: refused, and
		// nothing is stored or taken.
		late := key("key_late", "org_a", t0)
		late.MonthlyBudgetMicros = ptr(int64(30))
		if err := s.CreateAPIKeyFrom(ctx, late, "key_parent", 100); agentmarket.KindOf(err) != agentmarket.Conflict {
			t.Errorf("mint against a stale budget: %v, want a conflict", err)
		}
		// Another org's key is not a parent; neither is a revoked one.
		other := key("key_other", "org_b", t0)
		other.MonthlyBudgetMicros = ptr(int64(1))
		if err := s.CreateAPIKeyFrom(ctx, other, "key_parent", 70); agentmarket.KindOf(err) != agentmarket.Conflict {
			t.Errorf("mint from another org's key: %v, want a conflict", err)
		}
		if _, err := s.RevokeAPIKey(ctx, "org_a", "key_parent", t0); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateAPIKeyFrom(ctx, late, "key_parent", 70); agentmarket.KindOf(err) != agentmarket.Conflict {
			t.Errorf("mint from a revoked key: %v, want a conflict", err)
		}
		for _, k := range []*contracts.APIKey{late, other} {
			if _, err := s.APIKeyByHash(ctx, k.Hash); agentmarket.KindOf(err) != agentmarket.NotFound {
				t.Errorf("refused key %s was stored: %v", k.ID, err)
			}
		}
		if budgetOf(parent) != "70" {
			t.Errorf("parent budget after refusals = %s, want 70", budgetOf(parent))
		}
	})

	t.Run("times round trip as the same instant in UTC", func(t *testing.T) {
		s := newStore(t)
		mustOrg(t, s, "org_a", "alice@example.com")
		revokeAt := t0.Add(time.Hour)
		if _, err := s.RevokeAPIKey(ctx, "org_a", "key_org_a", revokeAt); err != nil {
			t.Fatal(err)
		}
		o, err := s.GetOrg(ctx, "org_a")
		if err != nil {
			t.Fatal(err)
		}
		u, err := s.GetUserByEmail(ctx, "alice@example.com")
		if err != nil {
			t.Fatal(err)
		}
		k, err := s.APIKeyByHash(ctx, key("key_org_a", "org_a", t0).Hash)
		if err != nil {
			t.Fatal(err)
		}
		if k.RevokedAt == nil {
			t.Fatal("RevokedAt not stored")
		}
		for _, tc := range []struct {
			name      string
			got, want time.Time
		}{
			{"org created", o.CreatedAt, t0},
			{"user created", u.CreatedAt, t0},
			{"key created", k.CreatedAt, t0},
			{"key revoked", *k.RevokedAt, revokeAt},
		} {
			if !tc.got.Equal(tc.want) || tc.got.Location() != time.UTC {
				t.Errorf("%s = %v, want %v in UTC", tc.name, tc.got, tc.want.UTC())
			}
		}
	})

	t.Run("revoke a key", func(t *testing.T) {
		s := newStore(t)
		mustOrg(t, s, "org_a", "alice@example.com")
		mustOrg(t, s, "org_b", "bob@example.com")
		at := t0.Add(time.Hour)

		k, err := s.RevokeAPIKey(ctx, "org_a", "key_org_a", at)
		if err != nil {
			t.Fatal(err)
		}
		if k.ID != "key_org_a" || k.RevokedAt == nil || !k.RevokedAt.Equal(at) {
			t.Fatalf("RevokeAPIKey = %+v, want key_org_a revoked at %v", k, at)
		}
		stored, err := s.APIKeyByHash(ctx, k.Hash)
		if err != nil {
			t.Fatal(err)
		}
		if stored.RevokedAt == nil || !stored.RevokedAt.Equal(at) {
			t.Errorf("stored RevokedAt = %v, want %v", stored.RevokedAt, at)
		}

		// Revoking again changes nothing: the first revocation time stays.
		again, err := s.RevokeAPIKey(ctx, "org_a", "key_org_a", at.Add(time.Hour))
		if err != nil {
			t.Fatalf("second RevokeAPIKey: %v", err)
		}
		if again.RevokedAt == nil || !again.RevokedAt.Equal(at) {
			t.Errorf("second RevokeAPIKey RevokedAt = %v, want still %v", again.RevokedAt, at)
		}
		stored, _ = s.APIKeyByHash(ctx, k.Hash)
		if stored.RevokedAt == nil || !stored.RevokedAt.Equal(at) {
			t.Errorf("stored RevokedAt after second revoke = %v, want still %v", stored.RevokedAt, at)
		}

		// Another org's key does not exist for org_a, and stays usable.
		if _, err := s.RevokeAPIKey(ctx, "org_a", "key_org_b", at); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("RevokeAPIKey of another org's key: %v, want not found", err)
		}
		other, err := s.APIKeyByHash(ctx, key("key_org_b", "org_b", t0).Hash)
		if err != nil {
			t.Fatal(err)
		}
		if other.RevokedAt != nil {
			t.Errorf("another org's key was revoked: %+v", other)
		}
		if _, err := s.RevokeAPIKey(ctx, "org_a", "key_nope", at); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Errorf("RevokeAPIKey of an unknown key: %v, want not found", err)
		}
	})

	runPolicies(t, newStore)
}

func runPolicies(t *testing.T, newStore func(t *testing.T) interface {
	contracts.Store
	contracts.PolicyStore
}) {
	ctx := context.Background()
	p := func(v ...string) contracts.Rule {
		r := contracts.Rule{PType: "p"}
		copy(r.V[:], v)
		return r
	}
	g := func(v ...string) contracts.Rule {
		r := contracts.Rule{PType: "g"}
		copy(r.V[:], v)
		return r
	}
	seed := []contracts.Rule{
		p("role:seller", "*", "listings", "write"),
		p("role:buyer", "*", "listings", "read"),
		p("org:o1", "*", "listing:l1", "invoke"),
		p("org:o1", "*", "listing:l2", "invoke"),
		p("org:o2", "*", "listing:l1", "invoke"),
		p("org:o2", "org_x", "listing:l3", "invoke"),
		g("usr_1", "role:seller", "org_x"),
	}
	load := func(t *testing.T, s Store) []string {
		t.Helper()
		rules, err := s.LoadRules(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rulesText(rules)
	}
	cases := []struct {
		name   string
		change func(s Store) error
		want   []contracts.Rule
	}{
		{
			name:   "add stores every rule",
			change: func(Store) error { return nil },
			want:   seed,
		},
		{
			name:   "adding the same rules again keeps one of each",
			change: func(s Store) error { return s.AddRules(ctx, slices.Concat(seed[2:4], seed)) },
			want:   seed,
		},
		{
			name:   "adding nothing is fine",
			change: func(s Store) error { return s.AddRules(ctx, nil) },
			want:   seed,
		},
		{
			name: "remove rules",
			change: func(s Store) error {
				return s.RemoveRules(ctx, []contracts.Rule{seed[2], seed[6], p("org:nobody", "*", "x", "y")})
			},
			want: []contracts.Rule{seed[0], seed[1], seed[3], seed[4], seed[5]},
		},
		{
			name:   "remove filtered by the first field",
			change: func(s Store) error { return s.RemoveFilteredRules(ctx, "p", 0, "org:o1") },
			want:   []contracts.Rule{seed[0], seed[1], seed[4], seed[5], seed[6]},
		},
		{
			name:   "remove filtered from a field index",
			change: func(s Store) error { return s.RemoveFilteredRules(ctx, "p", 2, "listing:l1") },
			want:   []contracts.Rule{seed[0], seed[1], seed[3], seed[5], seed[6]},
		},
		{
			name:   "remove filtered: empty values match anything",
			change: func(s Store) error { return s.RemoveFilteredRules(ctx, "p", 0, "", "*", "", "invoke") },
			want:   []contracts.Rule{seed[0], seed[1], seed[5], seed[6]},
		},
		{
			name:   "remove filtered keeps other rule types",
			change: func(s Store) error { return s.RemoveFilteredRules(ctx, "g", 0, "", "role:seller") },
			want:   seed[:6],
		},
		{
			name:   "remove filtered with no values removes the whole type",
			change: func(s Store) error { return s.RemoveFilteredRules(ctx, "p", 0) },
			want:   seed[6:],
		},
	}
	for _, tc := range cases {
		t.Run("policies: "+tc.name, func(t *testing.T) {
			s := newStore(t)
			if err := s.AddRules(ctx, seed); err != nil {
				t.Fatal(err)
			}
			if err := tc.change(s); err != nil {
				t.Fatal(err)
			}
			got, want := load(t, s), rulesText(tc.want)
			if !slices.Equal(got, want) {
				t.Errorf("rules =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}
}

// rulesText renders rules one per line, sorted: stores need not keep order.
func rulesText(rules []contracts.Rule) []string {
	out := make([]string, 0, len(rules))
	for _, r := range rules {
		out = append(out, r.PType+", "+strings.Join(r.V[:], ", "))
	}
	slices.Sort(out)
	return out
}

func show(p *int64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}
