package httpfetch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/agentcard"
)

// Prober sends the active health checks of agents: one call that changes
// nothing at the agent, GetTask (tasks/get in 0.3) of a task that does not
// exist, in the endpoint's binding and protocol version, with the seller's
// credential. Any well-formed A2A answer, TaskNotFound or even method not
// found, says the agent answers; a refused connection, a timeout, a TLS
// failure, an HTTP 5xx or an answer that is not A2A says it is down, in
// words. Every connection is dialled through Guard, as the meter's are.
type Prober struct {
	Guard Guard
	// Dialer is the base dialer the guard is installed on; nil means a
	// 30 s connect timeout.
	Dialer *net.Dialer
	// Timeout bounds one probe; zero means DefaultProbeTimeout.
	Timeout time.Duration

	once   sync.Once
	client *http.Client
}

// DefaultProbeTimeout bounds a probe whose Prober sets no Timeout.
const DefaultProbeTimeout = 5 * time.Second

// ProbeTaskID is the id of the task a probe asks for: none has it, and an
// agent's operator can recognise the probes in its logs by it.
const ProbeTaskID = "agentmarket-health-probe"

// maxProbeBody is as much of a probe's answer as is read: an error object
// is small.
const maxProbeBody = 64 << 10

var _ listings.Prober = (*Prober)(nil)

func (p *Prober) init() {
	base := p.Dialer
	if base == nil {
		base = &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	}
	p.client = &http.Client{
		Transport: &http.Transport{
			Proxy:                  nil, // the guard must judge the agent's address, not a proxy's
			DialContext:            p.Guard.DialContext(base),
			TLSHandshakeTimeout:    10 * time.Second,
			MaxResponseHeaderBytes: 1 << 20,
			MaxIdleConnsPerHost:    1,
			IdleConnTimeout:        90 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Probe implements listings.Prober.
func (p *Prober) Probe(ctx context.Context, in agentcard.Interface, auth *listings.UpstreamAuth) listings.ProbeResult {
	p.once.Do(p.init)
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u, err := url.Parse(in.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return down("the endpoint %q is not an http(s) URL", in.URL)
	}
	if in.Binding == agentcard.BindingHTTPJSON {
		paths := []string{"/tasks/" + ProbeTaskID}
		if in.ProtocolVersion == "0.3" {
			// The 0.3 specification's path, then the one the official Go
			// SDK serves (a2aproxy/dialect.go).
			paths = []string{"/v1/tasks/" + ProbeTaskID, "/tasks/" + ProbeTaskID}
		} else if in.Tenant != "" {
			paths[0] = "/" + url.PathEscape(in.Tenant) + paths[0]
		}
		var r listings.ProbeResult
		for _, path := range paths {
			if r = p.send(ctx, http.MethodGet, strings.TrimRight(in.URL, "/")+path, nil, in, auth, timeout, restAnswer); r.Up {
				break
			}
		}
		return r
	}
	method, params := "GetTask", map[string]string{"id": ProbeTaskID}
	if in.ProtocolVersion == "0.3" {
		method = "tasks/get"
	} else if in.Tenant != "" {
		params["tenant"] = in.Tenant
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": ProbeTaskID, "method": method, "params": params})
	return p.send(ctx, http.MethodPost, in.URL, body, in, auth, timeout, rpcAnswer)
}

// send makes one probe request and judges its answer with a2a.
func (p *Prober) send(ctx context.Context, method, target string, body []byte, in agentcard.Interface, auth *listings.UpstreamAuth, timeout time.Duration,
	a2a func(status int, body []byte) bool) listings.ProbeResult {
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return down("the endpoint %q is not a valid URL", in.URL)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "AgentMarket-HealthCheck/1")
	if in.ProtocolVersion == "1.0" {
		req.Header.Set("A2A-Version", "1.0")
	}
	if auth != nil {
		req.Header.Set(auth.Header, auth.Value)
	}
	res, err := p.client.Do(req)
	if err != nil {
		return down("%s", probeCause(ctx, err, req.URL, timeout))
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxProbeBody))
	if err != nil {
		return down("%s", probeCause(ctx, err, req.URL, timeout))
	}
	switch {
	case res.StatusCode >= 500:
		return down("the agent answered HTTP %d (a server error)", res.StatusCode)
	case res.StatusCode >= 300 && res.StatusCode < 400:
		return down("the agent answered HTTP %d, a redirect; the meter does not follow an agent's redirects", res.StatusCode)
	case !a2a(res.StatusCode, b):
		return down("the agent answered HTTP %d with %s, not an A2A answer (is this the agent's A2A endpoint?)", res.StatusCode,
			describeBody(res.Header.Get("Content-Type"), b))
	}
	return listings.ProbeResult{Up: true}
}

func down(format string, args ...any) listings.ProbeResult {
	return listings.ProbeResult{Cause: fmt.Sprintf(format, args...)}
}

// rpcAnswer reports whether body is a JSON-RPC 2.0 response: a result or
// an error object.
func rpcAnswer(_ int, body []byte) bool {
	var r struct {
		JSONRPC string          `json:"jsonrpc"`
		Result  json.RawMessage `json:"result"`
		Error   *struct {
			Code *int `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &r) != nil || r.JSONRPC != "2.0" {
		return false
	}
	return r.Result != nil || (r.Error != nil && r.Error.Code != nil)
}

// restAnswer reports whether body is an HTTP+JSON answer: a JSON object
// (the task, or an error: google.rpc.Status in 1.0, the SDK's or a
// framework's error object in 0.3).
func restAnswer(_ int, body []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(body, &m) == nil && len(m) > 0
}

// describeBody names what came instead of an A2A answer.
func describeBody(contentType string, body []byte) string {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch {
	case len(bytes.TrimSpace(body)) == 0:
		return "an empty body"
	case mt != "":
		return "a " + mt + " body"
	}
	return "a body that is not JSON"
}

// probeCause says why a probe got no answer, in words the seller can act
// on, never an address a name resolved to.
func probeCause(ctx context.Context, err error, at *url.URL, timeout time.Duration) string {
	var aerr *agentmarket.Error
	if errors.As(err, &aerr) && aerr.Code == CodeURLRefused {
		return "the marketplace does not connect to " + at.Host + ": " + aerr.Message
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		return fmt.Sprintf("host %s not found: no DNS record has that name", at.Hostname())
	}
	var nerr net.Error
	if ctx.Err() != nil || (errors.As(err, &nerr) && nerr.Timeout()) {
		return fmt.Sprintf("no answer from %s within %s", at.Host, timeout)
	}
	if msg := networkCause(err, at); msg != "" {
		return msg
	}
	if c := agentmarket.Cause(err); c != "" {
		return fmt.Sprintf("could not reach %s: %s", at.Host, c)
	}
	return fmt.Sprintf("could not reach %s", at.Host)
}
