package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/web/api"
)

const (
	sessionCookie = "am_session"
	// seedCookie holds a random value for visitors who are not signed in,
	// so the sign-in and sign-up forms carry a CSRF token too (login CSRF).
	seedCookie = "am_seed"
)

// csrfToken is the token a session's forms carry: an HMAC of a fixed
// label keyed with the secret in the visitor's HttpOnly cookie (the
// session token, or the seed before signing in). Another site can neither
// read the cookie nor compute the token; nothing needs storing.
func csrfToken(seed string) string {
	m := hmac.New(sha256.New, []byte(seed))
	m.Write([]byte("agentmarket web csrf v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// begin resolves the visitor's session and, on a POST, checks the CSRF
// token. A stale session cookie is cleared, not an error: the visitor is
// then signed out.
func (u *UI) begin(c *fiber.Ctx) (*req, error) {
	// The request's id and the client's address, for the audit log of
	// what the page changes.
	id := api.RequestID(c)
	c.Set(api.RequestIDHeader, id)
	r := &req{c: c, ctx: agentmarket.WithRequest(c.UserContext(), agentmarket.Request{ID: id, IP: api.ClientAddrOf(c, u.d.Proxies).String()})}
	seed := ""
	if tok := c.Cookies(sessionCookie); tok != "" {
		actor, _, err := u.sessions.Resolve(r.ctx, tok)
		switch {
		case err == nil:
			r.actor, r.signedIn, seed = actor, true, strings.Clone(tok)
			r.org = u.orgName(r.ctx, actor.OrgID)
		case agentmarket.KindOf(err) == agentmarket.Unauthorized:
			u.clearCookie(c, sessionCookie)
		default:
			return r, err
		}
	}
	if seed == "" {
		seed = c.Cookies(seedCookie)
		if len(seed) != 43 {
			seed = randomToken()
			u.setCookie(c, seedCookie, seed, time.Time{})
		} else {
			seed = strings.Clone(seed)
		}
	}
	r.csrf = csrfToken(seed)
	if r.signedIn {
		u.setNav(r)
	}
	if c.Method() == fiber.MethodPost {
		if !sameOrigin(c) || !hmac.Equal([]byte(csrfOf(c)), []byte(r.csrf)) {
			return r, errCSRF
		}
	}
	return r, nil
}

// setNav fills the signed-in actor's navigation.
func (u *UI) setNav(r *req) {
	r.nav = nav{
		Sell:     u.can(r, contracts.ObjListings, contracts.ActWrite),
		Buy:      u.can(r, contracts.ObjSubscriptions, contracts.ActRead),
		Keys:     u.can(r, contracts.ObjAPIKeys, contracts.ActRead),
		Finance:  u.can(r, contracts.ObjUsage, contracts.ActRead),
		Operator: r.actor.Operator,
	}
	r.nav.Audit = u.mayAudit(r)
}

// csrfOf is the CSRF token a POST carries: in its form body (URL-encoded
// or multipart) or the X-CSRF-Token header, never in the query string,
// where it would leak into logs, history and Referer headers.
func csrfOf(c *fiber.Ctx) string {
	if v := c.Request().PostArgs().Peek("csrf"); len(v) > 0 {
		return string(v)
	}
	if mf, err := c.MultipartForm(); err == nil {
		if vs := mf.Value["csrf"]; len(vs) > 0 {
			return vs[0]
		}
	}
	return c.Get("X-CSRF-Token")
}

// sameOrigin refuses requests a browser marks as coming from another site.
// Browsers that send neither header are judged by the token alone.
func sameOrigin(c *fiber.Ctx) bool {
	if site := c.Get("Sec-Fetch-Site"); site == "cross-site" {
		return false
	}
	origin := c.Get(fiber.HeaderOrigin)
	if origin == "" || origin == "null" {
		return origin == ""
	}
	// The scheme is not compared: behind a TLS-terminating proxy the
	// request may arrive as plain HTTP.
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, c.Hostname())
}

func (u *UI) setCookie(c *fiber.Ctx, name, value string, expires time.Time) {
	ck := &fiber.Cookie{Name: name, Value: value, Path: "/", HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode,
		Secure: c.Protocol() == "https"}
	if !expires.IsZero() {
		ck.Expires = expires
	}
	c.Cookie(ck)
}

func (u *UI) clearCookie(c *fiber.Ctx, name string) {
	c.Cookie(&fiber.Cookie{Name: name, Value: "", Path: "/", HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode,
		Secure: c.Protocol() == "https", Expires: time.Unix(0, 0), MaxAge: -1})
}

// signIn opens a session for actor and sets its cookie.
func (u *UI) signIn(r *req, actor agentmarket.Actor) error {
	tok, sess, err := u.sessions.Start(r.ctx, actor)
	if err != nil {
		return err
	}
	u.setCookie(r.c, sessionCookie, tok, sess.ExpiresAt)
	// A page rendered in this response shows the visitor signed in, its
	// forms bound to the new session.
	r.actor, r.signedIn, r.csrf = actor, true, csrfToken(tok)
	r.org = u.orgName(r.ctx, actor.OrgID)
	u.setNav(r)
	return nil
}

// localPath keeps a ?next= target on this site: it is kept only when it
// parses as a URL with no scheme, no host and no user, its path starts
// with one "/" (also once percent-decoded), and nothing in it, raw or
// decoded, is a control character, a space of any kind, a backslash, a
// character that reorders text, or a look-alike of a slash; anything else
// is "/". Browsers strip tabs and line breaks and read "\" as "/", so a
// pattern that misses one of those sends the visitor to another origin.
func localPath(p string) string {
	if !safePathText(p) {
		return "/"
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return "/"
	}
	dec, err := url.PathUnescape(u.EscapedPath())
	if err != nil || !strings.HasPrefix(dec, "/") || strings.HasPrefix(dec, "//") || !safePathText(dec) {
		return "/"
	}
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return "/"
	}
	return p
}

// safePathText reports whether s holds none of what a redirect target
// must not.
func safePathText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		switch {
		case r == '\\', unicode.IsControl(r), unicode.IsSpace(r), unicode.Is(unicode.Cf, r):
			return false
		case r == '\u2044', r == '\u2215', r == '\u29F8', r == '\uFF0F', r == '\u2216', r == '\u29F9', r == '\uFE68', r == '\uFF3C':
			return false // fraction, division and fullwidth slashes, set minus, small and fullwidth reverse solidus
		}
	}
	return true
}

func (u *UI) signupForm(r *req) error {
	if r.signedIn {
		return redirect(r, "/")
	}
	return u.render(r, "signup", "Create an account", &signupData{form: form{Values: map[string]string{}}, ByMail: u.d.Accounts.ConfirmsByMail()})
}

// signupData is the sign-up form; ByMail: sign-ups are confirmed by mail,
// so it asks for the e-mail alone (the link's page asks the rest).
type signupData struct {
	form
	ByMail bool
}

func (u *UI) signup(r *req) error {
	in := contracts.SignupInput{OrgName: r.c.FormValue("org_name"), Email: r.c.FormValue("email"), Password: r.c.FormValue("password")}
	f := &signupData{form: form{Values: map[string]string{"org_name": in.OrgName, "email": in.Email}}, ByMail: u.d.Accounts.ConfirmsByMail()}
	res, err := u.d.Accounts.SignupFrom(r.ctx, in, api.ClientOf(r.c, u.d.Proxies))
	if err != nil {
		if f.absorb(err, nil) {
			r.c.Status(fiber.StatusUnprocessableEntity)
			if agentmarket.KindOf(err) == agentmarket.Conflict {
				r.c.Status(fiber.StatusConflict)
			}
			return u.render(r, "signup", "Create an account", f)
		}
		return err
	}
	if res.Mailed {
		// The same page whoever owns the address: it names neither the
		// address nor what the mail says.
		return u.render(r, "signupsent", "Check your mail", nil)
	}
	actor := agentmarket.Actor{OrgID: res.Org.ID, UserID: res.User.ID, Role: res.User.Role}
	if err := u.signIn(r, actor); err != nil {
		return err
	}
	return redirect(r, "/?notice=signedup")
}

type signupConfirmData struct {
	// form holds the org's name and password the page asks for, and why
	// they were refused.
	form
	Token  string
	Key    string
	KeyErr string
}

// signupConfirmForm is the page a mailed link opens: a button that
// finishes the sign-up. Opening the link changes nothing (mail scanners
// open links), and the page sends no Referer, which would carry the token.
func (u *UI) signupConfirmForm(r *req) error {
	r.c.Set("Referrer-Policy", "no-referrer")
	return u.render(r, "signupconfirm", "Finish creating your account", &signupConfirmData{form: form{Values: map[string]string{}}, Token: r.c.Query("token")})
}

// signupConfirm finishes the sign-up: the org is created, the visitor
// signed in, and the first admin key shown, this once.
func (u *UI) signupConfirm(r *req) error {
	r.c.Set("Referrer-Policy", "no-referrer")
	in := contracts.SignupInput{OrgName: r.c.FormValue("org_name"), Password: r.c.FormValue("password")}
	res, err := u.d.Accounts.ConfirmSignup(r.ctx, r.c.FormValue("token"), in)
	if err != nil {
		d := &signupConfirmData{form: form{Values: map[string]string{"org_name": in.OrgName}}, Token: r.c.FormValue("token")}
		if agentmarket.KindOf(err) == agentmarket.Invalid && d.absorb(err, nil) {
			r.c.Status(fiber.StatusUnprocessableEntity)
			return u.render(r, "signupconfirm", "Finish creating your account", d)
		}
		if agentmarket.KindOf(err) != agentmarket.NotFound && agentmarket.KindOf(err) != agentmarket.Conflict {
			return err
		}
		r.c.Status(api.Status(agentmarket.KindOf(err)))
		var ae *agentmarket.Error
		errors.As(err, &ae)
		return u.render(r, "signupconfirm", "Finish creating your account", &signupConfirmData{KeyErr: capitalize(ae.Message) + "."})
	}
	if err := u.signIn(r, agentmarket.Actor{OrgID: res.Org.ID, UserID: res.User.ID, Role: res.User.Role}); err != nil {
		return err
	}
	r.c.Status(fiber.StatusCreated)
	return u.render(r, "signupconfirm", "Your account is ready", &signupConfirmData{Key: res.Secret})
}

type signinData struct {
	form
	Next string
}

// tooMany answers a throttled sign-in: 429, Retry-After, and the sign-in
// page saying how long to wait.
func (u *UI) tooMany(r *req, d *signinData, field string, err error) error {
	var ae *agentmarket.Error
	errors.As(err, &ae)
	d.Errors = append(d.Errors, fieldMsg{Field: field, Message: capitalize(ae.Message) + "."})
	api.SetRetryAfter(r.c, ae)
	r.c.Status(fiber.StatusTooManyRequests)
	return u.render(r, "signin", "Sign in", d)
}

func (u *UI) signinForm(r *req) error {
	return u.render(r, "signin", "Sign in", &signinData{form: form{Values: map[string]string{}}, Next: localPath(r.c.Query("next", "/"))})
}

func (u *UI) signin(r *req) error {
	email := r.c.FormValue("email")
	next := localPath(r.c.FormValue("next", "/"))
	actor, err := u.d.Accounts.LoginFrom(r.ctx, email, r.c.FormValue("password"), api.ClientOf(r.c, u.d.Proxies))
	if err != nil {
		if agentmarket.KindOf(err) == agentmarket.TooManyRequests {
			return u.tooMany(r, &signinData{form: form{Values: map[string]string{"email": email}}, Next: next}, "password", err)
		}
		if agentmarket.KindOf(err) != agentmarket.Unauthorized {
			return err
		}
		d := &signinData{form: form{Values: map[string]string{"email": email}}, Next: next}
		d.Errors = append(d.Errors, fieldMsg{Field: "password", Message: "The e-mail or the password is wrong."})
		r.c.Status(fiber.StatusUnauthorized)
		return u.render(r, "signin", "Sign in", d)
	}
	if err := u.signIn(r, actor); err != nil {
		return err
	}
	return redirect(r, next)
}

// signinKey opens a session with an API key: how the platform operator
// (whose org has no user) signs in, and a way in for any key holder.
func (u *UI) signinKey(r *req) error {
	next := localPath(r.c.FormValue("next", "/"))
	actor, err := u.d.Accounts.AuthenticateFrom(r.ctx, strings.TrimSpace(r.c.FormValue("api_key")), api.ClientOf(r.c, u.d.Proxies))
	if err != nil {
		if agentmarket.KindOf(err) == agentmarket.TooManyRequests {
			return u.tooMany(r, &signinData{form: form{Values: map[string]string{}}, Next: next}, "api_key", err)
		}
		if agentmarket.KindOf(err) != agentmarket.Unauthorized {
			return err
		}
		d := &signinData{form: form{Values: map[string]string{}}, Next: next}
		d.Errors = append(d.Errors, fieldMsg{Field: "api_key", Message: "This API key is unknown or revoked."})
		r.c.Status(fiber.StatusUnauthorized)
		return u.render(r, "signin", "Sign in", d)
	}
	if err := u.signIn(r, actor); err != nil {
		return err
	}
	if actor.Operator && next == "/" {
		next = "/operator"
	}
	return redirect(r, next)
}

func (u *UI) signout(r *req) error {
	if err := u.sessions.End(r.ctx, r.c.Cookies(sessionCookie)); err != nil {
		return err
	}
	u.clearCookie(r.c, sessionCookie)
	return redirect(r, "/?notice=signedout")
}
