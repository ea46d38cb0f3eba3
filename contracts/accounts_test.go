package contracts_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	contractsgorm "github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

var t0 = time.Date(2026, 5, 4, 8, 0, 0, 0, time.UTC)

// newAccounts returns the account service over a fresh SQLite store.
func newAccounts(t *testing.T) *contracts.Accounts {
	t.Helper()
	return &contracts.Accounts{
		Store:      contractsgorm.New(relationaltest.SQLite(t).DB),
		Clock:      agentmarket.NewManualClock(t0),
		BcryptCost: bcrypt.MinCost,
	}
}

func mustSignup(t *testing.T, a *contracts.Accounts, email string) *contracts.SignupResult {
	t.Helper()
	res, err := a.Signup(context.Background(), contracts.SignupInput{OrgName: "Acme", Email: email, Password: "correct horse battery"})
	if err != nil {
		t.Fatalf("Signup(%s): %v", email, err)
	}
	return res
}

// appError returns err as *agentmarket.Error, failing the test otherwise.
func appError(t *testing.T, err error) *agentmarket.Error {
	t.Helper()
	var ae *agentmarket.Error
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v (%T), want *agentmarket.Error", err, err)
	}
	return ae
}

// fieldRules renders an error's fields as "field:rule" pairs.
func fieldRules(err *agentmarket.Error) string {
	var out []string
	for _, f := range err.Fields {
		out = append(out, f.Field+":"+f.Rule)
	}
	return strings.Join(out, " ")
}

func TestSignupValidation(t *testing.T) {
	const good = "correct horse battery"
	cases := []struct {
		name string
		in   contracts.SignupInput
		want string // field:rule pairs, in order
	}{
		{"missing org name", contracts.SignupInput{Email: "a@example.com", Password: good}, "org_name:required"},
		{"blank org name", contracts.SignupInput{OrgName: " \t ", Email: "a@example.com", Password: good}, "org_name:required"},
		{"org name too long", contracts.SignupInput{OrgName: strings.Repeat("x", 201), Email: "a@example.com", Password: good}, "org_name:max_length"},
		{"org name of 201 characters in 402 bytes", contracts.SignupInput{OrgName: strings.Repeat("é", 201), Email: "a@example.com", Password: good}, "org_name:max_length"},
		{"org name with NUL", contracts.SignupInput{OrgName: "Acme\x00Evil", Email: "a@example.com", Password: good}, "org_name:control_character"},
		{"org name with a line break", contracts.SignupInput{OrgName: "Acme\nInc", Email: "a@example.com", Password: good}, "org_name:control_character"},
		{"org name not UTF-8", contracts.SignupInput{OrgName: "Acme\xff", Email: "a@example.com", Password: good}, "org_name:utf8"},
		{"org name of a megabyte", contracts.SignupInput{OrgName: strings.Repeat("x", 1<<20), Email: "a@example.com", Password: good}, "org_name:max_length"},
		{"e-mail with NUL", contracts.SignupInput{OrgName: "Acme", Email: "a\x00b@example.com", Password: good}, "email:control_character"},
		{"e-mail not UTF-8", contracts.SignupInput{OrgName: "Acme", Email: "a\xffb@example.com", Password: good}, "email:utf8"},
		{"e-mail over 254 characters", contracts.SignupInput{OrgName: "Acme", Email: strings.Repeat("a", 64) + "@" + strings.Repeat("b", 186) + ".com", Password: good}, "email:max_length"},
		{"missing e-mail", contracts.SignupInput{OrgName: "Acme", Password: good}, "email:required"},
		{"blank e-mail", contracts.SignupInput{OrgName: "Acme", Email: "   ", Password: good}, "email:required"},
		{"e-mail without @", contracts.SignupInput{OrgName: "Acme", Email: "alice.example.com", Password: good}, "email:format"},
		{"e-mail without domain", contracts.SignupInput{OrgName: "Acme", Email: "alice@", Password: good}, "email:format"},
		{"e-mail with two @", contracts.SignupInput{OrgName: "Acme", Email: "a@b@example.com", Password: good}, "email:format"},
		{"e-mail with a display name", contracts.SignupInput{OrgName: "Acme", Email: "Alice <alice@example.com>", Password: good}, "email:format"},
		{"e-mail with a space", contracts.SignupInput{OrgName: "Acme", Email: "al ice@example.com", Password: good}, "email:format"},
		{"missing password", contracts.SignupInput{OrgName: "Acme", Email: "a@example.com"}, "password:min_length"},
		{"password of 9 bytes", contracts.SignupInput{OrgName: "Acme", Email: "a@example.com", Password: "123456789"}, "password:min_length"},
		{"password of 73 bytes", contracts.SignupInput{OrgName: "Acme", Email: "a@example.com", Password: strings.Repeat("p", 73)}, "password:max_length"},
		{"every problem at once", contracts.SignupInput{OrgName: "", Email: "nope", Password: "short"}, "org_name:required email:format password:min_length"},
		{"password of 10 bytes", contracts.SignupInput{OrgName: "Acme", Email: "a@example.com", Password: "1234567890"}, ""},
		{"password of 72 bytes", contracts.SignupInput{OrgName: "Acme", Email: "a@example.com", Password: strings.Repeat("p", 72)}, ""},
		{"org name of 200 characters", contracts.SignupInput{OrgName: strings.Repeat("x", 200), Email: "a@example.com", Password: good}, ""},
		{"org name of 200 two-byte characters", contracts.SignupInput{OrgName: strings.Repeat("é", 200), Email: "a@example.com", Password: good}, ""},
		{"e-mail with spaces around and capitals", contracts.SignupInput{OrgName: " Acme ", Email: "  Alice@Example.COM ", Password: good}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAccounts(t)
			res, err := a.Signup(context.Background(), tc.in)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Signup: %v, want success", err)
				}
				if res.Secret == "" {
					t.Error("Signup returned no secret")
				}
				return
			}
			ae := appError(t, err)
			if ae.Kind != agentmarket.Invalid || ae.Code != "invalid_signup" {
				t.Errorf("kind, code = %s, %s; want invalid, invalid_signup", ae.Kind, ae.Code)
			}
			if got := fieldRules(ae); got != tc.want {
				t.Errorf("fields = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSignupNormalizesAndCreatesAdmin(t *testing.T) {
	ctx := context.Background()
	a := newAccounts(t)
	res, err := a.Signup(ctx, contracts.SignupInput{OrgName: "  Acme Ltd ", Email: " Alice@Example.COM", Password: "correct horse battery"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Org.Name, "Acme Ltd"; got != want {
		t.Errorf("org name = %q, want %q", got, want)
	}
	if got, want := res.User.Email, "alice@example.com"; got != want {
		t.Errorf("e-mail = %q, want %q", got, want)
	}
	if res.User.Role != agentmarket.RoleAdmin || res.Key.Role != agentmarket.RoleAdmin {
		t.Errorf("roles = %s, %s; want admin, admin", res.User.Role, res.Key.Role)
	}
	if !strings.HasPrefix(res.Secret, contracts.KeyPrefix) || !strings.HasPrefix(res.Secret, res.Key.Prefix) {
		t.Errorf("secret %q must start with %q and with the key's prefix %q", res.Secret, contracts.KeyPrefix, res.Key.Prefix)
	}
	if res.Key.Hash != contracts.HashKey(res.Secret) || strings.Contains(res.Key.Hash, res.Secret) {
		t.Errorf("key hash %q is not the hash of the secret", res.Key.Hash)
	}
	if err := bcrypt.CompareHashAndPassword([]byte(res.User.PasswordHash), []byte("correct horse battery")); err != nil {
		t.Errorf("password hash does not match the password: %v", err)
	}
	u, err := a.Store.GetUserByEmail(ctx, "alice@example.com")
	if err != nil || u.ID != res.User.ID {
		t.Errorf("stored user = %+v, %v; want %s", u, err, res.User.ID)
	}
}

func TestSignupTakenEmail(t *testing.T) {
	a := newAccounts(t)
	mustSignup(t, a, "alice@example.com")
	_, err := a.Signup(context.Background(), contracts.SignupInput{OrgName: "Other", Email: "ALICE@example.com", Password: "correct horse battery"})
	ae := appError(t, err)
	if ae.Kind != agentmarket.Conflict || ae.Code != "email_taken" || fieldRules(ae) != "email:unique" {
		t.Errorf("err = %s %s %q, want conflict email_taken email:unique", ae.Kind, ae.Code, fieldRules(ae))
	}
}

func TestAuthenticate(t *testing.T) {
	ctx := context.Background()
	a := newAccounts(t)
	res := mustSignup(t, a, "alice@example.com")

	got, err := a.Authenticate(ctx, res.Secret)
	if err != nil {
		t.Fatal(err)
	}
	want := agentmarket.Actor{OrgID: res.Org.ID, KeyID: res.Key.ID, Role: agentmarket.RoleAdmin}
	if got != want {
		t.Errorf("Authenticate = %+v, want %+v", got, want)
	}

	revokedRes := mustSignup(t, a, "bob@example.com")
	if _, err := a.RevokeKey(ctx, agentmarket.Actor{OrgID: revokedRes.Org.ID, Role: agentmarket.RoleAdmin}, revokedRes.Key.ID); err != nil {
		t.Fatal(err)
	}
	bad := []struct{ name, secret string }{
		{"empty", ""},
		{"unknown key", contracts.KeyPrefix + agentmarket.RandomToken(20)},
		{"known key with one character changed", res.Secret[:len(res.Secret)-1] + flip(res.Secret[len(res.Secret)-1])},
		{"revoked key", revokedRes.Secret},
		{"no amk_ prefix", strings.TrimPrefix(res.Secret, contracts.KeyPrefix)},
		{"other prefix", "sk_" + strings.TrimPrefix(res.Secret, contracts.KeyPrefix)},
		{"prefix in capitals", strings.ToUpper(contracts.KeyPrefix) + strings.TrimPrefix(res.Secret, contracts.KeyPrefix)},
		{"over 200 characters", res.Secret + strings.Repeat("a", 201)},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			got, err := a.Authenticate(ctx, tc.secret)
			if agentmarket.KindOf(err) != agentmarket.Unauthorized || agentmarket.CodeOf(err) != "invalid_api_key" {
				t.Fatalf("Authenticate = %+v, %v; want unauthorized invalid_api_key", got, err)
			}
			if got != (agentmarket.Actor{}) {
				t.Errorf("actor = %+v, want none", got)
			}
		})
	}
}

func flip(c byte) string {
	if c == 'a' {
		return "b"
	}
	return "a"
}

func TestCreateKey(t *testing.T) {
	budget := func(n int64) *int64 { return &n }
	type result struct {
		kind agentmarket.Kind // empty for success
		code string
		want string // field:rule pairs of an Invalid error
	}
	ok := result{}
	cases := []struct {
		name  string
		actor agentmarket.Role
		in    contracts.KeyInput
		want  result
		role  agentmarket.Role // of the created key
	}{
		{"buyer mints buyer", agentmarket.RoleBuyer, contracts.KeyInput{Name: "bot", Role: agentmarket.RoleBuyer}, ok, agentmarket.RoleBuyer},
		{"role defaults to the caller's", agentmarket.RoleBuyer, contracts.KeyInput{Name: "bot"}, ok, agentmarket.RoleBuyer},
		{"seller key role defaults to seller", agentmarket.RoleSeller, contracts.KeyInput{Name: "bot"}, ok, agentmarket.RoleSeller},
		{"buyer cannot mint seller", agentmarket.RoleBuyer, contracts.KeyInput{Name: "bot", Role: agentmarket.RoleSeller}, result{kind: agentmarket.Forbidden, code: "role_escalation"}, ""},
		{"buyer cannot mint admin", agentmarket.RoleBuyer, contracts.KeyInput{Name: "bot", Role: agentmarket.RoleAdmin}, result{kind: agentmarket.Forbidden, code: "role_escalation"}, ""},
		{"buyer cannot mint finance", agentmarket.RoleBuyer, contracts.KeyInput{Name: "bot", Role: agentmarket.RoleFinance}, result{kind: agentmarket.Forbidden, code: "role_escalation"}, ""},
		{"seller mints seller", agentmarket.RoleSeller, contracts.KeyInput{Name: "ci", Role: agentmarket.RoleSeller}, ok, agentmarket.RoleSeller},
		{"seller cannot mint admin", agentmarket.RoleSeller, contracts.KeyInput{Name: "ci", Role: agentmarket.RoleAdmin}, result{kind: agentmarket.Forbidden, code: "role_escalation"}, ""},
		{"finance cannot mint seller", agentmarket.RoleFinance, contracts.KeyInput{Name: "books", Role: agentmarket.RoleSeller}, result{kind: agentmarket.Forbidden, code: "role_escalation"}, ""},
		{"admin mints admin", agentmarket.RoleAdmin, contracts.KeyInput{Name: "ops", Role: agentmarket.RoleAdmin}, ok, agentmarket.RoleAdmin},
		{"admin mints seller", agentmarket.RoleAdmin, contracts.KeyInput{Name: "ops", Role: agentmarket.RoleSeller}, ok, agentmarket.RoleSeller},
		{"admin mints buyer", agentmarket.RoleAdmin, contracts.KeyInput{Name: "ops", Role: agentmarket.RoleBuyer}, ok, agentmarket.RoleBuyer},
		{"admin mints finance", agentmarket.RoleAdmin, contracts.KeyInput{Name: "ops", Role: agentmarket.RoleFinance}, ok, agentmarket.RoleFinance},
		{"zero budget", agentmarket.RoleAdmin, contracts.KeyInput{Name: "ops", MonthlyBudgetMicros: budget(0)}, ok, agentmarket.RoleAdmin},
		{"negative budget", agentmarket.RoleAdmin, contracts.KeyInput{Name: "ops", MonthlyBudgetMicros: budget(-1)},
			result{kind: agentmarket.Invalid, code: "invalid_api_key_request", want: "monthly_budget_micros:non_negative"}, ""},
		{"the largest budget", agentmarket.RoleAdmin, contracts.KeyInput{Name: "ops", MonthlyBudgetMicros: budget(agentmarket.MaxBudgetMicros)}, ok, agentmarket.RoleAdmin},
		{"a budget past the bound", agentmarket.RoleAdmin, contracts.KeyInput{Name: "ops", MonthlyBudgetMicros: budget(agentmarket.MaxBudgetMicros + 1)},
			result{kind: agentmarket.Invalid, code: "invalid_api_key_request", want: "monthly_budget_micros:max"}, ""},
		{"blank name", agentmarket.RoleAdmin, contracts.KeyInput{Name: "  "}, result{kind: agentmarket.Invalid, code: "invalid_api_key_request", want: "name:required"}, ""},
		{"name of 100 characters", agentmarket.RoleAdmin, contracts.KeyInput{Name: strings.Repeat("k", 100)}, ok, agentmarket.RoleAdmin},
		{"name of 101 characters", agentmarket.RoleAdmin, contracts.KeyInput{Name: strings.Repeat("k", 101)}, result{kind: agentmarket.Invalid, code: "invalid_api_key_request", want: "name:max_length"}, ""},
		{"name of 3 MiB", agentmarket.RoleAdmin, contracts.KeyInput{Name: strings.Repeat("k", 3<<20)}, result{kind: agentmarket.Invalid, code: "invalid_api_key_request", want: "name:max_length"}, ""},
		{"name with NUL", agentmarket.RoleAdmin, contracts.KeyInput{Name: "bot\x00"}, result{kind: agentmarket.Invalid, code: "invalid_api_key_request", want: "name:control_character"}, ""},
		{"name with an escape sequence", agentmarket.RoleAdmin, contracts.KeyInput{Name: "bot\x1b[2J"}, result{kind: agentmarket.Invalid, code: "invalid_api_key_request", want: "name:control_character"}, ""},
		{"name not UTF-8", agentmarket.RoleAdmin, contracts.KeyInput{Name: "bot\xc3"}, result{kind: agentmarket.Invalid, code: "invalid_api_key_request", want: "name:utf8"}, ""},
		{"unknown role", agentmarket.RoleAdmin, contracts.KeyInput{Name: "ops", Role: "root"}, result{kind: agentmarket.Invalid, code: "invalid_api_key_request", want: "role:enum"}, ""},
		{"every problem at once", agentmarket.RoleBuyer, contracts.KeyInput{Role: "root", MonthlyBudgetMicros: budget(-5)},
			result{kind: agentmarket.Invalid, code: "invalid_api_key_request", want: "name:required role:enum monthly_budget_micros:non_negative"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			a := newAccounts(t)
			res := mustSignup(t, a, "alice@example.com")
			actor := agentmarket.Actor{OrgID: res.Org.ID, KeyID: res.Key.ID, Role: tc.actor}
			a.Clock.(*agentmarket.ManualClock).Advance(time.Minute) // keys list in creation order

			k, secret, err := a.CreateKey(ctx, actor, tc.in)
			if tc.want.kind != "" {
				ae := appError(t, err)
				if ae.Kind != tc.want.kind || ae.Code != tc.want.code || fieldRules(ae) != tc.want.want {
					t.Fatalf("err = %s %s %q, want %s %s %q", ae.Kind, ae.Code, fieldRules(ae), tc.want.kind, tc.want.code, tc.want.want)
				}
				if ks, _ := a.ListKeys(ctx, actor); len(ks) != 1 {
					t.Errorf("refused key was stored: %d keys", len(ks))
				}
				return
			}
			if err != nil {
				t.Fatalf("CreateKey: %v", err)
			}
			if k.Role != tc.role || k.OrgID != res.Org.ID {
				t.Errorf("key = %+v, want role %s in %s", k, tc.role, res.Org.ID)
			}
			if fmt.Sprint(deref(k.MonthlyBudgetMicros)) != fmt.Sprint(deref(tc.in.MonthlyBudgetMicros)) {
				t.Errorf("budget = %v, want %v", deref(k.MonthlyBudgetMicros), deref(tc.in.MonthlyBudgetMicros))
			}
			got, err := a.Authenticate(ctx, secret)
			if err != nil {
				t.Fatalf("Authenticate(new key): %v", err)
			}
			if fmt.Sprint(deref(got.KeyBudgetMicros)) != fmt.Sprint(deref(tc.in.MonthlyBudgetMicros)) {
				t.Errorf("Authenticate(new key) budget = %v, want %v", deref(got.KeyBudgetMicros), deref(tc.in.MonthlyBudgetMicros))
			}
			got.KeyBudgetMicros = nil
			if want := (agentmarket.Actor{OrgID: res.Org.ID, KeyID: k.ID, Role: tc.role}); got != want {
				t.Errorf("Authenticate(new key) = %+v, want %+v", got, want)
			}
			ks, err := a.ListKeys(ctx, actor)
			if err != nil || len(ks) != 2 || ks[1].ID != k.ID {
				t.Errorf("ListKeys = %+v, %v; want the first key and %s", ks, err, k.ID)
			}
		})
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestRevokeKeyOfAnotherOrg(t *testing.T) {
	ctx := context.Background()
	a := newAccounts(t)
	alice := mustSignup(t, a, "alice@example.com")
	bob := mustSignup(t, a, "bob@example.com")
	_, err := a.RevokeKey(ctx, agentmarket.Actor{OrgID: alice.Org.ID, Role: agentmarket.RoleAdmin}, bob.Key.ID)
	if agentmarket.KindOf(err) != agentmarket.NotFound {
		t.Fatalf("RevokeKey of bob's key by alice: %v, want not found", err)
	}
	if _, err := a.Authenticate(ctx, bob.Secret); err != nil {
		t.Errorf("bob's key no longer works: %v", err)
	}
}

func TestEnsurePlatform(t *testing.T) {
	ctx := context.Background()
	a := newAccounts(t)
	mustSignup(t, a, "alice@example.com") // a customer org is not the platform

	org, secret, err := a.EnsurePlatform(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if !org.Platform || secret == "" || !strings.HasPrefix(secret, contracts.KeyPrefix) {
		t.Fatalf("first EnsurePlatform = %+v, %q; want the platform org and an amk_ secret", org, secret)
	}
	again, secret2, err := a.EnsurePlatform(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != org.ID || secret2 != "" {
		t.Errorf("second EnsurePlatform = %s, %q; want %s and no secret", again.ID, secret2, org.ID)
	}

	actor, err := a.Authenticate(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := a.ListKeys(ctx, actor)
	if err != nil || len(keys) != 1 {
		t.Fatalf("operator keys = %+v, %v; want exactly one", keys, err)
	}
	if want := (agentmarket.Actor{OrgID: org.ID, KeyID: keys[0].ID, Role: agentmarket.RoleAdmin, Operator: true}); actor != want {
		t.Errorf("operator actor = %+v, want %+v", actor, want)
	}
}

func TestEnsurePlatformGivenKey(t *testing.T) {
	ctx := context.Background()
	a := newAccounts(t)
	given := contracts.KeyPrefix + "operator-supplied-0123456789"

	org, secret, err := a.EnsurePlatform(ctx, given)
	if err != nil {
		t.Fatal(err)
	}
	if secret != given {
		t.Errorf("secret = %q, want the given key %q", secret, given)
	}
	actor, err := a.Authenticate(ctx, given)
	if err != nil {
		t.Fatalf("Authenticate(given key): %v", err)
	}
	if actor.OrgID != org.ID || !actor.Operator || actor.Role != agentmarket.RoleAdmin {
		t.Errorf("actor = %+v, want an admin operator of %s", actor, org.ID)
	}
	keys, _ := a.ListKeys(ctx, actor)
	if len(keys) != 1 || strings.Contains(keys[0].Prefix, "0123456789") || !strings.HasPrefix(given, keys[0].Prefix) {
		t.Errorf("stored key = %+v, want one key whose prefix starts the given key and hides its tail", keys)
	}

	// On later starts the key is already there; giving it again changes nothing.
	_, secret, err = a.EnsurePlatform(ctx, given)
	if err != nil || secret != "" {
		t.Errorf("second EnsurePlatform = %q, %v; want no secret", secret, err)
	}
}

// staleStore answers the first PlatformOrg as it stood before another
// process created the platform org: two replicas starting at once both
// find none.
type staleStore struct {
	contracts.Store
	checked bool
}

func (s *staleStore) PlatformOrg(ctx context.Context) (*contracts.Org, error) {
	if !s.checked {
		s.checked = true
		return nil, agentmarket.Errorf(agentmarket.NotFound, "org_not_found", "org not found")
	}
	return s.Store.PlatformOrg(ctx)
}

func TestEnsurePlatformRacingStarts(t *testing.T) {
	for _, given := range []string{"", contracts.KeyPrefix + "operator-supplied-0123456789"} {
		t.Run(fmt.Sprintf("given key %q", given), func(t *testing.T) {
			ctx := context.Background()
			first := newAccounts(t)
			second := &contracts.Accounts{Store: &staleStore{Store: first.Store}, Clock: first.Clock, BcryptCost: bcrypt.MinCost}

			org, _, err := first.EnsurePlatform(ctx, given)
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := second.EnsurePlatform(ctx, given)
			if err != nil {
				t.Fatalf("second replica: %v, want it to start with the existing platform org", err)
			}
			if got.ID != org.ID {
				t.Errorf("second replica made platform org %s, want the one platform org %s", got.ID, org.ID)
			}
		})
	}
}

// TestRevokeKeyRoles: admins revoke any key of their org; every other key
// only itself, never an admin key nor a sibling.
func TestRevokeKeyRoles(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		by     agentmarket.Role
		target string // "admin", "sibling" (another key of the caller's role) or "self"
		want   agentmarket.Kind
	}{
		{"seller key revokes an admin key", agentmarket.RoleSeller, "admin", agentmarket.Forbidden},
		{"buyer key revokes an admin key", agentmarket.RoleBuyer, "admin", agentmarket.Forbidden},
		{"seller key revokes another seller key", agentmarket.RoleSeller, "sibling", agentmarket.Forbidden},
		{"buyer key revokes another buyer key", agentmarket.RoleBuyer, "sibling", agentmarket.Forbidden},
		{"finance key revokes an admin key", agentmarket.RoleFinance, "admin", agentmarket.Forbidden},
		{"buyer key revokes itself", agentmarket.RoleBuyer, "self", ""},
		{"seller key revokes itself", agentmarket.RoleSeller, "self", ""},
		{"admin key revokes a buyer key", agentmarket.RoleAdmin, "sibling", ""},
		{"admin key revokes another admin key", agentmarket.RoleAdmin, "admin", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAccounts(t)
			res := mustSignup(t, a, "alice@example.com")
			admin := agentmarket.Actor{OrgID: res.Org.ID, KeyID: res.Key.ID, Role: agentmarket.RoleAdmin}
			mint := func(role agentmarket.Role) *contracts.APIKey {
				k, _, err := a.CreateKey(ctx, admin, contracts.KeyInput{Name: string(role), Role: role})
				if err != nil {
					t.Fatal(err)
				}
				return k
			}
			caller := mint(tc.by)
			target := map[string]*contracts.APIKey{"admin": res.Key, "sibling": mint(tc.by), "self": caller}[tc.target]
			if tc.by == agentmarket.RoleAdmin && tc.target == "sibling" {
				target = mint(agentmarket.RoleBuyer)
			}
			actor := agentmarket.Actor{OrgID: res.Org.ID, KeyID: caller.ID, Role: tc.by}
			_, err := a.RevokeKey(ctx, actor, target.ID)
			if agentmarket.KindOf(err) != tc.want && !(tc.want == "" && err == nil) {
				t.Fatalf("RevokeKey: %v, want %q", err, tc.want)
			}
			ks, _ := a.ListKeys(ctx, admin)
			for _, k := range ks {
				if k.ID == target.ID && (k.RevokedAt != nil) != (tc.want == "") {
					t.Errorf("target revoked = %v, want %v", k.RevokedAt != nil, tc.want == "")
				}
			}
		})
	}
	// A browser session of a non-admin user holds no key: it revokes none.
	a := newAccounts(t)
	res := mustSignup(t, a, "alice@example.com")
	if _, err := a.RevokeKey(ctx, agentmarket.Actor{OrgID: res.Org.ID, UserID: res.User.ID, Role: agentmarket.RoleBuyer}, res.Key.ID); agentmarket.KindOf(err) != agentmarket.Forbidden {
		t.Errorf("keyless buyer session revokes the admin key: %v, want forbidden", err)
	}
}

// spendOf is a usage store's answer to how much each key spent.
type spendOf map[string]int64

func (s spendOf) Spent(_ context.Context, apiKeyID, _ string, from time.Time) (int64, error) {
	if from != time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC) {
		return 0, fmt.Errorf("asked for spend since %v, want the month's start", from)
	}
	return s[apiKeyID], nil
}

// TestCreateKeyWithinBudget: a key with a monthly budget mints only keys
// with a budget no larger than what it has left this month, and hands that
// budget over, so that it and its keys together can never spend more than
// its budget (the budget escape: a capped key minting an uncapped one).
func TestCreateKeyWithinBudget(t *testing.T) {
	ctx := context.Background()
	budget := func(n int64) *int64 { return &n }
	cases := []struct {
		name       string
		cap, spent int64
		in         *int64 // the new key's budget
		want       string // error code, "" for success
		parentLeft int64  // the minting key's budget afterwards
	}{
		{"uncapped child refused", 100, 0, nil, "budget_escalation", 100},
		{"child over the cap refused", 100, 0, budget(101), "budget_escalation", 100},
		{"child over what is left refused", 100, 40, budget(61), "budget_escalation", 100},
		{"child with what is left", 100, 40, budget(60), "", 40},
		{"child with part of the budget", 100, 0, budget(30), "", 70},
		{"zero-budget child of a spent key", 100, 150, budget(0), "", 100},
		{"any budget from a spent key refused", 100, 100, budget(1), "budget_escalation", 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAccounts(t)
			res := mustSignup(t, a, "alice@example.com")
			admin := agentmarket.Actor{OrgID: res.Org.ID, KeyID: res.Key.ID, Role: agentmarket.RoleAdmin}
			parent, _, err := a.CreateKey(ctx, admin, contracts.KeyInput{Name: "capped", Role: agentmarket.RoleBuyer, MonthlyBudgetMicros: budget(tc.cap)})
			if err != nil {
				t.Fatal(err)
			}
			a.Spend = spendOf{parent.ID: tc.spent}
			actor := agentmarket.Actor{OrgID: res.Org.ID, KeyID: parent.ID, Role: agentmarket.RoleBuyer, KeyBudgetMicros: parent.MonthlyBudgetMicros}
			child, _, err := a.CreateKey(ctx, actor, contracts.KeyInput{Name: "child", MonthlyBudgetMicros: tc.in})
			if tc.want != "" {
				ae := appError(t, err)
				if ae.Kind != agentmarket.Forbidden || ae.Code != tc.want || fieldRules(ae) != "monthly_budget_micros:within_budget" {
					t.Errorf("err = %s %s %q, want forbidden %s monthly_budget_micros:within_budget", ae.Kind, ae.Code, fieldRules(ae), tc.want)
				}
			} else if err != nil || deref(child.MonthlyBudgetMicros) != deref(tc.in) {
				t.Fatalf("CreateKey = %+v, %v; want a key with budget %v", child, err, deref(tc.in))
			}
			ks, _ := a.ListKeys(ctx, admin)
			var left any
			for _, k := range ks {
				if k.ID == parent.ID {
					left = deref(k.MonthlyBudgetMicros)
				}
			}
			wantKeys := 3 // the signup's, the capped one, the child
			if tc.want != "" {
				wantKeys = 2
			}
			if len(ks) != wantKeys || left != tc.parentLeft {
				t.Errorf("%d keys, minting key's budget %v; want %d keys, budget %d", len(ks), left, wantKeys, tc.parentLeft)
			}
		})
	}

	t.Run("keys minted down a chain never spend more than the first budget", func(t *testing.T) {
		a := newAccounts(t)
		res := mustSignup(t, a, "alice@example.com")
		admin := agentmarket.Actor{OrgID: res.Org.ID, KeyID: res.Key.ID, Role: agentmarket.RoleAdmin}
		spend := spendOf{}
		a.Spend = spend
		k, _, err := a.CreateKey(ctx, admin, contracts.KeyInput{Name: "root", Role: agentmarket.RoleBuyer, MonthlyBudgetMicros: budget(100)})
		if err != nil {
			t.Fatal(err)
		}
		chain := []*contracts.APIKey{k}
		// Each key spends half of what it has, then hands the rest on.
		for i := 0; i < 5; i++ {
			spend[k.ID] = *k.MonthlyBudgetMicros / 2
			actor := agentmarket.Actor{OrgID: res.Org.ID, KeyID: k.ID, Role: agentmarket.RoleBuyer, KeyBudgetMicros: k.MonthlyBudgetMicros}
			give := *k.MonthlyBudgetMicros - spend[k.ID]
			if k, _, err = a.CreateKey(ctx, actor, contracts.KeyInput{Name: fmt.Sprint("link ", i), MonthlyBudgetMicros: &give}); err != nil {
				t.Fatal(err)
			}
			chain = append(chain, k)
		}
		var capacity int64
		ks, _ := a.ListKeys(ctx, admin)
		for _, k := range ks {
			if k.MonthlyBudgetMicros != nil {
				capacity += max(*k.MonthlyBudgetMicros, spend[k.ID])
			}
		}
		if capacity != 100 {
			t.Errorf("the chain of %d keys may spend %d this month, want the root's 100", len(chain), capacity)
		}
	})

	t.Run("spend unknown: a capped key cannot mint", func(t *testing.T) {
		a := newAccounts(t)
		res := mustSignup(t, a, "alice@example.com")
		actor := agentmarket.Actor{OrgID: res.Org.ID, KeyID: res.Key.ID, Role: agentmarket.RoleAdmin, KeyBudgetMicros: budget(100)}
		_, _, err := a.CreateKey(ctx, actor, contracts.KeyInput{Name: "child", MonthlyBudgetMicros: budget(1)})
		if agentmarket.KindOf(err) != agentmarket.Unavailable {
			t.Errorf("CreateKey without a spend reader: %v, want unavailable", err)
		}
	})
}
