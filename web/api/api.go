// Package api is the marketplace's public REST API over Fiber: JSON in and
// out, bearer API keys, casbin-guarded routes, one error shape everywhere.
// Handlers are thin: decode, call a domain service with the request's
// context, encode.
package api

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/audit"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/metering"
)

// Authorizer decides whether an actor's role may act on a control-plane
// object (contracts/casbin implements it).
type Authorizer interface {
	Authorize(ctx context.Context, actor agentmarket.Actor, obj, act string) error
}

// Server holds what the handlers call.
type Server struct {
	Accounts *contracts.Accounts
	// InvokeRoles are the roles of each org whose keys may invoke listings
	// through the meter.
	InvokeRoles *contracts.InvokeRoles
	Listings    *listings.Service
	// Subscriptions and Usage are nil in a marketplace without a meter.
	Subscriptions *contracts.Subscriptions
	Usage         *metering.Reports
	Invoices      *billing.Previews
	Billing       *billing.Service
	Webhooks      *billing.Webhooks // nil without Stripe
	Tasks         *contracts.Tasks
	// PushCaps are the buyer orgs' own caps for their push deliveries
	// (nil: their routes are 404).
	PushCaps *contracts.PushCapsService
	// Offers are sellers' private offers (nil: none).
	Offers *listings.Offers
	// Switches are the kill switches (nil: their routes are 404).
	Switches *contracts.Switches
	// Credits are the orgs' prepaid credit (nil: its routes are 404).
	Credits *contracts.Credits
	// Alerts are the orgs' spend alerts (nil: none).
	Alerts *contracts.Alerts
	// Focus exports the orgs' FOCUS cost and usage rows (nil: none).
	Focus *billing.Focus
	// Verified is the listings' verified stats (nil: none).
	Verified   *metering.Verified
	Authorizer Authorizer
	Logger     *slog.Logger
	// PublicMeterURL is where buyers reach the meter (for proxied URLs).
	PublicMeterURL string
	// PushKeys publishes the keys push deliveries are signed with; nil:
	// GET /api/v1/push/jwks is 404.
	PushKeys PushKeys
	// Audit is the audit log (nil: GET /api/v1/audit is 404); AuditKeys
	// publish the keys its checkpoints are signed with.
	Audit     *audit.Log
	AuditKeys PushKeys
	// AnonymousReads limits, per client address, the catalog reads made
	// without a key (published listings and their stats, what the web
	// catalog shows anyone); nil: those need a key too.
	AnonymousReads Limiter
	// Proxies are the load balancers in front of the marketplace, whose
	// X-Forwarded-For says which client a request came from (ClientOf);
	// empty: the connection's peer is the client.
	Proxies contracts.TrustedProxies
}

// ClientOf is the key of the client a request came from, as the
// per-address limits count it: the connection's peer, or behind trusted
// proxies the address they forwarded; an IPv6 client's /64
// (contracts.TrustedProxies.Client).
func ClientOf(c *fiber.Ctx, proxies contracts.TrustedProxies) string {
	return contracts.ClientKey(ClientAddrOf(c, proxies))
}

// ClientAddrOf is the client's own address, as the audit log records it:
// the connection's peer, or behind trusted proxies the address they
// forwarded (contracts.TrustedProxies.ClientAddr).
func ClientAddrOf(c *fiber.Ctx, proxies contracts.TrustedProxies) netip.Addr {
	peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	var forwarded []string
	if len(proxies) > 0 {
		for _, v := range c.Request().Header.PeekAll(fiber.HeaderXForwardedFor) {
			forwarded = append(forwarded, string(v))
		}
	}
	return proxies.ClientAddr(peer, forwarded)
}

// Limiter admits or refuses one more request under a key, refusing with
// TooManyRequests and the wait (contracts.RateLimit implements it).
type Limiter interface {
	Take(ctx context.Context, key string) error
}

// MaxBodyBytes is the largest request body the control plane (this API
// and the web UI) accepts; larger ones are answered 413. The meter's
// routes have their own, per listing.
const MaxBodyBytes = 1 << 20

//go:embed openapi.json
var openAPI []byte

// Mount adds the /api/v1 routes to app.
func (s *Server) Mount(app *fiber.App) {
	v1 := app.Group("/api/v1", s.withRequest)
	v1.Get("/openapi.json", func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Send(openAPI)
	})
	v1.Post("/signup", s.signup)
	v1.Post("/signup/confirm", s.confirmSignup)
	v1.Post("/webhooks/stripe", s.stripeWebhook)
	v1.Get("/push/jwks", s.pushJWKS)
	v1.Get("/audit/jwks", s.auditJWKS)

	// The catalog reads take a key but need none: without one, the
	// visitor sees what the web catalog shows anyone. They are mounted
	// before the group below, whose authentication would otherwise run
	// first.
	v1.Get("/listings", s.keyOptional, s.limitAnonymous, s.allowKeyed(contracts.ObjListings, contracts.ActRead), s.searchListings)
	v1.Get("/listings/:id", s.keyOptional, s.limitAnonymous, s.allowKeyed(contracts.ObjListings, contracts.ActRead), s.getListing)
	v1.Get("/listings/:id/stats", s.keyOptional, s.limitAnonymous, s.allowKeyed(contracts.ObjListings, contracts.ActRead), s.listingStats)

	auth := v1.Group("", s.authenticate)
	auth.Get("/org", s.allow(contracts.ObjOrg, contracts.ActRead), s.getOrg)
	auth.Patch("/org", s.allow(contracts.ObjOrg, contracts.ActWrite), s.updateOrg)
	auth.Put("/org/budget", s.allow(contracts.ObjOrgBudget, contracts.ActWrite), s.setOrgBudget)
	auth.Put("/org/rate-limits", s.allow(contracts.ObjRateLimits, contracts.ActWrite), s.setOrgRateLimits)
	auth.Get("/org/invoke-roles", s.allow(contracts.ObjOrg, contracts.ActRead), s.getInvokeRoles)
	auth.Patch("/org/invoke-roles", s.allow(contracts.ObjInvokeRoles, contracts.ActWrite), s.setInvokeRoles)
	auth.Post("/api-keys", s.allow(contracts.ObjAPIKeys, contracts.ActWrite), s.createKey)
	auth.Get("/api-keys", s.allow(contracts.ObjAPIKeys, contracts.ActRead), s.listKeys)
	auth.Delete("/api-keys/:id", s.allow(contracts.ObjAPIKeys, contracts.ActWrite), s.revokeKey)
	auth.Put("/api-keys/:id/rate-limits", s.allow(contracts.ObjRateLimits, contracts.ActWrite), s.setKeyRateLimits)

	auth.Post("/listings", s.allow(contracts.ObjListings, contracts.ActWrite), s.createListing)
	auth.Patch("/listings/:id", s.allowListingPatch, s.updateListing)
	auth.Post("/listings/:id/refresh", s.allow(contracts.ObjListings, contracts.ActWrite), s.refreshListing)
	auth.Get("/listings/:id/versions", s.allow(contracts.ObjListings, contracts.ActRead), s.listingVersions)

	auth.Post("/listings/:id/offers", s.allow(contracts.ObjListings, contracts.ActWrite), s.createOffer)
	auth.Get("/offers", s.allow(contracts.ObjListings, contracts.ActRead), s.listOffers)
	auth.Get("/offers/:id", s.allow(contracts.ObjListings, contracts.ActRead), s.getOffer)
	auth.Delete("/offers/:id", s.allow(contracts.ObjListings, contracts.ActWrite), s.withdrawOffer)
	auth.Post("/offers/:id/accept", s.allow(contracts.ObjSubscriptions, contracts.ActWrite), s.acceptOffer)

	auth.Post("/subscriptions", s.allow(contracts.ObjSubscriptions, contracts.ActWrite), s.subscribe)
	auth.Get("/subscriptions", s.allow(contracts.ObjSubscriptions, contracts.ActRead), s.listSubscriptions)
	auth.Get("/subscriptions/:id", s.allow(contracts.ObjSubscriptions, contracts.ActRead), s.getSubscription)
	auth.Delete("/subscriptions/:id", s.allow(contracts.ObjSubscriptions, contracts.ActWrite), s.cancelSubscription)
	auth.Patch("/subscriptions/:id", s.allow(contracts.ObjSubscriptions, contracts.ActWrite), s.updateSubscription)
	auth.Post("/subscriptions/:id/plan", s.allow(contracts.ObjSubscriptions, contracts.ActWrite), s.changePlan)
	auth.Get("/subscriptions/:id/fallbacks", s.allow(contracts.ObjSubscriptions, contracts.ActRead), s.getFallbacks)
	auth.Put("/subscriptions/:id/fallbacks", s.allow(contracts.ObjSubscriptions, contracts.ActWrite), s.setFallbacks)
	auth.Get("/tasks/:listing/:task", s.allow(contracts.ObjUsage, contracts.ActRead), s.getTask)
	auth.Get("/push-deliveries", s.allow(contracts.ObjSubscriptions, contracts.ActRead), s.listDeliveries)
	auth.Post("/push-deliveries/:id/retry", s.allow(contracts.ObjSubscriptions, contracts.ActWrite), s.retryDelivery)
	auth.Get("/push-caps", s.pushCapsServed, s.allow(contracts.ObjSubscriptions, contracts.ActRead), s.listPushCaps)
	auth.Put("/push-caps", s.pushCapsServed, s.allow(contracts.ObjSubscriptions, contracts.ActWrite), s.setPushCaps)
	auth.Delete("/push-caps", s.pushCapsServed, s.allow(contracts.ObjSubscriptions, contracts.ActWrite), s.deletePushCaps)
	auth.Get("/usage", s.allow(contracts.ObjUsage, contracts.ActRead), s.usage)
	auth.Get("/invoices/preview", s.allow(contracts.ObjBilling, contracts.ActRead), s.invoicePreview)
	auth.Get("/invoices", s.allow(contracts.ObjBilling, contracts.ActRead), s.issuedInvoices)
	auth.Get("/reconciliation", s.allow(contracts.ObjBilling, contracts.ActRead), s.reconciliation)
	auth.Get("/exports/focus", s.allow(contracts.ObjBilling, contracts.ActRead), s.focusExport)
	auth.Get("/alerts", s.allow(contracts.ObjUsage, contracts.ActRead), s.listAlerts)
	auth.Get("/alerts/settings", s.allow(contracts.ObjUsage, contracts.ActRead), s.alertSettings)
	auth.Put("/alerts/settings", s.allow(contracts.ObjSubscriptions, contracts.ActWrite), s.setAlertSettings)
	// Who reads the audit log is the log's rule (admins their org's,
	// operators everything), not a role's permission.
	auth.Get("/audit", s.listAudit)
	auth.Get("/audit/verify", s.verifyAudit)
	auth.Post("/kill-switches", s.switchesServed, s.setKillSwitch)
	auth.Get("/kill-switches", s.switchesServed, s.listKillSwitches)
	auth.Post("/kill-switches/:id/lift", s.switchesServed, s.liftKillSwitch)
	auth.Get("/credit", s.creditServed, s.allow(contracts.ObjBilling, contracts.ActRead), s.creditAccounts)
	auth.Get("/credit/movements", s.creditServed, s.allow(contracts.ObjBilling, contracts.ActRead), s.creditMovements)
	auth.Post("/credit/purchases", s.creditServed, s.creditPurchase)
	auth.Put("/credit/settings", s.creditServed, s.creditSettings)
	auth.Post("/credit/grants", s.creditServed, s.creditMove(true))
	auth.Post("/credit/refunds", s.creditServed, s.creditMove(false))

	v1.Use(func(c *fiber.Ctx) error {
		return agentmarket.Errorf(agentmarket.NotFound, "route_not_found", "no route %s %s", c.Method(), c.Path())
	})
}

// ErrorHandler is the app's one error mapping: every error leaves as the
// same JSON shape with a stable code, and internal details are logged once
// and never shown.
func (s *Server) ErrorHandler(c *fiber.Ctx, err error) error {
	return WriteError(c, s.Logger, err)
}

// ErrorBody is the one error shape of the REST API.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of an ErrorBody.
type ErrorDetail struct {
	Code    string                   `json:"code"`
	Message string                   `json:"message"`
	Fields  []agentmarket.FieldError `json:"fields,omitempty"`
}

// WriteError writes err in the API's error shape.
func WriteError(c *fiber.Ctx, log *slog.Logger, err error) error {
	var fe *fiber.Error
	if errors.As(err, &fe) {
		err = fromFiber(fe)
	}
	var ae *agentmarket.Error
	if !errors.As(err, &ae) {
		ae = agentmarket.Wrap(agentmarket.Internal, "internal", err, "internal error")
	}
	status := Status(ae.Kind)
	if status >= 500 && log != nil {
		log.ErrorContext(c.UserContext(), "request failed", "method", c.Method(), "path", c.Path(), "code", ae.Code, "err", err)
	}
	msg := ae.Message
	if ae.Kind == agentmarket.Internal && msg == "" {
		msg = "internal error"
	}
	SetRetryAfter(c, ae)
	return c.Status(status).JSON(ErrorBody{Error: ErrorDetail{Code: ae.Code, Message: msg, Fields: ae.Fields}})
}

// SetRetryAfter sends how long a throttled caller must wait (whole
// seconds, rounded up), for the API and the web pages alike.
func SetRetryAfter(c *fiber.Ctx, ae *agentmarket.Error) {
	if ae != nil && ae.RetryAfter > 0 {
		c.Set(fiber.HeaderRetryAfter, strconv.FormatInt(int64((ae.RetryAfter+time.Second-1)/time.Second), 10))
	}
}

// Status maps an error kind to its HTTP status: the one place it is done.
func Status(k agentmarket.Kind) int {
	switch k {
	case agentmarket.Invalid:
		return fiber.StatusUnprocessableEntity
	case agentmarket.NotFound:
		return fiber.StatusNotFound
	case agentmarket.Conflict:
		return fiber.StatusConflict
	case agentmarket.Unauthorized:
		return fiber.StatusUnauthorized
	case agentmarket.Forbidden:
		return fiber.StatusForbidden
	case agentmarket.PaymentRequired:
		return fiber.StatusPaymentRequired
	case agentmarket.TooLarge:
		return fiber.StatusRequestEntityTooLarge
	case agentmarket.HeadersTooLarge:
		return fiber.StatusRequestHeaderFieldsTooLarge
	case agentmarket.TimedOut:
		return fiber.StatusRequestTimeout
	case agentmarket.Unavailable:
		return fiber.StatusServiceUnavailable
	case agentmarket.TooManyRequests:
		return fiber.StatusTooManyRequests
	default:
		return fiber.StatusInternalServerError
	}
}

func fromFiber(fe *fiber.Error) error {
	switch fe.Code {
	case fiber.StatusRequestEntityTooLarge:
		return agentmarket.Errorf(agentmarket.TooLarge, "body_too_large", "the request body is too large")
	case fiber.StatusRequestHeaderFieldsTooLarge:
		return agentmarket.Errorf(agentmarket.HeadersTooLarge, "headers_too_large", "the request's URL and headers are too large")
	case fiber.StatusNotFound:
		return agentmarket.Errorf(agentmarket.NotFound, "route_not_found", "%s", fe.Message)
	case fiber.StatusMethodNotAllowed:
		return agentmarket.Errorf(agentmarket.NotFound, "method_not_allowed", "%s", fe.Message)
	case fiber.StatusBadRequest:
		return agentmarket.Errorf(agentmarket.Invalid, "bad_request", "%s", fe.Message)
	case fiber.StatusRequestTimeout:
		// fasthttp's read timeout, also on a connection that never sent
		// a request: 408, which an HTTP client takes as the server
		// closing an idle connection (not as an answer it never asked
		// for, nor as the server failing).
		return agentmarket.Errorf(agentmarket.TimedOut, "request_timeout", "the request was not received in time")
	}
	return agentmarket.Errorf(agentmarket.Internal, "internal", "%s", fe.Message)
}

type (
	actorKey     struct{}
	anonymousKey struct{}
)

// authenticate resolves the bearer key into the actor.
func (s *Server) authenticate(c *fiber.Ctx) error {
	h := c.Get(fiber.HeaderAuthorization)
	scheme, secret, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="agentmarket"`)
		return agentmarket.Errorf(agentmarket.Unauthorized, "missing_api_key", "send your API key as: Authorization: Bearer amk_…")
	}
	actor, err := s.Accounts.Authenticate(c.UserContext(), strings.TrimSpace(secret))
	if err != nil {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="agentmarket", error="invalid_token"`)
		return err
	}
	c.Locals(actorKey{}, actor)
	return c.Next()
}

// keyOptional authenticates a request that sends a key, as every route
// does, and lets one without an Authorization header through as an
// anonymous visitor (the zero actor, which the listings service shows
// published listings only). Without AnonymousReads a key is required.
func (s *Server) keyOptional(c *fiber.Ctx) error {
	if s.AnonymousReads == nil || strings.TrimSpace(c.Get(fiber.HeaderAuthorization)) != "" {
		return s.authenticate(c)
	}
	c.Locals(anonymousKey{}, true)
	return c.Next()
}

func anonymous(c *fiber.Ctx) bool {
	a, _ := c.Locals(anonymousKey{}).(bool)
	return a
}

// limitAnonymous counts an anonymous visitor's request against its
// address's limit; requests with a key are limited by what the key may do.
func (s *Server) limitAnonymous(c *fiber.Ctx) error {
	if anonymous(c) {
		if err := s.AnonymousReads.Take(c.UserContext(), "anon:addr:"+ClientOf(c, s.Proxies)); err != nil {
			return err
		}
	}
	return c.Next()
}

// allowKeyed is allow for a request with a key; an anonymous visitor has
// no role to check, and reads only what the service shows anyone.
func (s *Server) allowKeyed(obj, act string) fiber.Handler {
	allow := s.allow(obj, act)
	return func(c *fiber.Ctx) error {
		if anonymous(c) {
			return c.Next()
		}
		return allow(c)
	}
}

func actorOf(c *fiber.Ctx) agentmarket.Actor {
	a, _ := c.Locals(actorKey{}).(agentmarket.Actor)
	return a
}

// allow guards a route with a casbin check of the actor's role.
func (s *Server) allow(obj, act string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if err := s.Authorizer.Authorize(c.UserContext(), actorOf(c), obj, act); err != nil {
			return err
		}
		return c.Next()
	}
}

// allowListingPatch lets sellers edit listings and operators review them:
// an operator's admin key may PATCH any listing's status.
func (s *Server) allowListingPatch(c *fiber.Ctx) error {
	if a := actorOf(c); a.Operator {
		return c.Next()
	}
	return s.allow(contracts.ObjListings, contracts.ActWrite)(c)
}

// decode reads a JSON object body strictly: malformed JSON and unknown
// fields are refused with an error naming the problem.
func decode(c *fiber.Ctx, dst any) error {
	body := c.Body()
	if len(bytes.TrimSpace(body)) == 0 {
		return agentmarket.Errorf(agentmarket.Invalid, "malformed_json", "the request body must be a JSON object")
	}
	if !utf8.Valid(body) {
		// encoding/json would store U+FFFD in place of the bad bytes: a
		// name would not be what was sent.
		return agentmarket.Errorf(agentmarket.Invalid, "invalid_utf8", "the request body must be UTF-8 text, as JSON is")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var ute *json.UnmarshalTypeError
		var fe agentmarket.Fields
		switch {
		case errors.As(err, &ute):
			field := ute.Field
			if field == "" {
				field = "body"
			}
			fe.Add(field, "type", "%s must be %s", field, jsonType(ute.Type.Kind().String()))
			return fe.Err("invalid_field_type", "a field has the wrong type")
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			fe.Add(name, "unknown", "unknown field %q", name)
			return fe.Err("unknown_field", "the request has a field this endpoint does not take")
		}
		return agentmarket.Errorf(agentmarket.Invalid, "malformed_json", "the request body is not valid JSON: %v", err)
	}
	if dec.More() {
		return agentmarket.Errorf(agentmarket.Invalid, "malformed_json", "the request body must hold one JSON object")
	}
	return nil
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "an array"
	}
	if strings.HasPrefix(kind, "int") || strings.HasPrefix(kind, "uint") {
		return "an integer"
	}
	return "a " + kind
}
