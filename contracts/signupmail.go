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

// PendingSignup is a sign-up waiting for its mailed link to be followed:
// the e-mail alone. The org's name and the password are chosen by whoever
// follows the link, the address's owner: were they taken from the
// request, anyone could sign up with someone else's address and a
// password of their own, and hold the account its owner then confirms.
// Only the hash of the link's token is stored: a copy of the database
// completes no one's sign-up.
type PendingSignup struct {
	// TokenHash is the hex SHA-256 of the link's token.
	TokenHash string
	Email     string
	CreatedAt time.Time
	ExpiresAt time.Time
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

// SignupMails is the confirm sign-up mode. A sign-up is its e-mail alone
// (an org name or a password sent with it is not kept: the link's page
// asks for them); it is checked and queued, whatever the e-mail: the
// answer and the work done before it are the same for a registered e-mail
// and a new one, so the sign-up form tells no one which e-mails have
// accounts.
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
	email string
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
	var fe agentmarket.Fields
	in.validateEmail(&fe)
	if err := fe.Err("invalid_signup", "the sign-up is not valid"); err != nil {
		return err
	}
	// A copy: the queue outlives the request, whose strings a transport
	// may reuse (fiber's form values).
	r := signupRequest{email: strings.Clone(in.Email)}
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
	p := &PendingSignup{TokenHash: HashSessionToken(token), Email: r.email, CreatedAt: now, ExpiresAt: now.Add(m.ttl())}
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

To finish, open this link within %d hours (it works once), and choose your organisation's name and your password there:

%s

Or, from a program, send the token to the API with them:

POST %s/api/v1/signup/confirm
{"token": "%s", "org_name": "…", "password": "…"}

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

// ConfirmsByMail reports whether sign-ups are confirmed by mail (the
// confirm mode): the sign-up form then asks for the e-mail alone.
func (a *Accounts) ConfirmsByMail() bool { return a.Mails != nil }

// ConfirmSignup finishes the sign-up a mailed link stands for, with the
// org's name and the password its follower chooses (in; its e-mail is
// the link's): it creates the org, its admin user and first admin key, as
// Signup does. A token works once, and only until it expires; an unknown,
// used or expired one is NotFound (signup_token_invalid). Invalid fields
// are refused before the token is taken, so a typo does not spend it.
func (a *Accounts) ConfirmSignup(ctx context.Context, token string, in SignupInput) (*SignupResult, error) {
	if a.Mails == nil || !wellFormedToken(token) {
		return nil, errBadSignupToken
	}
	var fe agentmarket.Fields
	in.validateAccount(&fe)
	if err := fe.Err("invalid_signup", "the sign-up is not valid"); err != nil {
		return nil, err
	}
	hash, err := a.hashPassword(in.Password)
	if err != nil {
		return nil, err
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
	return a.createOrg(ctx, in.OrgName, p.Email, hash)
}
