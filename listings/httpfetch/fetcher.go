package httpfetch

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings"
)

// Codes of the errors FetchCard returns. Every one is an *agentmarket.Error
// of kind Invalid with a single FieldError on field "card_url", so the API
// can show it next to the URL the seller typed.
const (
	CodeCardURLInvalid = "card_url_invalid"     // not an absolute http(s) URL
	CodeCardURLRefused = "card_url_refused"     // the guard refused the address (Err holds Guard's url_refused error)
	CodeRedirects      = "card_fetch_redirects" // redirect loop, or more than MaxRedirects
	CodeTimeout        = "card_fetch_timeout"   // no complete answer within Timeout
	CodeStatus         = "card_fetch_status"    // a non-2xx answer (other than 304 to a conditional fetch)
	CodeTooLarge       = "card_too_large"       // body larger than MaxBytes
	CodeNotJSON        = "card_not_json"        // body does not start with '{'
	CodeFetchFailed    = "card_fetch_failed"    // any other network failure: unknown host, connection refused, TLS
)

// Defaults for the zero values of Fetcher's fields.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultMaxBytes     = 64 << 10
	DefaultMaxRedirects = 5
)

// UserAgent is sent with every card fetch so agent operators can recognise
// (and rate-limit) the marketplace.
const UserAgent = "AgentMarket-CardFetcher/1"

const (
	wellKnownPath = "/.well-known/agent-card.json"
	legacyPath    = "/.well-known/agent.json" // the name before A2A 0.3
)

// Fetcher fetches agent cards over HTTP(S) under the SSRF guard, with a
// timeout, a size cap and a redirect bound. The zero Fetcher is ready to
// use with the strict guard and the defaults; it is safe for concurrent use
// as long as its fields are not changed.
type Fetcher struct {
	Guard Guard
	// Timeout bounds the whole fetch, redirects and well-known fallback
	// included. Zero means DefaultTimeout.
	Timeout time.Duration
	// MaxBytes caps the card body; at most MaxBytes+1 bytes are ever read.
	// Zero means DefaultMaxBytes.
	MaxBytes int64
	// MaxRedirects is how many redirects one request may follow. Zero
	// means DefaultMaxRedirects; a negative value follows none.
	MaxRedirects int
	// Dialer is the base dialer the guard is installed on (timeouts; tests
	// give it an in-memory resolver and a safety net); nil means a 30 s
	// connect timeout.
	Dialer *net.Dialer
	// Clock stamps FetchedAt; nil means the system clock in UTC.
	Clock agentmarket.Clock
	// Transport overrides the HTTP transport, for tests. The default
	// dials through Guard.DialContext and has no proxy: a proxy from the
	// environment would make the connection to the proxy, not the target,
	// and the guard would check the wrong address. An override is only
	// guarded up front (literal IP hosts, redirect targets) unless it dials
	// through Guard.DialContext itself.
	Transport http.RoundTripper
}

var (
	_ listings.CardFetcher   = (*Fetcher)(nil)
	_ listings.EndpointGuard = Guard{}
)

// FetchCard fetches the card at cardURL; see listings.CardFetcher.
func (f *Fetcher) FetchCard(ctx context.Context, cardURL, etag string) (*listings.FetchedCard, error) {
	u, err := f.checkURL(cardURL, "")
	if err != nil {
		return nil, err
	}

	targets := []string{u.String()}
	if u.Path == "" || u.Path == "/" {
		// A bare origin names the agent, not the card: look in the
		// well-known place, then where cards lived before A2A 0.3.
		base := url.URL{Scheme: u.Scheme, Host: u.Host}
		targets = []string{base.String() + wellKnownPath, base.String() + legacyPath}
	}

	timeout := f.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	// The timeout message must state the limit that actually applied.
	limit := timeout
	if d, ok := ctx.Deadline(); ok && time.Until(d) < limit {
		limit = time.Until(d).Round(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	client := &http.Client{Transport: f.Transport, CheckRedirect: f.checkRedirect}
	if client.Transport == nil {
		// A transport per fetch: the guard is read when the fetch starts,
		// the fallback request can reuse the first connection, and no
		// idle connection to an agent outlives the fetch. Card fetches
		// are rare enough that the lost reuse across fetches costs nothing.
		tr := f.defaultTransport()
		defer tr.CloseIdleConnections()
		client.Transport = tr
	}

	card, status, err := f.get(ctx, client, targets[0], etag, limit)
	if status == http.StatusNotFound && len(targets) > 1 {
		card, _, err = f.get(ctx, client, targets[1], etag, limit)
	}
	return card, err
}

func (f *Fetcher) defaultTransport() *http.Transport {
	base := f.Dialer
	if base == nil {
		base = &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	}
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            f.Guard.DialContext(base),
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		MaxResponseHeaderBytes: 1 << 20, // the default 10 MB is generous for a hostile peer
	}
}

// get performs one GET (following redirects) and returns the card, or the
// HTTP status alongside the error so that FetchCard can fall back on 404.
func (f *Fetcher) get(ctx context.Context, client *http.Client, target, etag string, limit time.Duration) (*listings.FetchedCard, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, 0, fieldError(CodeCardURLInvalid, "absolute_http_url", err, "%q is not a valid URL", target)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}

	resp, err := client.Do(req)
	if err != nil {
		return nil, 0, f.transportError(ctx, err, req.URL, limit, false)
	}
	defer resp.Body.Close()
	final := resp.Request.URL

	switch {
	case resp.StatusCode == http.StatusNotModified && etag != "":
		card := &listings.FetchedCard{URL: final.String(), ETag: resp.Header.Get("ETag"), NotModified: true, FetchedAt: f.now()}
		if card.ETag == "" {
			// A 304 need not repeat the validator; the one sent still holds.
			card.ETag = etag
		}
		return card, resp.StatusCode, nil
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, resp.StatusCode, fieldError(CodeStatus, "status_2xx", nil,
			"GET %s answered %d %s%s", final, resp.StatusCode, http.StatusText(resp.StatusCode), statusHint(resp))
	}

	maxBytes := f.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if resp.ContentLength > maxBytes {
		return nil, resp.StatusCode, tooLarge(final, maxBytes)
	}
	// One byte more than allowed tells "exactly at the cap" from "over it"
	// without ever reading an unbounded body.
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	if err != nil {
		return nil, resp.StatusCode, f.transportError(ctx, err, final, limit, true)
	}
	if int64(len(body)) > maxBytes {
		return nil, resp.StatusCode, tooLarge(final, maxBytes)
	}
	if rest := bytes.TrimLeft(body, " \t\r\n"); len(rest) == 0 || rest[0] != '{' {
		// The content type is not trusted (many hosts serve cards as
		// text/plain), but it is the most useful hint when the body is
		// wrong, typically an HTML error or login page.
		return nil, resp.StatusCode, fieldError(CodeNotJSON, "json_object", nil,
			"%s did not return a JSON object (content type %s)", final, describeContentType(resp.Header.Get("Content-Type")))
	}
	return &listings.FetchedCard{
		URL:       final.String(),
		Body:      body,
		ETag:      resp.Header.Get("ETag"),
		FetchedAt: f.now(),
	}, resp.StatusCode, nil
}

// statusHint says what a status the fetch cannot use usually means.
func statusHint(resp *http.Response) string {
	switch c := resp.StatusCode; {
	case c >= 300 && c <= 399 && resp.Header.Get("Location") == "":
		return " (a redirect without a Location header to follow)"
	case c == http.StatusUnauthorized, c == http.StatusForbidden:
		return " (the card must be readable without credentials)"
	case c == http.StatusNotFound:
		return " (no card at that path)"
	}
	return ""
}

// checkURL accepts absolute http(s) URLs whose host, when it is a literal
// IP, passes the guard. The literal check gives a clear error before any
// dial; the dial-time check still covers hostnames. via is the URL that
// redirected here, "" for the URL the caller gave.
func (f *Fetcher) checkURL(raw, via string) (*url.URL, error) {
	prefix := ""
	if via != "" {
		prefix = fmt.Sprintf("%s redirected to %s: ", via, raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fieldError(CodeCardURLInvalid, "absolute_http_url", err, "%s%q is not a valid URL", prefix, raw)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fieldError(CodeCardURLInvalid, "absolute_http_url", nil, "%s%q is not an absolute http or https URL", prefix, raw)
	}
	if u.Hostname() == "" || u.Opaque != "" {
		return nil, fieldError(CodeCardURLInvalid, "absolute_http_url", nil, "%s%q has no host", prefix, raw)
	}
	if u.User != nil {
		// Credentials in a card URL would be sent to (and logged by) every
		// hop, and "http://good.example@10.0.0.1/" style URLs exist to
		// mislead readers about the host.
		return nil, fieldError(CodeCardURLInvalid, "absolute_http_url", nil, "%s%q contains user credentials", prefix, u.Redacted())
	}
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
		var gerr *agentmarket.Error
		if errors.As(f.Guard.Check(ip), &gerr) {
			return nil, refusedError(prefix+"refusing to fetch from "+u.Host, gerr)
		}
	}
	u.Fragment, u.RawFragment = "", "" // never sent; keep it out of FetchedCard.URL
	return u, nil
}

func (f *Fetcher) checkRedirect(req *http.Request, via []*http.Request) error {
	maxHops := f.MaxRedirects
	switch {
	case maxHops == 0:
		maxHops = DefaultMaxRedirects
	case maxHops < 0:
		maxHops = 0
	}
	// via holds every request made so far, so this is redirect len(via).
	prev := via[len(via)-1].URL
	for _, v := range via {
		if v.URL.String() == req.URL.String() {
			return fieldError(CodeRedirects, "max_redirects", nil,
				"redirect loop: %s redirected back to %s, already fetched (redirect %d)", prev, req.URL, len(via))
		}
	}
	if len(via) > maxHops {
		return fieldError(CodeRedirects, "max_redirects", nil,
			"too many redirects: %s redirected again after %d redirects (at most %d are followed)", prev, len(via)-1, maxHops)
	}
	// The dialer would refuse a private target anyway; checking literal
	// IPs here gives the clearer error and keeps overridden transports safe.
	_, err := f.checkURL(req.URL.String(), prev.String())
	return err
}

// transportError turns a failed round trip or body read into the fetch's
// error model, in words a seller can act on: what failed (refused, timed
// out, TLS, DNS, redirect), never an address a name resolved to (that
// would map the marketplace's network). at is the URL being fetched when
// it failed; reading is true when the answer had begun and its body
// stopped.
func (f *Fetcher) transportError(ctx context.Context, err error, at *url.URL, limit time.Duration, reading bool) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		if u, perr := url.Parse(uerr.URL); perr == nil {
			at = u
		}
	}
	var aerr *agentmarket.Error
	if errors.As(err, &aerr) {
		if aerr.Code == CodeURLRefused {
			// The dialer's guard refused the resolved address.
			return refusedError("refusing to connect to "+at.Host, aerr)
		}
		return aerr // our own, from checkRedirect
	}
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// The caller cancelled; that says nothing about the card URL.
		return ctx.Err()
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		switch {
		case dnsErr.IsNotFound:
			return fieldError(CodeFetchFailed, "reachable", err, "host %s not found: no DNS record has that name (check its spelling)", at.Hostname())
		case !dnsErr.IsTimeout && ctx.Err() == nil:
			return fieldError(CodeFetchFailed, "reachable", err, "could not look up host %s: the DNS lookup failed (%s)", at.Hostname(), dnsErr.Err)
		}
	}
	// Our deadline, the caller's, or a dial/TLS timeout inside the transport.
	var nerr net.Error
	if ctx.Err() != nil || (errors.As(err, &nerr) && nerr.Timeout()) {
		return fieldError(CodeTimeout, "timeout", err, "no answer from %s within %s: %s", at.Host, limit, timeoutPhase(err, reading))
	}
	if msg := networkCause(err, at); msg != "" {
		return fieldError(CodeFetchFailed, "reachable", err, "%s", msg)
	}
	if c := agentmarket.Cause(err); c != "" {
		return fieldError(CodeFetchFailed, "reachable", err, "could not fetch the card from %s: %s", at.Host, c)
	}
	return fieldError(CodeFetchFailed, "reachable", err, "could not fetch the card from %s", at.Host)
}

// timeoutPhase says where a fetch that ran out of time was.
func timeoutPhase(err error, reading bool) string {
	var oerr *net.OpError
	switch {
	case reading:
		return "timed out while the card was arriving (the server stopped sending it)"
	case errors.As(err, &oerr) && oerr.Op == "dial":
		return "timed out connecting (the host is down, or a firewall drops the connection)"
	case strings.Contains(err.Error(), "TLS handshake timeout"):
		return "timed out in the TLS handshake"
	case errors.As(err, &oerr) && oerr.Op == "lookup":
		return "timed out looking up the host's name"
	}
	return "timed out waiting for the answer (the server took the connection but did not answer in time)"
}

// networkCause names a failure to connect, to speak TLS or HTTP, or to
// follow a redirect; "" when it is none of those.
func networkCause(err error, at *url.URL) string {
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostnameErr      x509.HostnameError
		invalidCert      x509.CertificateInvalidError
		verifyErr        *tls.CertificateVerificationError
		recordErr        tls.RecordHeaderError
		alertErr         tls.AlertError
	)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("connection refused by %s: nothing listens on that port (is the agent running, and on this port?)", at.Host)
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return fmt.Sprintf("no route to %s: the host is unreachable from the marketplace", at.Host)
	case errors.As(err, &unknownAuthority):
		return fmt.Sprintf("the TLS certificate of %s is not trusted: it is signed by an unknown authority (self-signed, or by a private CA); serve one from a public CA", at.Host)
	case errors.As(err, &hostnameErr):
		return fmt.Sprintf("the TLS certificate of %s is not valid for that name: %s", at.Host, gist(hostnameErr))
	case errors.As(err, &invalidCert):
		return fmt.Sprintf("the TLS certificate of %s is not valid: %s", at.Host, gist(invalidCert))
	case errors.As(err, &verifyErr):
		return fmt.Sprintf("the TLS certificate of %s does not verify: %s", at.Host, gist(verifyErr.Err))
	case errors.As(err, &recordErr):
		return fmt.Sprintf("%s did not answer in TLS (is this the agent's address and port?)", at.Host)
	case errors.As(err, &alertErr):
		return fmt.Sprintf("the TLS handshake with %s failed: the server refused it (%s)", at.Host, gist(alertErr))
	}
	// net/http says these in words only.
	switch msg := err.Error(); {
	case strings.Contains(msg, "failed to parse Location header"):
		return fmt.Sprintf("%s answered a redirect whose Location header is not a valid URL", at.Host)
	case strings.Contains(msg, "malformed HTTP"):
		return fmt.Sprintf("%s did not answer in HTTP (is this the agent's web address and port?)", at.Host)
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		return fmt.Sprintf("%s answered in plain HTTP to an https:// URL (use http://, or serve TLS)", at.Host)
	case strings.Contains(msg, "tls: "):
		return fmt.Sprintf("the TLS handshake with %s failed: %s", at.Host, gist(err))
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return fmt.Sprintf("%s closed the connection without answering (is it the agent's web server, and does it speak this scheme?)", at.Host)
	}
	return ""
}

// gist is an error's own words without the package prefixes and the
// wrapping of the layers above it.
func gist(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, "tls: "); i >= 0 {
		msg = msg[i+len("tls: "):]
	}
	if i := strings.LastIndex(msg, "x509: "); i >= 0 {
		msg = msg[i+len("x509: "):]
	}
	return msg
}

func (f *Fetcher) now() time.Time {
	if f.Clock == nil {
		return time.Now().UTC()
	}
	return f.Clock.Now()
}

func tooLarge(at *url.URL, maxBytes int64) error {
	return fieldError(CodeTooLarge, "max_bytes", nil, "the card at %s is larger than %d bytes", at, maxBytes)
}

func refusedError(what string, guardErr *agentmarket.Error) error {
	e := fieldError(CodeCardURLRefused, "public_address", nil, "%s: %s", what, guardErr.Message)
	e.Err = guardErr
	return e
}

// describeContentType names the media type a server sent, without echoing
// parameters or arbitrary header text into a user-facing message.
func describeContentType(ct string) string {
	if ct == "" {
		return "none"
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || len(mt) > 100 {
		return "unparseable"
	}
	return mt
}

// fieldError builds the fetch's error: kind Invalid, with the message also
// attached to field card_url so the API can show it beside the input.
func fieldError(code, rule string, cause error, format string, args ...any) *agentmarket.Error {
	msg := fmt.Sprintf(format, args...)
	return &agentmarket.Error{
		Kind:    agentmarket.Invalid,
		Code:    code,
		Message: msg,
		Fields:  []agentmarket.FieldError{{Field: "card_url", Rule: rule, Message: msg}},
		Err:     cause,
	}
}
