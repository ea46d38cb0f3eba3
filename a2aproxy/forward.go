package a2aproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/listings/agentcard"
)

// upstreamRequest builds the request to the agent: the buyer's body (in
// the agent's version), the seller's credentials, the usage extension
// activated, the trace carried on. The buyer's own credentials and
// hop-by-hop headers are never forwarded. A 0.3 HTTP+JSON agent is called
// in the dialect it speaks, probed on the first call (dialect.go).
func (p *Proxy) upstreamRequest(ctx context.Context, cl *call, r *wire.Request, accept string) (agentRequest, error) {
	ar := agentRequest{method: http.MethodPost, url: cl.iface.URL, body: r.Raw}
	contentType := "application/json"
	if cl.upREST() {
		var err error
		if d := p.agentDialect(ctx, cl); d != cl.dialect.agent {
			cl.dialect.agent = d
		}
		if cl.dialect.agent == wire.DialectSDK03 {
			ar.method, ar.url, ar.body, err = wire.SDK03Upstream(r, cl.iface.URL)
		} else {
			ar.method, ar.url, ar.body, err = wire.RESTUpstream(r, cl.upVersion, cl.iface.URL, cl.iface.Tenant)
		}
		if err != nil {
			return agentRequest{}, err
		}
		contentType = wire.RESTContentType(cl.upVersion)
	}
	h := make([]string, 0, 16)
	if len(ar.body) > 0 {
		h = append(h, "Content-Type", contentType)
	}
	h = append(h, "Accept", accept, "User-Agent", "AgentMarket-Meter/1")
	if cl.upVersion == wire.V10 {
		h = append(h, "A2A-Version", "1.0")
	}
	if cl.target.Card.HasExtension(wire.UsageExtensionURI) {
		name := "X-A2A-Extensions"
		if cl.upVersion == wire.V10 {
			name = "A2A-Extensions"
		}
		h = append(h, name, wire.UsageExtensionURI)
	}
	if cl.span != nil {
		h = cl.span.startClient(cl, ar, r.Name, h)
	} else {
		h = append(h, "traceparent", cl.trace.child())
	}
	if a := cl.target.UpstreamAuth; a != nil {
		h = append(h, a.Header, a.Value)
	}
	ar.header = h
	return ar, nil
}

// outbound returns the request as the agent must get it: in its version
// (translated when the buyer spoke the other).
func outbound(cl *call) (*wire.Request, error) {
	if cl.out != nil {
		return cl.out, nil
	}
	if cl.upVersion == cl.req.Version {
		return cl.req, nil
	}
	body, err := wire.TranslateRequest(cl.req, cl.upVersion)
	if err != nil {
		return nil, err
	}
	header := ""
	if cl.upVersion == wire.V10 {
		header = "1.0"
	}
	r, werr := wire.ParseRequest(body, header)
	if werr != nil {
		return nil, werr
	}
	return r, nil
}

// unary forwards a non-streaming call and relays the answer.
func (p *Proxy) unary(c exchange, cl *call) error {
	ctx, cancel := context.WithTimeout(p.Base, cl.lim.RequestTimeout)
	defer cancel()
	r, err := outbound(cl)
	if err != nil {
		return p.fail(c, cl, err)
	}
	ar, err := p.upstreamRequest(ctx, cl, r, "application/json")
	if err != nil {
		return p.fail(c, cl, err)
	}
	rep, err := p.roundTrip(ctx, cl, ar, cl.lim.MaxResultBytes, cl.lim.RequestTimeout)
	if err != nil {
		cl.notTaken = cl.mayFallBack && beforeWork(err)
		return p.fail(c, cl, upstreamErr(ctx, err, cl.lim.RequestTimeout))
	}
	defer rep.release()
	return p.unaryFrom(ctx, c, cl, rep)
}

// readLimited reads an answer of at most limit bytes.
func readLimited(res *http.Response, limit int) ([]byte, error) {
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > limit {
		return nil, rpcErr(CodeResultTooLarge, http.StatusOK, fmt.Sprintf("the agent's answer exceeds the %d-byte result limit", limit))
	}
	return raw, nil
}

// agentAnswer reads the agent's answer to a unary call, in either
// binding, as a JSON-RPC result or error.
func agentAnswer(cl *call, m wire.Method, status int, contentType string, raw []byte) (json.RawMessage, *wire.Error, error) {
	if cl.upREST() {
		if cl.dialect.agent == wire.DialectSDK03 {
			result, e := wire.FromSDK03Response(m, status, contentType, raw)
			return result, e, nil
		}
		result, e := wire.FromRESTResponse(cl.upVersion, m, status, contentType, raw)
		return result, e, nil
	}
	resp, err := wire.ParseResponse(raw)
	if err != nil {
		return nil, nil, rpcErr(CodeUpstreamInvalid, http.StatusOK, fmt.Sprintf("the agent answered HTTP %d without a JSON-RPC response", status))
	}
	return resp.Result, resp.Error, nil
}

// unaryFrom relays the agent's whole answer and meters the call.
func (p *Proxy) unaryFrom(ctx context.Context, c exchange, cl *call, rep agentReply) error {
	raw := rep.body
	cl.notTaken = cl.mayFallBack && refusedWork(rep.status, raw)
	result, agentErr, err := agentAnswer(cl, cl.req.Method, rep.status, rep.contentType, raw)
	if err != nil {
		return p.fail(c, cl, err)
	}
	if agentErr != nil {
		cl.agentRefused(agentErr)
		if cl.passthrough() {
			return p.reply(ctx, c, cl, http.StatusOK, raw)
		}
		return p.replyError(ctx, c, cl, wire.TranslateError(cl.upVersion, cl.req.Version, agentErr))
	}
	modified := false
	var ob wire.Observation
	switch cl.req.Method {
	case wire.MethodListTasks:
		// The agent sees only the marketplace's credentials, so it lists
		// every buyer's tasks: keep the caller's own.
		if result, err = p.ownTasks(ctx, cl, result); err != nil {
			return p.fail(c, cl, err)
		}
		modified = true
	case wire.MethodExtendedCard:
		// The extended card names the agent's own endpoints and security:
		// the buyer must see the meter's, as in the public card.
		card, err := agentcard.Parse(result)
		if err != nil {
			return p.fail(c, cl, rpcErr(CodeUpstreamInvalid, http.StatusOK, "the agent's extended card is not a valid agent card"))
		}
		// Every 1.0 client sends A2A-Version 1.0 here, whatever card form
		// it reads: the agent's own form is the one its clients read.
		if result, err = ProxiedCard(result, card, p.Endpoint(cl.target.ListingID), p.pushSupported(cl), false); err != nil {
			return p.fail(c, cl, err)
		}
		if p.CardSigner != nil {
			if result, err = p.CardSigner.SignCard(ctx, result); err != nil {
				return p.fail(c, cl, err)
			}
		}
		modified = true
	default:
		ob = wire.Observe(cl.upVersion, cl.req.Method, result)
		cl.obs.add(ob)
		if cl.sent != nil && ob.Kind == wire.KindMessage && cl.obs.taskID == "" {
			cl.sentResult, cl.sentResultVersion = bytes.Clone(result), cl.upVersion
		}
	}
	if cl.passthrough() && !modified {
		if err := p.bindAnswer(ctx, cl); err != nil {
			return p.fail(c, cl, err)
		}
		p.noteProgress(cl, ob)
		return p.reply(ctx, c, cl, http.StatusOK, raw)
	}
	if cl.upVersion != cl.req.Version && cl.req.Method != wire.MethodExtendedCard {
		tr, err := wire.TranslateResult(cl.upVersion, cl.req.Version, cl.req.Method, result)
		if err != nil {
			return p.fail(c, cl, rpcErr(CodeUpstreamInvalid, http.StatusOK, "the agent's answer could not be translated: "+err.Error()))
		}
		result = tr
	}
	if err := p.bindAnswer(ctx, cl); err != nil {
		return p.fail(c, cl, err)
	}
	p.noteProgress(cl, ob)
	return p.answer(ctx, c, cl, result)
}

// answer answers a result (in the buyer's version) in the buyer's binding.
func (p *Proxy) answer(ctx context.Context, c exchange, cl *call, result json.RawMessage) error {
	if cl.buyerREST() {
		status, body := cl.restResult(result)
		return p.reply(ctx, c, cl, status, body)
	}
	return p.reply(ctx, c, cl, http.StatusOK, resultResponse(cl.req.ID, result))
}

// restResult renders a result for an HTTP+JSON buyer, in its dialect.
func (cl *call) restResult(result json.RawMessage) (int, []byte) {
	if cl.sdk03Buyer() {
		if cl.req.Method.Streaming() {
			return http.StatusOK, wire.SDK03Event(cl.req.Method, result) // one event; reply frames it
		}
		return wire.SDK03Result(cl.req.Method, result)
	}
	return wire.RESTResult(cl.req.Version, cl.req.Method, result)
}

// restError renders an error for an HTTP+JSON buyer of version v, in its
// dialect.
func (cl *call) restError(v wire.Version, e *wire.Error) (int, []byte) {
	if cl.sdk03Buyer() {
		return wire.SDK03Error(e)
	}
	return wire.RESTError(v, e)
}

// reply meters the call, then answers the buyer.
func (p *Proxy) reply(ctx context.Context, c exchange, cl *call, status int, body []byte) error {
	contentType := p.contentType(c, cl)
	if cl.req.Method.Streaming() && (!cl.buyerREST() || cl.sdk03Buyer() && status == http.StatusOK) {
		// A streaming method answers an event stream, even when all it has
		// to say is an error (the agent answered JSON); the SDK's 0.3 REST
		// clients read only a stream there, but errors as plain answers.
		body, contentType = sseData(body), "text/event-stream"
	}
	cl.bytesOut = len(body)
	p.finish(ctx, cl, p.Clock.Now().Sub(cl.start))
	return c.Answer(status, contentType, body, "traceparent", cl.trace.header())
}

// replyError answers an A2A error from the agent in the buyer's binding.
func (p *Proxy) replyError(ctx context.Context, c exchange, cl *call, e *wire.Error) error {
	if cl.buyerREST() {
		status, body := cl.restError(cl.req.Version, e)
		return p.reply(ctx, c, cl, status, body)
	}
	return p.reply(ctx, c, cl, http.StatusOK, wire.ErrorResponse(cl.req.ID, e))
}

func (p *Proxy) contentType(c exchange, cl *call) string {
	return answerType(c, cl.req.Version)
}

func resultResponse(id json.RawMessage, result json.RawMessage) []byte {
	return wire.ResultResponse(id, result)
}

// ownTasks filters a ListTasks result down to the caller's org's tasks,
// for a Proxy without a Sealer (which pages with listTasks instead).
// Paging fields are dropped with the others' tasks: their sizes and tokens
// would tell how many tasks other buyers have.
func (p *Proxy) ownTasks(ctx context.Context, cl *call, result json.RawMessage) (json.RawMessage, error) {
	var in struct {
		Tasks []json.RawMessage `json:"tasks"`
	}
	if err := json.Unmarshal(result, &in); err != nil {
		return nil, rpcErr(CodeUpstreamInvalid, http.StatusOK, "the agent's task list is not valid JSON")
	}
	kept := []json.RawMessage{}
	for _, t := range in.Tasks {
		var head struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(t, &head) != nil || head.ID == "" {
			continue
		}
		b, err := p.owners.Known(ctx, cl.target.ListingID, head.ID)
		if err != nil && !isNotFound(err) {
			return nil, err
		}
		if err == nil && mayRelay(b, cl.actor.OrgID) {
			kept = append(kept, t)
		}
	}
	out, _ := json.Marshal(map[string]any{"tasks": kept, "pageSize": len(kept), "totalSize": len(kept), "nextPageToken": ""})
	return out, nil
}

func upstreamErr(ctx context.Context, err error, limit time.Duration) error {
	if re := (*rpcError)(nil); errors.As(err, &re) {
		return re // send's: a refused address, a redirect
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return rpcErr(CodeUpstreamTimeout, http.StatusOK, fmt.Sprintf("the agent did not answer within %s", limit))
	}
	return rpcErr(CodeUpstreamUnreachable, http.StatusOK, "the agent could not be reached")
}

// fail answers err as a JSON-RPC error and meters the failed call when it
// got far enough to know whose call it was.
func (p *Proxy) fail(c exchange, cl *call, err error) error {
	id := cl.id
	var we *wire.Error
	status := http.StatusOK
	if !errors.As(err, &we) {
		re := toRPC(err)
		if re.Code == CodeInternal {
			p.Logger.ErrorContext(c.Context(), "meter request failed", "trace_id", cl.trace.traceID, "err", err)
		}
		we = &wire.Error{Code: re.Code, Message: re.Message}
		status = re.Status
	}
	if cl.req != nil && cl.req.Version == wire.V03 {
		we = wire.TranslateError(wire.V10, wire.V03, we)
	}
	out := wire.ErrorResponse(id, we)
	version := cl.restVersion
	if cl.req != nil && cl.req.Version != "" {
		version = cl.req.Version
	}
	contentType := answerType(c, version)
	if cl.restVersion != "" {
		status, out = cl.restError(version, we)
	} else if cl.req != nil && cl.req.Method.Streaming() {
		// Streaming methods answer an event stream, errors included.
		out, contentType, status = sseData(out), "text/event-stream", http.StatusOK
	}
	cl.errCode = we.Code
	cl.bytesOut = len(out)
	if cl.target != nil && cl.contract != nil {
		p.finish(c.Context(), cl, p.Clock.Now().Sub(cl.start))
	} else if p.Metrics != nil {
		p.Metrics.observe(cl, 0)
	}
	return c.Answer(status, contentType, out)
}

// sentBody is a request body that lets go of its bytes once they are
// read: the transport keeps the request for as long as the response runs,
// which for a stream is as long as the stream is held.
type sentBody struct{ b []byte }

func (s *sentBody) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		s.b = nil
		return 0, io.EOF
	}
	n := copy(p, s.b)
	s.b = s.b[n:]
	if len(s.b) == 0 {
		s.b = nil
	}
	return n, nil
}
