package contracts

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket"
)

// Sign-up modes (the marketplace's AGENTMARKET_SIGNUP): open creates the
// org at once and answers with its first key; confirm mails a link first,
// and answers the same whether the e-mail is new or already registered.
const (
	SignupOpen    = "open"
	SignupConfirm = "confirm"
)

// DefaultSignupLinkTTL is how long a mailed sign-up link works.
const DefaultSignupLinkTTL = 24 * time.Hour

// DefaultSignupQueue is how many sign-ups may wait for their mail.
const DefaultSignupQueue = 256

// PendingSignup is a sign-up waiting for its mailed link to be followed.
// Only the hash of the link's token is stored, and the password's bcrypt
// hash: a copy of the database completes no one's sign-up.
type PendingSignup struct {
	// TokenHash is the hex SHA-256 of the link's token.
	TokenHash    string
	OrgName      string
	Email        string
	PasswordHash string
	CreatedAt    time.Time
	ExpiresAt    time.Time
}

// PendingSignupStore persists pending sign-ups (contracts/gormstore).
type PendingSignupStore interface {
	// CreatePendingSignup stores p, and removes the pending sign-ups that
	// expired before p.CreatedAt.
	CreatePendingSignup(ctx context.Context, p *PendingSignup) error
	// TakePendingSignup removes the pending sign-up of that token hash and
	// returns it (NotFound when there is none): a token is taken once.
	TakePendingSignup(ctx context.Context, tokenHash string) (*PendingSignup, error)
}

// Mail is a plain-text message to one address.
type Mail struct {
	To      string
	Subject string
	Text    string
}

// Mailer sends mail (contracts/smtpmail: SMTP, or a pickup directory).
type Mailer interface {
	Send(ctx context.Context, m Mail) error
}

// UserFinder finds a user by e-mail (Store has it).
type UserFinder interface {
	GetUserByEmail(ctx context.Context, email string) (*User, error)
}

// SignupMails is the confirm sign-up mode. A sign-up is checked, its
// password hashed and the request queued, whatever the e-mail: the answer
// and the work done before it are the same for a registered e-mail and a
// new one, so the sign-up form tells no one which e-mails have accounts.
// Run, off the request path, then mails a registered address that its
// account exists (sign in), and a new one a link that works once, within
// TTL, to finish the sign-up (Accounts.ConfirmSignup).
//
// The queue is in memory: a sign-up queued when the process stops gets no
// mail, and is made again.
type SignupMails struct {
	Store  PendingSignupStore
	Users  UserFinder
	Mailer Mailer
	Clock  agentmarket.Clock
	// BaseURL is the marketplace as its users reach it, the start of the
	// links in the mails (never the request's Host, which a client
	// chooses).
	BaseURL string
	// TTL is how long a link works; 0 means DefaultSignupLinkTTL.
	TTL time.Duration
	// Queue is how many sign-ups may wait for their mail; 0 means
	// DefaultSignupQueue. Past it a sign-up is refused (Unavailable),
	// whatever its e-mail.
	Queue  int
	Logger *slog.Logger

	once  sync.Once
	queue chan signupRequest
}

type signupRequest struct {
	orgName, email, passwordHash string
}

func (m *SignupMails) init() {
	m.once.Do(func() {
		n := m.Queue
		if n <= 0 {
			n = DefaultSignupQueue
		}
		m.queue = make(chan signupRequest, n)
		if m.Logger == nil {
			m.Logger = slog.New(slog.DiscardHandler)
		}
	})
}

func (m *SignupMails) ttl() time.Duration {
	if m.TTL <= 0 {
		return DefaultSignupLinkTTL
	}
	return m.TTL
}

// request checks a sign-up and queues it for its mail; the store is not
// read, so nothing here depends on whether the e-mail is registered.
func (m *SignupMails) request(ctx context.Context, a *Accounts, in SignupInput) error {
	m.init()
	if err := in.Validate(); err != nil {
		return err
	}
	hash, err := a.hashPassword(in.Password)
	if err != nil {
		return err
	}
	// Copies: the queue outlives the request, whose strings a transport
	// may reuse (fiber's form values).
	r := signupRequest{orgName: strings.Clone(in.OrgName), email: strings.Clone(in.Email), passwordHash: hash}
	select {
	case m.queue <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	default:
		return agentmarket.Errorf(agentmarket.Unavailable, "signup_busy", "too many sign-ups are waiting for their mail; try again in a minute")
	}
}

// Run mails the queued sign-ups, one after the other, until ctx ends.
func (m *SignupMails) Run(ctx context.Context) {
	m.init()
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-m.queue:
			if err := m.deliver(ctx, r); err != nil && ctx.Err() == nil {
				m.Logger.ErrorContext(ctx, "sign-up mail not sent", "err", err)
			}
		}
	}
}

// deliver sends one queued sign-up its mail: the account's, or a link.
func (m *SignupMails) deliver(ctx context.Context, r signupRequest) error {
	_, err := m.Users.GetUserByEmail(ctx, r.email)
	switch {
	case err == nil:
		return m.Mailer.Send(ctx, m.accountExistsMail(r.email))
	case agentmarket.KindOf(err) != agentmarket.NotFound:
		return err
	}
	token, err := newToken()
	if err != nil {
		return err
	}
	now := m.Clock.Now()
	p := &PendingSignup{TokenHash: HashSessionToken(token), OrgName: r.orgName, Email: r.email, PasswordHash: r.passwordHash,
		CreatedAt: now, ExpiresAt: now.Add(m.ttl())}
	if err := m.Store.CreatePendingSignup(ctx, p); err != nil {
		return err
	}
	return m.Mailer.Send(ctx, m.linkMail(r.email, token))
}

// SignupLinkPath is the web page a mailed link opens (its token in the
// query).
const SignupLinkPath = "/signup/confirm"

// SignupLink is the link that finishes the sign-up of token.
func SignupLink(baseURL, token string) string {
	return strings.TrimRight(baseURL, "/") + SignupLinkPath + "?token=" + url.QueryEscape(token)
}

// The mails name no organisation: the name is whatever the person who
// signed up typed, and that need not be the address's owner.
func (m *SignupMails) linkMail(to, token string) Mail {
	hours := int(m.ttl().Round(time.Hour) / time.Hour)
	return Mail{To: to, Subject: "Finish creating your AgentMarket account", Text: fmt.Sprintf(`Someone, probably you, asked to create an AgentMarket account with this e-mail address.

To finish, open this link within %d hours (it works once):

%s

Or, from a program, send the token to the API:

POST %s/api/v1/signup/confirm
{"token": "%s"}

If you did not ask for an account, ignore this message: nothing is created without the link.
`, hours, SignupLink(m.BaseURL, token), strings.TrimRight(m.BaseURL, "/"), token)}
}

func (m *SignupMails) accountExistsMail(to string) Mail {
	return Mail{To: to, Subject: "You already have an AgentMarket account", Text: fmt.Sprintf(`Someone, probably you, asked to create an AgentMarket account with this e-mail address, but an account with it already exists.

Sign in instead:

%s/signin

If you did not ask for an account, ignore this message: nothing has changed.
`, strings.TrimRight(m.BaseURL, "/"))}
}

var errBadSignupToken = agentmarket.Errorf(agentmarket.NotFound, "signup_token_invalid",
	"this sign-up link is unknown, already used or expired; sign up again to get a new one")

// ConfirmSignup finishes the sign-up a mailed link stands for: it creates
// the org, its admin user and first admin key, as Signup does. A token
// works once, and only until it expires; an unknown, used or expired one
// is NotFound (signup_token_invalid).
func (a *Accounts) ConfirmSignup(ctx context.Context, token string) (*SignupResult, error) {
	if a.Mails == nil || !wellFormedToken(token) {
		return nil, errBadSignupToken
	}
	p, err := a.Mails.Store.TakePendingSignup(ctx, HashSessionToken(token))
	if agentmarket.KindOf(err) == agentmarket.NotFound {
		return nil, errBadSignupToken
	}
	if err != nil {
		return nil, err
	}
	if !a.Clock.Now().Before(p.ExpiresAt) {
		return nil, errBadSignupToken
	}
	return a.createOrg(ctx, p.OrgName, p.Email, p.PasswordHash)
}
