package a2aproxy

import (
	"bufio"
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// The meter's HTTP side: the one file of the package that knows Fiber. Its
// handlers read what the pipeline needs of a request (the listing, the
// body, the binding's path and query) and give the pipeline an exchange
// to read headers from and answer through; the pipeline (proxy.go and the
// files it calls) never sees a *fiber.Ctx.

// exchange is the buyer's side of one call as the pipeline sees it.
type exchange interface {
	// Context is the request's context (it ends when the buyer leaves a
	// unary call).
	Context() context.Context
	// Header is a request header ("" when absent).
	Header(name string) string
	// Answer sends a whole answer; header holds name, value pairs.
	Answer(status int, contentType string, body []byte, header ...string) error
	// Stream answers 200 with an event stream: write runs after the
	// handler returned, as long as the stream lasts, and must not touch
	// the exchange.
	Stream(write func(w *bufio.Writer), header ...string) error
}

// fiberExchange is an exchange over Fiber's request context.
type fiberExchange struct{ c *fiber.Ctx }

func (x fiberExchange) Context() context.Context  { return x.c.UserContext() }
func (x fiberExchange) Header(name string) string { return x.c.Get(name) }

func (x fiberExchange) Answer(status int, contentType string, body []byte, header ...string) error {
	x.c.Set(fiber.HeaderContentType, contentType)
	for i := 0; i+1 < len(header); i += 2 {
		x.c.Set(header[i], header[i+1])
	}
	// Copied: the body may be the agent's answer, whose buffer goes back
	// to its pool when the pipeline returns, before Fiber writes this.
	x.c.Status(status).Response().SetBody(body)
	return nil
}

func (x fiberExchange) Stream(write func(w *bufio.Writer), header ...string) error {
	for i := 0; i+1 < len(header); i += 2 {
		x.c.Set(header[i], header[i+1])
	}
	x.c.Context().SetBodyStreamWriter(write)
	return nil
}

// Mount adds the meter's routes under /a2a.
func (p *Proxy) Mount(r fiber.Router) {
	r.Get("/a2a/:listing/.well-known/agent-card.json", p.card)
	r.Get("/a2a/:listing/.well-known/agent.json", p.card)
	r.Post("/a2a/:listing", p.rpc)
	if p.Push != nil {
		r.Post(CallbackPath+":callback", p.callback)
	}
	// Everything else under a listing is the HTTP+JSON binding.
	r.All("/a2a/:listing/*", p.rest)
}

// listingParam is the listing id of the path, copied: Fiber's params
// point into a buffer the next request reuses, and the id outlives the
// request as a cache key.
func listingParam(c *fiber.Ctx) string { return strings.Clone(c.Params("listing")) }

// card serves the proxied agent card.
func (p *Proxy) card(c *fiber.Ctx) error {
	t, err := p.target(c.UserContext(), listingParam(c))
	if err != nil {
		re := toRPC(err)
		status := re.Status
		if status == http.StatusOK {
			status = http.StatusNotFound
		}
		return c.Status(status).JSON(fiber.Map{"error": fiber.Map{"code": "listing_unavailable", "message": re.Message}})
	}
	b, err := ProxiedCard(t.CardJSON, t.Card, p.Endpoint(t.ListingID), p.Push != nil && t.Card.Capabilities.PushNotifications,
		wantsProtoJSON(c.Get("A2A-Version"), c.Query("A2A-Version")))
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	c.Set(fiber.HeaderCacheControl, "public, max-age=60")
	c.Set(fiber.HeaderVary, "A2A-Version") // the security requirement's form follows it (card.go)
	return c.Send(b)
}

// rpc serves the JSON-RPC binding.
func (p *Proxy) rpc(c *fiber.Ctx) error {
	cl, body := p.newCall(c)
	version := c.Get("A2A-Version")
	if version == "" {
		version = c.Query("A2A-Version")
	}
	parse := func() (*wire.Request, *wire.Error) {
		req, werr := wire.ParseRequest(body, version)
		if werr != nil && req != nil {
			cl.id = req.ID // a JSON-RPC error answer echoes the id when it could be read
		}
		return req, werr
	}
	return p.serve(fiberExchange{c}, cl, body, parse)
}

// rest serves the HTTP+JSON binding: the call becomes the same request a
// JSON-RPC client would have sent and goes through the same pipeline.
func (p *Proxy) rest(c *fiber.Ctx) error {
	cl, body := p.newCall(c)
	path := string(c.Request().URI().PathOriginal())
	path = strings.TrimPrefix(path, "/a2a/"+c.Params("listing"))
	query, _ := url.ParseQuery(string(c.Request().URI().QueryString()))
	cl.restVersion, cl.dialect.buyer = wire.RESTVersionOf(path, c.Get("A2A-Version"), query)
	method, contentType, version := c.Method(), c.Get(fiber.HeaderContentType), c.Get("A2A-Version")
	parse := func() (*wire.Request, *wire.Error) {
		req, werr := wire.ParseREST(method, path, query, contentType, body, version)
		if req.Version != wire.V03 {
			cl.dialect.buyer = wire.DialectSpec // a 1.0 message without its header
		}
		if werr != nil {
			cl.req = req // answer in the buyer's binding and version
		}
		return req, werr
	}
	return p.serve(fiberExchange{c}, cl, body, parse)
}

// newCall starts a call: its clock, its trace, its listing, and a copy of
// the body (fasthttp reuses the request buffer).
func (p *Proxy) newCall(c *fiber.Ctx) (*call, []byte) {
	cl := &call{start: p.Clock.Now(), trace: parseTraceparent(c.Get("traceparent")), listingID: listingParam(c)}
	body := append([]byte(nil), c.Body()...)
	cl.bytesIn = len(body)
	return cl, body
}

// callback takes a push notification from an agent (push.go's
// notification does the work) and answers it.
func (p *Proxy) callback(c *fiber.Ctx) error {
	n := notification{callbackID: strings.Clone(c.Params("callback")), traceparent: c.Get("traceparent"), body: c.Body()}
	if n.token = c.Get("A2A-Notification-Token"); n.token == "" {
		n.token = c.Get("X-A2A-Notification-Token")
	}
	if n.token == "" {
		n.token, _ = bearer(c.Get(fiber.HeaderAuthorization))
	}
	if status, msg := p.notification(c.UserContext(), n); status != http.StatusOK {
		return c.Status(status).JSON(fiber.Map{"error": fiber.Map{"message": msg}})
	}
	return c.SendStatus(http.StatusOK)
}
