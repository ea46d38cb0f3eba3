// Package contracts holds the parties and their agreements: organisations,
// their users and API keys, the roles they act in, and (with the meter) the
// contracts that let a buyer org invoke a listing. It owns the types, the
// rules and the interfaces it needs; adapters live in subpackages.
package contracts

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/mail"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/agentmarket/agentmarket"
)

// Org is an organisation: a seller, a buyer, or both. The platform's own
// org is the operator.
type Org struct {
	ID       string
	Name     string
	Platform bool
	// ConnectAccountID is the seller's Stripe Connect account ("acct_…"):
	// subscriptions to its listings transfer its share there.
	ConnectAccountID string
	// MonthlyBudgetMicros caps what the org's calls through the meter may
	// cost per calendar month, over all its keys and subscriptions; nil:
	// none.
	MonthlyBudgetMicros *int64
	// RateLimits are the org's rate limits through the meter, over all
	// its keys and subscriptions (zero: none).
	RateLimits agentmarket.RateLimits
	// HasCredit: the org holds a prepaid credit account (credit.go).
	HasCredit bool
	CreatedAt time.Time
}

// User is a person who signs in to an org.
type User struct {
	ID           string
	OrgID        string
	Email        string
	PasswordHash string
	Role         agentmarket.Role
	CreatedAt    time.Time
}

// APIKey is a bearer key for an org's software. Only its hash is stored;
// the key itself is shown once, when created.
type APIKey struct {
	ID     string
	OrgID  string
	Name   string
	Prefix string // the first characters of the key, to recognise it
	Hash   string // hex SHA-256 of the whole key
	Role   agentmarket.Role
	// MonthlyBudgetMicros caps what calls made with this key may cost per
	// month; nil means no cap.
	MonthlyBudgetMicros *int64
	// AlertThresholds are the budget's own spend alert thresholds, in
	// percent (nil: the org's).
	AlertThresholds []int
	// Tags are the key's cost allocation tags: the usage rows of its calls
	// carry them.
	Tags agentmarket.Tags
	// RateLimits are the key's rate limits through the meter (zero: none).
	RateLimits agentmarket.RateLimits
	CreatedAt  time.Time
	RevokedAt  *time.Time
}

// KeyPrefix starts every AgentMarket API key, so leaked keys are easy to
// recognise by secret scanners.
const KeyPrefix = "amk_"

// Store persists accounts. Implementations: contracts/gormstore; every
// implementation passes contracts/storetest.
type Store interface {
	// CreateOrg stores a new org with its first user and key, atomically;
	// a taken e-mail is a Conflict.
	CreateOrg(ctx context.Context, o *Org, u *User, k *APIKey) error
	GetOrg(ctx context.Context, id string) (*Org, error)
	PlatformOrg(ctx context.Context) (*Org, error)
	GetUserByEmail(ctx context.Context, email string) (*User, error)
	// SetConnectAccount records an org's payout account ("" removes it).
	SetConnectAccount(ctx context.Context, orgID, accountID string) (*Org, error)
	// SetOrgBudget sets (nil: removes) an org's monthly budget.
	SetOrgBudget(ctx context.Context, orgID string, budget *int64) (*Org, error)
	// SetOrgRateLimits sets an org's rate limits (zero: none).
	SetOrgRateLimits(ctx context.Context, orgID string, l agentmarket.RateLimits) (*Org, error)
	// SetKeyRateLimits sets the rate limits of the org's key id.
	SetKeyRateLimits(ctx context.Context, orgID, id string, l agentmarket.RateLimits) (*APIKey, error)
	CreateAPIKey(ctx context.Context, k *APIKey) error
	// CreateAPIKeyFrom stores k, minted by the org's key parentID, and
	// lowers parentID's monthly budget from parentBudget by k's budget,
	// atomically; a Conflict (budget_changed) when parentID is revoked or
	// its budget is no longer parentBudget.
	CreateAPIKeyFrom(ctx context.Context, k *APIKey, parentID string, parentBudget int64) error
	// APIKeyByHash finds a key by its hash, revoked or not.
	APIKeyByHash(ctx context.Context, hash string) (*APIKey, error)
	ListAPIKeys(ctx context.Context, orgID string) ([]APIKey, error)
	// RevokeAPIKey marks the org's key revoked at t; NotFound for a key of
	// another org.
	RevokeAPIKey(ctx context.Context, orgID, id string, t time.Time) (*APIKey, error)
}

// Accounts is the account service.
type Accounts struct {
	Store Store
	Clock agentmarket.Clock
	// BcryptCost is the password hashing cost; 0 means bcrypt.DefaultCost.
	BcryptCost int
	// Spend reads keys' spend, for keys with a budget that mint keys; nil:
	// such keys cannot mint.
	Spend Spend
	// Throttle slows down guessing through the *From entry points
	// (password and key sign-in, sign-up); nil: one in this process's
	// memory with the defaults.
	Throttle *Throttle
	// Audit records every key made and revoked and every change of an
	// org's settings (nil: none is).
	Audit agentmarket.ChangeRecorder
	// Mails, when set, confirms sign-ups through the SignupFrom entry
	// point by mail (the "confirm" sign-up mode); nil: SignupFrom creates
	// the org at once ("open").
	Mails *SignupMails

	throttleOnce sync.Once
}

// Lengths of the names people give, in characters (agentmarket.Fields.Text).
const (
	MaxOrgName = 200
	MaxEmail   = 254 // the longest address SMTP carries (RFC 5321)
	MaxKeyName = 100
)

// SignupInput is what a new organisation sends.
type SignupInput struct {
	OrgName  string `json:"org_name"`
	Email    string `json:"email"`
	Password string `json:"password"`
}

// Validate reports every broken rule.
func (in *SignupInput) Validate() error {
	var fe agentmarket.Fields
	in.validateOrgName(&fe)
	in.validateEmail(&fe)
	in.validatePassword(&fe)
	return fe.Err("invalid_signup", "the sign-up is not valid")
}

// validateEmail checks (and normalises) the e-mail.
func (in *SignupInput) validateEmail(fe *agentmarket.Fields) {
	in.Email = strings.TrimSpace(in.Email)
	if in.Email == "" {
		fe.Add("email", "required", "email is required")
	} else if fe.Text("email", in.Email, MaxEmail) { // before ToLower, which would hide bad UTF-8
		in.Email = strings.ToLower(in.Email)
		if a, err := mail.ParseAddress(in.Email); err != nil || a.Address != in.Email {
			fe.Add("email", "format", "email must be an e-mail address like name@example.com")
		}
	}
}

// validateAccount checks (and normalises) what the account is made with:
// the org's name and the password.
func (in *SignupInput) validateAccount(fe *agentmarket.Fields) {
	in.validateOrgName(fe)
	in.validatePassword(fe)
}

func (in *SignupInput) validateOrgName(fe *agentmarket.Fields) {
	in.OrgName = strings.TrimSpace(in.OrgName)
	if in.OrgName == "" {
		fe.Add("org_name", "required", "org_name is required")
	} else {
		fe.Text("org_name", in.OrgName, MaxOrgName)
	}
}

func (in *SignupInput) validatePassword(fe *agentmarket.Fields) {
	if len(in.Password) < 10 {
		fe.Add("password", "min_length", "password must be at least 10 characters")
	} else if len(in.Password) > 72 {
		fe.Add("password", "max_length", "password must be at most 72 bytes")
	}
}

// SignupResult is what a sign-up creates; Key is the only time the
// plaintext key is ever shown.
type SignupResult struct {
	Org  *Org
	User *User
	Key  *APIKey
	// Secret is the plaintext API key.
	Secret string
	// Mailed: the sign-up is confirmed by mail (SignupMails), so nothing
	// is created yet and the other fields are nil; the answer is the same
	// whether the e-mail is new or already registered.
	Mailed bool
}

// Signup creates an org, its admin user and a first admin API key.
func (a *Accounts) Signup(ctx context.Context, in SignupInput) (*SignupResult, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	hash, err := a.hashPassword(in.Password)
	if err != nil {
		return nil, err
	}
	return a.createOrg(ctx, in.OrgName, in.Email, hash)
}

// hashPassword is the stored form of a password (bcrypt at BcryptCost).
func (a *Accounts) hashPassword(password string) (string, error) {
	cost := a.BcryptCost
	if cost == 0 {
		cost = bcrypt.DefaultCost
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), cost)
	if err != nil {
		return "", agentmarket.Wrap(agentmarket.Internal, "password_hash_failed", err, "could not store the password")
	}
	return string(hash), nil
}

// createOrg stores a new org named orgName with its admin user (email,
// the password's hash) and first admin key; a taken e-mail is a Conflict.
func (a *Accounts) createOrg(ctx context.Context, orgName, email, passwordHash string) (*SignupResult, error) {
	now := a.Clock.Now()
	o := &Org{ID: agentmarket.NewID("org"), Name: orgName, CreatedAt: now}
	u := &User{ID: agentmarket.NewID("usr"), OrgID: o.ID, Email: email, PasswordHash: passwordHash, Role: agentmarket.RoleAdmin, CreatedAt: now}
	secret, k := newKey(o.ID, "first admin key", agentmarket.RoleAdmin, nil, now)
	if err := a.Store.CreateOrg(ctx, o, u, k); err != nil {
		if agentmarket.KindOf(err) == agentmarket.Conflict {
			return nil, &agentmarket.Error{Kind: agentmarket.Conflict, Code: "email_taken", Message: "an account with this e-mail already exists",
				Fields: []agentmarket.FieldError{{Field: "email", Rule: "unique", Message: "this e-mail is already registered"}}}
		}
		return nil, err
	}
	if err := a.recordOrg(ctx, agentmarket.Actor{OrgID: o.ID, UserID: u.ID, Role: u.Role}, o, k); err != nil {
		return nil, err
	}
	return &SignupResult{Org: o, User: u, Key: k, Secret: secret}, nil
}

// recordOrg records a new org and its first key, made by actor.
func (a *Accounts) recordOrg(ctx context.Context, actor agentmarket.Actor, o *Org, k *APIKey) error {
	err := agentmarket.RecordChange(ctx, a.Audit, agentmarket.Change{Actor: actor, Action: "org.create", ObjectType: "org", ObjectID: o.ID, OrgID: o.ID,
		After: map[string]any{"id": o.ID, "name": o.Name, "platform": o.Platform}})
	if err != nil {
		return err
	}
	return a.recordKey(ctx, actor, "api_key.create", nil, k)
}

// EnsurePlatform creates the platform (operator) org on first start and
// returns its org; when it creates it, secret is the operator's first admin
// key, or the given key when not empty (so operators can supply their own).
func (a *Accounts) EnsurePlatform(ctx context.Context, givenKey string) (org *Org, secret string, err error) {
	o, err := a.Store.PlatformOrg(ctx)
	if err == nil {
		return o, "", nil
	}
	if agentmarket.KindOf(err) != agentmarket.NotFound {
		return nil, "", err
	}
	now := a.Clock.Now()
	o = &Org{ID: agentmarket.NewID("org"), Name: "AgentMarket platform", Platform: true, CreatedAt: now}
	secret, k := newKey(o.ID, "operator key", agentmarket.RoleAdmin, nil, now)
	if givenKey != "" {
		secret = givenKey
		k.Prefix, k.Hash = keyPrefix(givenKey), HashKey(givenKey)
	}
	if err := a.Store.CreateOrg(ctx, o, nil, k); err != nil {
		if agentmarket.KindOf(err) == agentmarket.Conflict {
			// Another replica created it first (the database allows one).
			o, err := a.Store.PlatformOrg(ctx)
			return o, "", err
		}
		return nil, "", err
	}
	// Made by no one: the first start.
	return o, secret, a.recordOrg(ctx, agentmarket.Actor{}, o, k)
}

func keyPrefix(secret string) string {
	if len(secret) > 12 {
		return secret[:12]
	}
	return secret
}

// HashKey is the stored form of an API key. Keys carry 160 random bits, so
// a fast hash is safe here and keeps authentication off the CPU.
func HashKey(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func newKey(orgID, name string, role agentmarket.Role, budget *int64, now time.Time) (string, *APIKey) {
	secret := KeyPrefix + agentmarket.RandomToken(20)
	return secret, &APIKey{
		ID:                  agentmarket.NewID("key"),
		OrgID:               orgID,
		Name:                name,
		Prefix:              keyPrefix(secret),
		Hash:                HashKey(secret),
		Role:                role,
		MonthlyBudgetMicros: budget,
		CreatedAt:           now,
	}
}

// KeyInput is a request for a new API key.
type KeyInput struct {
	Name                string           `json:"name"`
	Role                agentmarket.Role `json:"role"`
	MonthlyBudgetMicros *int64           `json:"monthly_budget_micros"`
	// AlertThresholds are the budget's own spend alert thresholds (nil:
	// the org's).
	AlertThresholds []int `json:"alert_thresholds"`
	// Tags are the key's cost allocation tags, e.g. {"team": "payments"}.
	Tags map[string]string `json:"tags"`
	tags agentmarket.Tags
}

// Validate reports every broken rule of the request itself; whether the
// caller may mint such a key is CreateKey's question.
func (in *KeyInput) Validate() error {
	var fe agentmarket.Fields
	in.Name = strings.TrimSpace(in.Name)
	if in.Name == "" {
		fe.Add("name", "required", "name is required, e.g. \"orchestrator prod\"")
	} else {
		fe.Text("name", in.Name, MaxKeyName)
	}
	if in.Role != "" && !in.Role.Valid() {
		fe.Add("role", "enum", "role must be one of admin, seller, buyer, finance")
	}
	checkMonthlyBudget(&fe, in.MonthlyBudgetMicros)
	in.AlertThresholds = checkBudgetThresholds(&fe, in.AlertThresholds, in.MonthlyBudgetMicros)
	in.tags = agentmarket.ParseTags(&fe, "tags", in.Tags)
	return fe.Err("invalid_api_key_request", "the API key request is not valid")
}

// Spend tells what an API key has spent since from: the list price of its
// usage (the usage store's). A capped key hands over only what it has left.
type Spend interface {
	Spent(ctx context.Context, apiKeyID, contractID string, from time.Time) (int64, error)
}

// CreateKey makes a new API key for the actor's org. A key is never wider
// than the one that mints it:
//   - role: admins mint any role; any other key or user only its own;
//   - budget: a key with a monthly budget mints only keys with a budget,
//     and what it gives is taken out of its own. It may give at most what
//     it has left this month (its budget less its spend), and its own
//     budget drops by what it gave, so the keys it mints can never spend,
//     together with it, more than its budget did alone. The meter checks
//     each key against its own budget, unchanged.
func (a *Accounts) CreateKey(ctx context.Context, actor agentmarket.Actor, in KeyInput) (*APIKey, string, error) {
	if err := in.Validate(); err != nil {
		return nil, "", err
	}
	if in.Role == "" {
		in.Role = actor.Role
	}
	if !slices.Contains(MintableRoles(actor), in.Role) {
		return nil, "", agentmarket.Errorf(agentmarket.Forbidden, "role_escalation", "a %s key can only create %s keys", actor.Role, actor.Role)
	}
	secret, k := newKey(actor.OrgID, in.Name, in.Role, in.MonthlyBudgetMicros, a.Clock.Now())
	k.AlertThresholds, k.Tags = in.AlertThresholds, in.tags
	if actor.KeyBudgetMicros == nil {
		if err := a.Store.CreateAPIKey(ctx, k); err != nil {
			return nil, "", err
		}
		return k, secret, a.recordKey(ctx, actor, "api_key.create", nil, k)
	}
	left, err := a.budgetLeft(ctx, actor)
	if err != nil {
		return nil, "", err
	}
	if in.MonthlyBudgetMicros == nil || *in.MonthlyBudgetMicros > left {
		return nil, "", &agentmarket.Error{Kind: agentmarket.Forbidden, Code: "budget_escalation",
			Message: fmt.Sprintf("this key has a monthly budget of %d micros with %d left this month: the keys it creates need a budget of at most %d, which is taken from its own", *actor.KeyBudgetMicros, left, left),
			Fields: []agentmarket.FieldError{{Field: "monthly_budget_micros", Rule: "within_budget",
				Message: fmt.Sprintf("monthly_budget_micros is required and must be at most %d (what this key has left this month)", left)}}}
	}
	if err := a.Store.CreateAPIKeyFrom(ctx, k, actor.KeyID, *actor.KeyBudgetMicros); err != nil {
		return nil, "", err
	}
	if err := a.recordKey(ctx, actor, "api_key.create", nil, k); err != nil {
		return nil, "", err
	}
	// What the new key got was taken from the minting key's budget.
	rest := *actor.KeyBudgetMicros - *in.MonthlyBudgetMicros
	return k, secret, agentmarket.RecordChange(ctx, a.Audit, agentmarket.Change{Actor: actor, Action: "api_key.budget", ObjectType: "api_key",
		ObjectID: actor.KeyID, OrgID: actor.OrgID, Before: map[string]int64{"monthly_budget_micros": *actor.KeyBudgetMicros},
		After: map[string]int64{"monthly_budget_micros": rest}})
}

func (a *Accounts) recordKey(ctx context.Context, actor agentmarket.Actor, action string, before, after *APIKey) error {
	c := agentmarket.Change{Actor: actor, Action: action, ObjectType: "api_key", ObjectID: after.ID, OrgID: after.OrgID, After: keyRecordOf(after)}
	if before != nil {
		c.Before = keyRecordOf(before)
	}
	return agentmarket.RecordChange(ctx, a.Audit, c)
}

// MintableRoles are the roles of the keys actor may create: any for an
// admin, else only its own.
func MintableRoles(actor agentmarket.Actor) []agentmarket.Role {
	if actor.Role == agentmarket.RoleAdmin {
		return agentmarket.Roles
	}
	return []agentmarket.Role{actor.Role}
}

// MayRevoke reports whether actor may revoke the key keyID of its org:
// admins any, every other key only itself (a leaked buyer key must not be
// able to lock the org's admins out).
func MayRevoke(actor agentmarket.Actor, keyID string) bool {
	return actor.Role == agentmarket.RoleAdmin || (actor.KeyID != "" && keyID == actor.KeyID)
}

// budgetLeft is what a capped key may still spend this month (UTC, as the
// meter counts it).
func (a *Accounts) budgetLeft(ctx context.Context, actor agentmarket.Actor) (int64, error) {
	if a.Spend == nil {
		return 0, agentmarket.Errorf(agentmarket.Unavailable, "spend_unknown", "this key's spend cannot be read, so it cannot hand over part of its budget")
	}
	now := a.Clock.Now().UTC()
	spent, err := a.Spend.Spent(ctx, actor.KeyID, "", time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		return 0, agentmarket.Wrap(agentmarket.Unavailable, "spend_unknown", err, "this key's spend cannot be read now, so it cannot hand over part of its budget; try again later")
	}
	return max(*actor.KeyBudgetMicros-spent, 0), nil
}

// ListKeys lists the actor's org's keys (hashes are never shown).
func (a *Accounts) ListKeys(ctx context.Context, actor agentmarket.Actor) ([]APIKey, error) {
	return a.Store.ListAPIKeys(ctx, actor.OrgID)
}

// RevokeKey revokes one of the actor's org's keys, as MayRevoke allows.
func (a *Accounts) RevokeKey(ctx context.Context, actor agentmarket.Actor, id string) (*APIKey, error) {
	if !MayRevoke(actor, id) {
		return nil, agentmarket.Errorf(agentmarket.Forbidden, "revoke_forbidden", "a %s key can only revoke itself; ask an admin to revoke other keys", actor.Role)
	}
	k, err := a.Store.RevokeAPIKey(ctx, actor.OrgID, id, a.Clock.Now())
	if err != nil {
		return nil, err
	}
	before := *k
	before.RevokedAt = nil
	return k, a.recordKey(ctx, actor, "api_key.revoke", &before, k)
}

var errBadKey = agentmarket.Errorf(agentmarket.Unauthorized, "invalid_api_key", "the API key is unknown or revoked")

// Authenticate turns a bearer key into the actor it stands for.
func (a *Accounts) Authenticate(ctx context.Context, secret string) (agentmarket.Actor, error) {
	if !strings.HasPrefix(secret, KeyPrefix) || len(secret) > 200 {
		return agentmarket.Actor{}, errBadKey
	}
	h := HashKey(secret)
	k, err := a.Store.APIKeyByHash(ctx, h)
	if err != nil {
		if agentmarket.KindOf(err) == agentmarket.NotFound {
			return agentmarket.Actor{}, errBadKey
		}
		return agentmarket.Actor{}, err
	}
	if k.RevokedAt != nil || subtle.ConstantTimeCompare([]byte(k.Hash), []byte(h)) != 1 {
		return agentmarket.Actor{}, errBadKey
	}
	o, err := a.Store.GetOrg(ctx, k.OrgID)
	if err != nil {
		return agentmarket.Actor{}, err
	}
	return agentmarket.Actor{OrgID: k.OrgID, KeyID: k.ID, Role: k.Role, Operator: o.Platform, KeyBudgetMicros: k.MonthlyBudgetMicros,
		OrgBudgetMicros: o.MonthlyBudgetMicros, Credit: o.HasCredit, KeyTags: k.Tags, KeyRateLimits: k.RateLimits, OrgRateLimits: o.RateLimits}, nil
}

var connectAccountRE = regexp.MustCompile(`^acct_[A-Za-z0-9]{6,64}$`)

// PayoutsInput is a seller's payout settings.
type PayoutsInput struct {
	ConnectAccountID *string `json:"connect_account_id"`
}

// Org returns the actor's org.
func (a *Accounts) Org(ctx context.Context, actor agentmarket.Actor) (*Org, error) {
	return a.Store.GetOrg(ctx, actor.OrgID)
}

// ObjOrgBudget is the control-plane object of an org's monthly budget;
// only admins write it (their "*" rule).
const ObjOrgBudget = "org_budget"

// OrgBudgetInput sets an org's monthly budget: null removes it.
type OrgBudgetInput struct {
	MonthlyBudgetMicros *int64 `json:"monthly_budget_micros"`
}

// SetOrgBudget sets the actor's org's monthly budget, which the meter
// holds like a key's or a subscription's (docs/billing.md, "Budgets").
func (a *Accounts) SetOrgBudget(ctx context.Context, actor agentmarket.Actor, in OrgBudgetInput) (*Org, error) {
	var fe agentmarket.Fields
	checkMonthlyBudget(&fe, in.MonthlyBudgetMicros)
	if err := fe.Err("invalid_budget", "the budget is not valid"); err != nil {
		return nil, err
	}
	return a.Store.SetOrgBudget(ctx, actor.OrgID, in.MonthlyBudgetMicros)
}

// SetPayouts attaches (or, with "", removes) the org's Stripe Connect
// account; new subscriptions to its listings pay out there.
func (a *Accounts) SetPayouts(ctx context.Context, actor agentmarket.Actor, in PayoutsInput) (*Org, error) {
	if in.ConnectAccountID == nil {
		return a.Store.GetOrg(ctx, actor.OrgID)
	}
	id := strings.TrimSpace(*in.ConnectAccountID)
	if id != "" && !connectAccountRE.MatchString(id) {
		var fe agentmarket.Fields
		fe.Add("connect_account_id", "format", "connect_account_id must be a Stripe Connect account id like acct_1A2b3C4d5E6f")
		return nil, fe.Err("invalid_payouts", "the payout settings are not valid")
	}
	before, err := a.Store.GetOrg(ctx, actor.OrgID)
	if err != nil {
		return nil, err
	}
	o, err := a.Store.SetConnectAccount(ctx, actor.OrgID, id)
	if err != nil {
		return nil, err
	}
	return o, agentmarket.RecordChange(ctx, a.Audit, agentmarket.Change{Actor: actor, Action: "org.payouts", ObjectType: "org", ObjectID: o.ID, OrgID: o.ID,
		Before: map[string]string{"connect_account_id": before.ConnectAccountID}, After: map[string]string{"connect_account_id": o.ConnectAccountID}})
}
