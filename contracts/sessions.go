package contracts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/agentmarket/agentmarket"
)

// Session is a signed-in browser. Only the hash of its token is stored: a
// copy of the database does not sign anyone in.
type Session struct {
	// IDHash is the hex SHA-256 of the token in the browser's cookie.
	IDHash string
	UserID string // empty for a session opened with an API key
	// KeyID is the API key the session was opened with (operators sign in
	// with their key); revoking the key ends the session.
	KeyID     string
	OrgID     string
	Role      agentmarket.Role
	CreatedAt time.Time
	ExpiresAt time.Time
	// LastSeenAt is when the browser last used the session (to the few
	// minutes: Resolve writes it at most every Idle/24).
	LastSeenAt time.Time
}

// SessionStore persists sessions (contracts/gormstore).
type SessionStore interface {
	CreateSession(ctx context.Context, s *Session) error
	// SessionByHash returns the session with that token hash, expired or
	// not, or NotFound.
	SessionByHash(ctx context.Context, idHash string) (*Session, error)
	// DeleteSession removes a session; removing one that is not there is
	// no error.
	DeleteSession(ctx context.Context, idHash string) error
	// DeleteExpiredSessions removes sessions that expired before t.
	DeleteExpiredSessions(ctx context.Context, t time.Time) (int64, error)
	// TouchSession records that the session was used at at.
	TouchSession(ctx context.Context, idHash string, at time.Time) error
}

// DefaultSessionTTL is how long a sign-in lasts; DefaultSessionIdle how
// long it lasts unused.
const (
	DefaultSessionTTL  = 12 * time.Hour
	DefaultSessionIdle = 2 * time.Hour
)

// Sessions signs browsers in and out.
type Sessions struct {
	Store    SessionStore
	Accounts *Accounts
	Clock    agentmarket.Clock
	// TTL is a session's lifetime from sign-in; 0 means DefaultSessionTTL.
	TTL time.Duration
	// Idle ends a session unused for that long; 0 means
	// DefaultSessionIdle.
	Idle time.Duration
}

var errNoSession = agentmarket.Errorf(agentmarket.Unauthorized, "no_session", "you are not signed in, or your session has expired")

// HashSessionToken is the stored form of a session token. Tokens carry 256
// random bits, so a fast hash is enough.
func HashSessionToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// newToken is 32 random bytes, base64url without padding (43 characters).
func newToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// wellFormedToken reports whether token has newToken's form.
func wellFormedToken(token string) bool {
	return len(token) == 43 && !strings.ContainsAny(token, "+/=")
}

// Start opens a session for actor (from Login or Authenticate) and returns
// the token to put in the browser's cookie: 32 random bytes, shown once.
func (s *Sessions) Start(ctx context.Context, actor agentmarket.Actor) (string, *Session, error) {
	token, err := newToken()
	if err != nil {
		return "", nil, agentmarket.Wrap(agentmarket.Internal, "session_token", err, "could not start a session")
	}
	now := s.Clock.Now()
	ttl := s.TTL
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	sess := &Session{IDHash: HashSessionToken(token), UserID: actor.UserID, KeyID: actor.KeyID, OrgID: actor.OrgID, Role: actor.Role,
		CreatedAt: now, ExpiresAt: now.Add(ttl), LastSeenAt: now}
	if err := s.Store.CreateSession(ctx, sess); err != nil {
		return "", nil, err
	}
	// Sweeping here keeps the table small without a background job.
	if _, err := s.Store.DeleteExpiredSessions(ctx, now); err != nil {
		return "", nil, err
	}
	return token, sess, nil
}

// Resolve returns the actor a session token stands for. An unknown,
// expired or malformed token, or one whose key was revoked since, is
// Unauthorized.
func (s *Sessions) Resolve(ctx context.Context, token string) (agentmarket.Actor, *Session, error) {
	if !wellFormedToken(token) {
		return agentmarket.Actor{}, nil, errNoSession
	}
	sess, err := s.Store.SessionByHash(ctx, HashSessionToken(token))
	if agentmarket.KindOf(err) == agentmarket.NotFound {
		return agentmarket.Actor{}, nil, errNoSession
	}
	if err != nil {
		return agentmarket.Actor{}, nil, err
	}
	now := s.Clock.Now()
	if !now.Before(sess.ExpiresAt) {
		return agentmarket.Actor{}, nil, errNoSession
	}
	idle := s.Idle
	if idle <= 0 {
		idle = DefaultSessionIdle
	}
	seen := sess.LastSeenAt
	if seen.IsZero() {
		seen = sess.CreatedAt
	}
	if !now.Before(seen.Add(idle)) {
		if err := s.Store.DeleteSession(ctx, sess.IDHash); err != nil {
			return agentmarket.Actor{}, nil, err
		}
		return agentmarket.Actor{}, nil, errNoSession
	}
	if now.Sub(seen) >= idle/24 {
		// At most every few minutes: a page view is not a write.
		if err := s.Store.TouchSession(ctx, sess.IDHash, now); err != nil {
			return agentmarket.Actor{}, nil, err
		}
		sess.LastSeenAt = now
	}
	org, err := s.Accounts.Store.GetOrg(ctx, sess.OrgID)
	if err != nil {
		return agentmarket.Actor{}, nil, err
	}
	actor := agentmarket.Actor{OrgID: sess.OrgID, UserID: sess.UserID, Role: sess.Role, Operator: org.Platform}
	if sess.KeyID != "" {
		keys, err := s.Accounts.Store.ListAPIKeys(ctx, sess.OrgID)
		if err != nil {
			return agentmarket.Actor{}, nil, err
		}
		var key *APIKey
		for i := range keys {
			if keys[i].ID == sess.KeyID {
				key = &keys[i]
			}
		}
		if key == nil || key.RevokedAt != nil {
			return agentmarket.Actor{}, nil, errNoSession
		}
		actor.KeyID, actor.Role, actor.KeyBudgetMicros, actor.KeyTags = key.ID, key.Role, key.MonthlyBudgetMicros, key.Tags
	}
	return actor, sess, nil
}

// End signs a session out; an unknown token is no error.
func (s *Sessions) End(ctx context.Context, token string) error {
	if token == "" {
		return nil
	}
	return s.Store.DeleteSession(ctx, HashSessionToken(token))
}

var errBadLogin = agentmarket.Errorf(agentmarket.Unauthorized, "invalid_login", "the e-mail or the password is wrong")

var (
	decoyMu     sync.Mutex
	decoyHashes = map[int][]byte{}
)

// decoy is a bcrypt hash of a random password at cost, compared against
// when the e-mail is unknown so that the answer takes as long as for a
// wrong password and does not tell which e-mails exist.
func decoy(cost int) []byte {
	decoyMu.Lock()
	defer decoyMu.Unlock()
	if h, ok := decoyHashes[cost]; ok {
		return h
	}
	var b [16]byte
	rand.Read(b[:])
	h, _ := bcrypt.GenerateFromPassword([]byte(hex.EncodeToString(b[:])), cost)
	decoyHashes[cost] = h
	return h
}

// throttle is Accounts.Throttle, made on first use when nil.
func (a *Accounts) throttle() *Throttle {
	a.throttleOnce.Do(func() {
		if a.Throttle == nil {
			a.Throttle = &Throttle{Clock: a.Clock}
		}
	})
	return a.Throttle
}

// Keys of the throttle: an account (its e-mail, as Login reads it) and a
// client address, for sign-in; a client address, for sign-up.
func signinKeys(email, client string) []string {
	return []string{"signin:acct:" + strings.ToLower(strings.TrimSpace(email)), "signin:addr:" + client}
}

// LoginFrom is Login from a client address, throttled per account and per
// address (Throttle): past the failures allowed, it refuses with
// TooManyRequests, before the password is even checked; a success resets
// both.
func (a *Accounts) LoginFrom(ctx context.Context, email, password, client string) (agentmarket.Actor, error) {
	t, keys := a.throttle(), signinKeys(email, client)
	if err := t.Check(ctx, keys...); err != nil {
		return agentmarket.Actor{}, err
	}
	actor, err := a.Login(ctx, email, password)
	switch {
	case err == nil:
		t.Succeeded(ctx, keys...)
	case agentmarket.KindOf(err) == agentmarket.Unauthorized:
		t.Failed(ctx, keys...)
	}
	return actor, err
}

// AuthenticateFrom is Authenticate of a key typed into the sign-in page,
// throttled per client address as LoginFrom is.
func (a *Accounts) AuthenticateFrom(ctx context.Context, secret, client string) (agentmarket.Actor, error) {
	t, key := a.throttle(), "signin:addr:"+client
	if err := t.Check(ctx, key); err != nil {
		return agentmarket.Actor{}, err
	}
	actor, err := a.Authenticate(ctx, secret)
	switch {
	case err == nil:
		t.Succeeded(ctx, key)
	case agentmarket.KindOf(err) == agentmarket.Unauthorized:
		t.Failed(ctx, key)
	}
	return actor, err
}

// SignupFrom is Signup from a client address, throttled per address: a
// sign-up refused (a taken e-mail, a bad field) counts as a failure, so a
// client cannot try e-mails one after the other to learn which are known.
//
// With Mails set (the confirm mode) nothing is created here: the sign-up
// is queued for its mail and the result is Mailed, the same answer for a
// new e-mail and a registered one (SignupMails). Each such sign-up counts
// under the address and under the e-mail, so that neither one client nor
// many can fill someone's mailbox. Past the e-mail's count the answer is
// still Mailed, but no mail is sent: a 429 there would let anyone keep an
// address's owner from signing up (the links already mailed still work,
// and whoever follows one chooses the account's password).
func (a *Accounts) SignupFrom(ctx context.Context, in SignupInput, client string) (*SignupResult, error) {
	t, addr := a.throttle(), "signup:addr:"+client
	if err := t.Check(ctx, addr); err != nil {
		return nil, err
	}
	if a.Mails != nil {
		mailKey := "signup:mail:" + strings.ToLower(strings.TrimSpace(in.Email))
		if t.Check(ctx, mailKey) != nil {
			var fe agentmarket.Fields
			in.validateEmail(&fe)
			if err := fe.Err("invalid_signup", "the sign-up is not valid"); err != nil {
				t.Failed(ctx, addr)
				return nil, err
			}
			t.Failed(ctx, addr, mailKey)
			return &SignupResult{Mailed: true}, nil
		}
		err := a.Mails.request(ctx, a, in)
		if err == nil || agentmarket.KindOf(err) == agentmarket.Invalid {
			t.Failed(ctx, addr, mailKey)
		}
		if err != nil {
			return nil, err
		}
		return &SignupResult{Mailed: true}, nil
	}
	keys := []string{addr}
	res, err := a.Signup(ctx, in)
	if k := agentmarket.KindOf(err); err != nil && (k == agentmarket.Conflict || k == agentmarket.Invalid) {
		t.Failed(ctx, keys...)
	}
	return res, err
}

// Login checks an e-mail and password and returns the user's actor. Every
// failure is the same Unauthorized error after the same bcrypt work.
func (a *Accounts) Login(ctx context.Context, email, password string) (agentmarket.Actor, error) {
	cost := a.BcryptCost
	if cost == 0 {
		cost = bcrypt.DefaultCost
	}
	email = strings.ToLower(strings.TrimSpace(email))
	if len(password) > 72 {
		password = password[:72] // bcrypt's limit; Signup refuses longer ones
	}
	u, err := a.Store.GetUserByEmail(ctx, email)
	if err != nil && agentmarket.KindOf(err) != agentmarket.NotFound {
		return agentmarket.Actor{}, err
	}
	if u == nil || email == "" {
		_ = bcrypt.CompareHashAndPassword(decoy(cost), []byte(password))
		return agentmarket.Actor{}, errBadLogin
	}
	if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(password)) != nil {
		return agentmarket.Actor{}, errBadLogin
	}
	o, err := a.Store.GetOrg(ctx, u.OrgID)
	if err != nil {
		return agentmarket.Actor{}, err
	}
	return agentmarket.Actor{OrgID: u.OrgID, UserID: u.ID, Role: u.Role, Operator: o.Platform}, nil
}
