package a2aproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// The meter's HTTP side: the one file of the package that knows the HTTP
// server. Its handlers read what the pipeline needs of a request (the
// listing, the body, the binding's path and query) and give the pipeline
// an exchange to read headers from and answer through; the pipeline
// (proxy.go and the files it calls) never sees the server's request.
//
// The handlers run on fasthttp's request directly. Front serves them in
// front of the binary's Fiber app, so a call through the meter does not
// go through Fiber's router, context and middleware (BENCHMARKS.md);
// Mount adds the same handlers as Fiber routes, for an app that has no
// front (tests, an app without the meter's server).

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

// fastExchange is an exchange over fasthttp's request context.
type fastExchange struct{ c *fasthttp.RequestCtx }

// Context is the background: the server ends no request's context when
// its buyer leaves (a unary call's bound is its own timeout).
func (x fastExchange) Context() context.Context  { return context.Background() }
func (x fastExchange) Header(name string) string { return string(x.c.Request.Header.Peek(name)) }

func (x fastExchange) Answer(status int, contentType string, body []byte, header ...string) error {
	x.c.Response.Header.SetContentType(contentType)
	for i := 0; i+1 < len(header); i += 2 {
		x.c.Response.Header.Set(header[i], header[i+1])
	}
	x.c.SetStatusCode(status)
	// Copied: the body may be the agent's answer, whose buffer goes back
	// to its pool when the pipeline returns, before the server writes this.
	x.c.Response.SetBody(body)
	return nil
}

func (x fastExchange) Stream(write func(w *bufio.Writer), header ...string) error {
	for i := 0; i+1 < len(header); i += 2 {
		x.c.Response.Header.Set(header[i], header[i+1])
	}
	x.c.SetBodyStreamWriter(write)
	return nil
}

// Front returns next with the meter's routes in front of it: a request
// for them is served here, every other one by next (the binary's Fiber
// app). It matches as Fiber's default router would (case-insensitive,
// trailing slashes ignored) the routes Mount adds.
func (p *Proxy) Front(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(c *fasthttp.RequestCtx) {
		if !p.route(c) {
			next(c)
		}
	}
}

var (
	a2aPrefix      = []byte("/a2a/")
	callbackPrefix = []byte(CallbackPath)
	cardPaths      = [][]byte{[]byte(".well-known/agent-card.json"), []byte(".well-known/agent.json")}
)

// route serves c when it is one of the meter's routes, and reports
// whether it was.
func (p *Proxy) route(c *fasthttp.RequestCtx) bool {
	path := c.Request.URI().PathOriginal()
	// What Fiber routes on: the path lower-cased, trailing slashes cut.
	var buf [256]byte
	det := bytes.TrimRight(append(buf[:0], path...), "/")
	for i, ch := range det {
		if 'A' <= ch && ch <= 'Z' {
			det[i] = ch + 'a' - 'A'
		}
	}
	method := c.Request.Header.Method()
	post := string(method) == http.MethodPost
	if string(det) == CardKeysPath && (string(method) == http.MethodGet || string(method) == http.MethodHead) {
		p.serveCardKeys(c)
		return true
	}
	if rest, ok := bytes.CutPrefix(det, callbackPrefix); ok {
		if !post || len(rest) == 0 || bytes.IndexByte(rest, '/') >= 0 {
			return false
		}
		p.serveCallback(c, string(path[len(callbackPrefix):len(callbackPrefix)+len(rest)]))
		return true
	}
	rest, ok := bytes.CutPrefix(det, a2aPrefix)
	if !ok {
		return false
	}
	n := bytes.IndexByte(rest, '/')
	if n < 0 {
		n = len(rest)
	}
	if n == 0 {
		return false
	}
	listing := string(path[len(a2aPrefix) : len(a2aPrefix)+n])
	sub := bytes.TrimPrefix(rest[n:], []byte("/"))
	switch {
	case len(sub) == 0 && post:
		p.serveRPC(c, listing)
	case string(method) == http.MethodGet || string(method) == http.MethodHead:
		for _, cp := range cardPaths {
			if bytes.Equal(sub, cp) {
				p.serveCard(c, listing)
				return true
			}
		}
		p.serveREST(c, listing)
	default:
		p.serveREST(c, listing)
	}
	return true
}

// Mount adds the meter's routes under /a2a to a Fiber app (Front serves
// the same ones ahead of Fiber).
func (p *Proxy) Mount(r fiber.Router) {
	r.Get("/a2a/:listing/.well-known/agent-card.json", func(c *fiber.Ctx) error { p.serveCard(c.Context(), listingParam(c)); return nil })
	r.Get("/a2a/:listing/.well-known/agent.json", func(c *fiber.Ctx) error { p.serveCard(c.Context(), listingParam(c)); return nil })
	r.Post("/a2a/:listing", func(c *fiber.Ctx) error { p.serveRPC(c.Context(), listingParam(c)); return nil })
	r.Get(CardKeysPath, func(c *fiber.Ctx) error { p.serveCardKeys(c.Context()); return nil })
	if p.Push != nil {
		r.Post(CallbackPath+":callback", func(c *fiber.Ctx) error {
			p.serveCallback(c.Context(), strings.Clone(c.Params("callback")))
			return nil
		})
	}
	// Everything else under a listing is the HTTP+JSON binding.
	r.All("/a2a/:listing/*", func(c *fiber.Ctx) error { p.serveREST(c.Context(), listingParam(c)); return nil })
}

// listingParam is the listing id of the path, copied: Fiber's params
// point into a buffer the next request reuses, and the id outlives the
// request as a cache key.
func listingParam(c *fiber.Ctx) string { return strings.Clone(c.Params("listing")) }

// headerOf is a request header of c, copied ("" when absent).
func headerOf(c *fasthttp.RequestCtx, name string) string { return string(c.Request.Header.Peek(name)) }

// answerJSON answers v as JSON with status.
func answerJSON(c *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"internal error"}}`)
	}
	c.Response.Header.SetContentType("application/json")
	c.SetStatusCode(status)
	c.Response.SetBody(b)
}

type errorBody struct {
	Error struct {
		Code    string `json:"code,omitempty"`
		Message string `json:"message"`
	} `json:"error"`
}

// serveCard serves the proxied agent card.
func (p *Proxy) serveCard(c *fasthttp.RequestCtx, listingID string) {
	var e errorBody
	t, err := p.target(context.Background(), listingID)
	if err != nil {
		re := toRPC(err)
		status := re.Status
		if status == http.StatusOK {
			status = http.StatusNotFound
		}
		e.Error.Code, e.Error.Message = "listing_unavailable", re.Message
		answerJSON(c, status, e)
		return
	}
	b, err := ProxiedCard(t.CardJSON, t.Card, p.Endpoint(t.ListingID), p.Push != nil && t.Card.Capabilities.PushNotifications,
		wantsProtoJSON(headerOf(c, "A2A-Version"), string(c.QueryArgs().Peek("A2A-Version"))))
	if err != nil {
		p.Logger.Error("proxied card failed", "listing", listingID, "err", err)
		e.Error.Message = "internal error"
		answerJSON(c, http.StatusInternalServerError, e)
		return
	}
	if p.CardSigner != nil {
		if b, err = p.CardSigner.SignCard(p.Base, b); err != nil {
			p.Logger.Error("proxied card not signed", "listing", listingID, "err", err)
			e.Error.Message = "the card could not be signed; try again later"
			answerJSON(c, http.StatusServiceUnavailable, e)
			return
		}
	}
	c.Response.Header.SetContentType("application/json")
	c.Response.Header.Set("Cache-Control", "public, max-age=60")
	c.Response.Header.Set("Vary", "A2A-Version") // the security requirement's form follows it (card.go)
	c.Response.SetBody(b)
}

// serveCardKeys serves the JWKS that verifies the proxied cards.
func (p *Proxy) serveCardKeys(c *fasthttp.RequestCtx) {
	var e errorBody
	if p.CardSigner == nil {
		e.Error.Message = "the meter does not sign cards"
		answerJSON(c, http.StatusNotFound, e)
		return
	}
	jwks, maxAge, err := p.CardSigner.JWKS(p.Base)
	if err != nil {
		p.Logger.Error("card keys not read", "err", err)
		e.Error.Message = "the keys could not be read; try again later"
		answerJSON(c, http.StatusServiceUnavailable, e)
		return
	}
	c.Response.Header.SetContentType("application/jwk-set+json")
	c.Response.Header.Set("Cache-Control", fmt.Sprintf("public, max-age=%d", int(maxAge.Seconds())))
	c.Response.SetBody(jwks)
}

// serveRPC serves the JSON-RPC binding.
func (p *Proxy) serveRPC(c *fasthttp.RequestCtx, listingID string) {
	cl, body := p.newCall(c, listingID)
	version := headerOf(c, "A2A-Version")
	if version == "" {
		version = string(c.QueryArgs().Peek("A2A-Version"))
	}
	parse := func() (*wire.Request, *wire.Error) {
		req, werr := wire.ParseRequest(body, version)
		if werr != nil && req != nil {
			cl.id = req.ID // a JSON-RPC error answer echoes the id when it could be read
		}
		return req, werr
	}
	p.served(c, p.serve(fastExchange{c}, cl, body, parse))
}

// serveREST serves the HTTP+JSON binding: the call becomes the same
// request a JSON-RPC client would have sent and goes through the same
// pipeline.
func (p *Proxy) serveREST(c *fasthttp.RequestCtx, listingID string) {
	cl, body := p.newCall(c, listingID)
	path := strings.TrimPrefix(string(c.Request.URI().PathOriginal()), "/a2a/"+listingID)
	query, _ := url.ParseQuery(string(c.Request.URI().QueryString()))
	version := headerOf(c, "A2A-Version")
	cl.restVersion, cl.dialect.buyer = wire.RESTVersionOf(path, version, query)
	method, contentType := string(c.Request.Header.Method()), headerOf(c, "Content-Type")
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
	p.served(c, p.serve(fastExchange{c}, cl, body, parse))
}

// served ends a call whose answer could not be written (the exchange's
// own error): the buyer gets a plain 500.
func (p *Proxy) served(c *fasthttp.RequestCtx, err error) {
	if err == nil {
		return
	}
	p.Logger.Error("meter answer failed", "err", err)
	var e errorBody
	e.Error.Message = "internal error"
	answerJSON(c, http.StatusInternalServerError, e)
}

// newCall starts a call: its clock, its trace, its listing, and a copy of
// the body (fasthttp reuses the request buffer).
func (p *Proxy) newCall(c *fasthttp.RequestCtx, listingID string) (*call, []byte) {
	cl := &call{start: p.Clock.Now(), trace: parseTraceparent(headerOf(c, "traceparent")), listingID: listingID}
	body := append([]byte(nil), c.Request.Body()...)
	cl.bytesIn = len(body)
	return cl, body
}

// serveCallback takes a push notification from an agent (push.go's
// notification does the work) and answers it.
func (p *Proxy) serveCallback(c *fasthttp.RequestCtx, callbackID string) {
	n := notification{callbackID: callbackID, traceparent: headerOf(c, "traceparent"), body: c.Request.Body()}
	if n.token = headerOf(c, "A2A-Notification-Token"); n.token == "" {
		n.token = headerOf(c, "X-A2A-Notification-Token")
	}
	if n.token == "" {
		n.token, _ = bearer(headerOf(c, "Authorization"))
	}
	if status, msg := p.notification(context.Background(), n); status != http.StatusOK {
		var e errorBody
		e.Error.Message = msg
		answerJSON(c, status, e)
		return
	}
	c.SetStatusCode(http.StatusOK)
	c.Response.SetBodyString("OK") // as Fiber's SendStatus answered
}
