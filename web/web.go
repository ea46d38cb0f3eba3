// Package web is the marketplace's web UI: server-rendered HTML pages over
// the same domain services as the REST API (web/api), for sellers, buyers,
// finance and the platform operator. Pages work without JavaScript (charts
// are SVG drawn on the server; a few lines of script only add copy
// buttons), templates and assets are embedded, and there is no build step.
//
// Browsers sign in with an e-mail and password (or an API key, which is how
// the platform operator signs in) and carry a session cookie; every form
// carries a CSRF token bound to the session. Pages are authorized with the
// same casbin policies as the API, for the session's actor.
package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/url"
	"strings"
	"sync"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/audit"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/web/api"
)

// Authorizer decides whether an actor's role may act on a control-plane
// object (contracts/casbin implements it); the same shape as api.Authorizer.
type Authorizer interface {
	Authorize(ctx context.Context, actor agentmarket.Actor, obj, act string) error
}

// Deps is what the UI is built from: the services cmd/marketplace wires.
type Deps struct {
	Accounts *contracts.Accounts
	// Proxies are the load balancers in front of the marketplace: the
	// sign-in and sign-up limits per client address read the client from
	// their X-Forwarded-For (api.ClientOf).
	Proxies contracts.TrustedProxies
	// Sessions stores browser sessions (contracts/gormstore.Store).
	Sessions      contracts.SessionStore
	Listings      *listings.Service
	Subscriptions *contracts.Subscriptions
	Usage         *metering.Reports
	Invoices      *billing.Previews
	Billing       *billing.Service
	Authorizer    Authorizer
	Logger        *slog.Logger
	Clock         agentmarket.Clock
	// PublicMeterURL is where buyers reach the meter (for proxied URLs).
	PublicMeterURL string
	// Tasks shows the buyer's push deliveries (nil: not shown).
	Tasks *contracts.Tasks
	// Offers are sellers' private offers (nil: none).
	Offers *listings.Offers
	// Alerts are the orgs' spend alerts (nil: none).
	Alerts *contracts.Alerts
	// Focus exports the orgs' FOCUS cost and usage rows (nil: none).
	Focus *billing.Focus
	// Verified is the listings' verified stats (nil: none shown).
	Verified *metering.Verified
	// Audit is the audit log (nil: no audit page).
	Audit *audit.Log
	// Switches are the kill switches (nil: no kill switches page).
	Switches *contracts.Switches
	// Credits are the orgs' prepaid credit (nil: no credit page).
	Credits *contracts.Credits
}

// UI serves the web pages.
type UI struct {
	d        Deps
	sessions *contracts.Sessions
	pages    map[string]*template.Template
	static   fs.FS
	assetVer string
	orgs     nameCache
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New builds the UI; it panics if an embedded template does not parse (a
// programming error caught by every test).
func New(d Deps) *UI {
	if d.Clock == nil {
		d.Clock = agentmarket.SystemClock{}
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	u := &UI{d: d, sessions: &contracts.Sessions{Store: d.Sessions, Accounts: d.Accounts, Clock: d.Clock}}
	u.static, _ = fs.Sub(staticFS, "static")
	u.assetVer = assetVersion(u.static)
	u.pages = parsePages()
	return u
}

func assetVersion(f fs.FS) string {
	h := sha256.New()
	fs.WalkDir(f, ".", func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			b, _ := fs.ReadFile(f, p)
			h.Write([]byte(p))
			h.Write(b)
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// Mount adds the UI's routes to r. They are all at the root (/, /listings,
// /seller, /buyer, /keys, /finance, /operator, /signin, /signup, /static)
// and leave /api, /a2a and the ops endpoints alone.
func (u *UI) Mount(r fiber.Router) {
	r.Get("/static/*", u.serveStatic)

	r.Get("/", u.page(u.catalog))
	r.Get("/listings/:id", u.page(u.listing))
	r.Post("/listings/:id/subscribe", u.page(u.subscribe))

	r.Get("/signup", u.page(u.signupForm))
	r.Post("/signup", u.page(u.signup))
	r.Get(contracts.SignupLinkPath, u.page(u.signupConfirmForm))
	r.Post(contracts.SignupLinkPath, u.page(u.signupConfirm))
	r.Get("/signin", u.page(u.signinForm))
	r.Post("/signin", u.page(u.signin))
	r.Post("/signin/key", u.page(u.signinKey))
	r.Post("/signout", u.page(u.signout))

	r.Get("/seller", u.page(u.seller))
	r.Get("/seller/new", u.page(u.newListingForm))
	r.Post("/seller/new", u.page(u.createListing))
	r.Post("/seller/listings/:id/status", u.page(u.sellerStatus))
	r.Post("/seller/listings/:id/refresh", u.page(u.sellerRefresh))
	r.Get("/seller/offers", u.page(u.sellerOffers))
	r.Post("/seller/offers", u.page(u.createOffer))
	r.Post("/seller/offers/:id/withdraw", u.page(u.withdrawOffer))

	r.Get("/buyer", u.page(u.buyer))
	r.Post("/buyer/subscriptions/:id/cancel", u.page(u.cancelSubscription))
	r.Post("/buyer/subscriptions/:id/trial", u.page(u.trialChoice))
	r.Post("/buyer/subscriptions/:id/plan", u.page(u.changePlan))
	r.Post("/buyer/subscriptions/:id/end", u.page(u.cancelAtPeriodEnd))
	r.Post("/buyer/subscriptions/:id/fallbacks", u.page(u.setFallbacks))
	r.Post("/buyer/offers/:id/accept", u.page(u.acceptOffer))
	r.Post("/buyer/deliveries/:id/retry", u.page(u.retryDelivery))
	r.Get("/buyer/tasks/:listing/:task", u.page(u.task))
	r.Get("/keys", u.page(u.keys))
	r.Post("/keys", u.page(u.createKey))
	r.Post("/keys/:id/revoke", u.page(u.revokeKey))
	r.Post("/keys/org-budget", u.page(u.setOrgBudget))
	r.Post("/keys/org-rates", u.page(u.setOrgRates))

	r.Get("/finance", u.page(u.finance))
	r.Get("/finance/usage.csv", u.page(u.financeCSV))
	r.Get("/finance/reconciliation", u.page(u.reconciliation))
	r.Get("/finance/invoices", u.page(u.invoices))
	r.Get("/finance/focus.csv", u.page(u.focusCSV))
	r.Get("/finance/alerts", u.page(u.alerts))
	r.Post("/finance/alerts", u.page(u.saveAlertSettings))

	r.Get("/audit", u.page(u.auditLog))
	r.Get("/audit.csv", u.page(u.auditCSV))

	r.Get("/credit", u.page(u.creditPage))
	r.Post("/credit/settings", u.page(u.setCreditSettings))
	r.Post("/credit/grants", u.page(u.grantCredit))
	r.Post("/credit/purchases", u.page(u.buyCredit))
	r.Get("/kill-switches", u.page(u.killSwitches))
	r.Post("/kill-switches", u.page(u.setKillSwitch))
	r.Post("/kill-switches/:id/lift", u.page(u.liftKillSwitch))
	r.Get("/operator", u.page(u.operator))
	r.Post("/operator/listings/:id/status", u.page(u.operatorStatus))
	r.Get("/operator/unratable", u.page(u.unratable))
}

// req is one request as the handlers see it: who asks, and the token
// their forms must carry.
type req struct {
	c        *fiber.Ctx
	ctx      context.Context
	actor    agentmarket.Actor
	signedIn bool
	org      string // the signed-in org's name
	csrf     string
	nav      nav
}

// nav is what the signed-in actor may open, for the navigation bar.
type nav struct {
	Sell, Buy, Keys, Finance, Operator, Audit bool
}

type handler func(r *req) error

// page wraps a handler: it resolves the session, checks the CSRF token of
// every POST, and turns a returned error into an HTML error page (or, for
// a signed-out visitor of a private page, a redirect to sign in).
func (u *UI) page(h handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		// First, whatever follows: refusal and error pages carry them too.
		// A request with a session cookie may show private data, which is
		// never stored by a cache.
		setSecurityHeaders(c, c.Cookies(sessionCookie) != "")
		r, err := u.begin(c)
		if err == nil {
			err = h(r)
		}
		if err != nil {
			return u.fail(c, r, err)
		}
		return nil
	}
}

func setSecurityHeaders(c *fiber.Ctx, private bool) {
	c.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "+
		"frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'")
	c.Set("X-Content-Type-Options", "nosniff")
	c.Set("Referrer-Policy", "same-origin")
	c.Set("X-Frame-Options", "DENY")
	if private {
		c.Set(fiber.HeaderCacheControl, "no-store")
	}
}

var errCSRF = agentmarket.Errorf(agentmarket.Forbidden, "csrf", "this form has expired or did not come from this site; reload the page and try again")

// fail renders err. Unauthorized on a GET sends the visitor to sign in.
func (u *UI) fail(c *fiber.Ctx, r *req, err error) error {
	var ae *agentmarket.Error
	if !errors.As(err, &ae) {
		ae = agentmarket.Wrap(agentmarket.Internal, "internal", err, "internal error")
	}
	if ae.Kind == agentmarket.Unauthorized && c.Method() == fiber.MethodGet {
		return c.Redirect("/signin?next="+url.QueryEscape(string(c.Request().RequestURI())), fiber.StatusSeeOther)
	}
	status := api.Status(ae.Kind)
	msg := ae.Message
	if status >= 500 {
		u.d.Logger.ErrorContext(c.UserContext(), "page failed", "method", c.Method(), "path", c.Path(), "code", ae.Code, "err", err)
		if ae.Kind == agentmarket.Internal {
			msg = "Something went wrong on our side. Please try again."
		}
	}
	if r == nil {
		r = &req{c: c, ctx: c.UserContext()}
	}
	api.SetRetryAfter(c, ae)
	c.Status(status)
	return u.render(r, "error", "Error", map[string]any{"Status": status, "Code": ae.Code, "Message": msg, "Fields": ae.Fields})
}

// pageData is what every template gets.
type pageData struct {
	Title    string
	SignedIn bool
	Org      string
	Role     agentmarket.Role
	Nav      nav
	Path     string
	CSRF     string
	AssetVer string
	Notice   string
	Data     any
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// render writes the named page.
func (u *UI) render(r *req, name, title string, data any) error {
	t := u.pages[name]
	if t == nil {
		return agentmarket.Errorf(agentmarket.Internal, "no_template", "no template %q", name)
	}
	pd := pageData{Title: title, SignedIn: r.signedIn, Org: r.org, Role: r.actor.Role, Nav: r.nav, Path: r.c.Path(),
		CSRF: r.csrf, AssetVer: u.assetVer, Notice: notices[r.c.Query("notice")], Data: data}
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	if err := t.ExecuteTemplate(buf, "layout", pd); err != nil {
		return agentmarket.Wrap(agentmarket.Internal, "render", err, "could not render the page")
	}
	r.c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	return r.c.Send(buf.Bytes())
}

// notices are the fixed messages a redirect may ask for (?notice=…), so no
// text from the URL is ever shown.
var notices = map[string]string{
	"signedup":       "Welcome! Your organisation is ready.",
	"signedin":       "You are signed in.",
	"signedout":      "You are signed out.",
	"listed":         "Your agent is listed.",
	"orgbudget":      "The organisation's monthly budget is saved: every meter holds calls to it within seconds.",
	"orgrates":       "The organisation's rate limits are saved: every meter applies them within seconds.",
	"subscribed":     "Subscribed. Create an API key below, then hand your orchestrator the endpoint.",
	"canceled":       "The subscription is canceled.",
	"trialstop":      "The subscription will stop when its free trial ends.",
	"trialgo":        "The subscription will convert to paid when its free trial ends.",
	"offered":        "The private offer is made. Only that organisation sees it.",
	"withdrawn":      "The offer is withdrawn.",
	"accepted":       "Offer accepted: you subscribe at its terms.",
	"planchanged":    "The plan changed from now on. This month's invoice charges each plan for its part of the month.",
	"fallbacks":      "The fallback agents are saved. Every meter uses them within a few seconds.",
	"ending":         "The subscription will end at the end of the month. Calls work until then.",
	"kept":           "The subscription goes on.",
	"alertsset":      "The alert settings are saved.",
	"revoked":        "The key is revoked.",
	"status":         "The listing's status changed.",
	"refreshed":      "The card was fetched again.",
	"refreshfailed":  "The card could not be fetched again: the listing is marked unhealthy until it can (the reason is below).",
	"retried":        "The notification will be sent again now.",
	"switchedoff":    "Switched off: every meter refuses its calls and ends its streams within a second.",
	"lifted":         "The kill switch is lifted: calls go through again within a second.",
	"granted":        "Credit granted: the org's calls pay from it within seconds.",
	"purchased":      "Thank you: the credit is added as soon as Stripe confirms the payment.",
	"creditsettings": "Credit settings saved: every meter applies them within seconds.",
}

// can reports whether the actor's role may act on obj.
func (u *UI) can(r *req, obj, act string) bool {
	return r.signedIn && u.d.Authorizer.Authorize(r.ctx, r.actor, obj, act) == nil
}

// require ends the request with Unauthorized (signed out) or Forbidden.
func (u *UI) require(r *req, obj, act string) error {
	if !r.signedIn {
		return agentmarket.Errorf(agentmarket.Unauthorized, "no_session", "sign in to see this page")
	}
	return u.d.Authorizer.Authorize(r.ctx, r.actor, obj, act)
}

func redirect(r *req, to string) error {
	return r.c.Redirect(to, fiber.StatusSeeOther)
}

// serveStatic serves the embedded assets; their URLs carry a version, so
// browsers may keep them.
func (u *UI) serveStatic(c *fiber.Ctx) error {
	name := c.Params("*")
	b, err := fs.ReadFile(u.static, name)
	if err != nil || strings.Contains(name, "..") {
		return c.Status(fiber.StatusNotFound).SendString("not found")
	}
	switch {
	case strings.HasSuffix(name, ".css"):
		c.Set(fiber.HeaderContentType, "text/css; charset=utf-8")
	case strings.HasSuffix(name, ".js"):
		c.Set(fiber.HeaderContentType, "text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".svg"):
		c.Set(fiber.HeaderContentType, "image/svg+xml")
	}
	c.Set("X-Content-Type-Options", "nosniff")
	c.Set(fiber.HeaderCacheControl, "public, max-age=86400")
	return c.Send(b)
}

// nameCache remembers org names, which never change once created.
type nameCache struct {
	mu sync.Mutex
	m  map[string]string
}

func (n *nameCache) get(id string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	v, ok := n.m[id]
	return v, ok
}

func (n *nameCache) put(id, name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil || len(n.m) > 10000 {
		n.m = map[string]string{}
	}
	n.m[id] = name
}

// orgName returns an org's name, or its id when it cannot be read.
func (u *UI) orgName(ctx context.Context, id string) string {
	if id == "" {
		return ""
	}
	if v, ok := u.orgs.get(id); ok {
		return v
	}
	o, err := u.d.Accounts.Store.GetOrg(ctx, id)
	if err != nil {
		return id
	}
	u.orgs.put(o.ID, o.Name)
	return o.Name
}
