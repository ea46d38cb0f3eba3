package a2aproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/metering"
)

// Fallback to another agent (issue 26, item 4). A buyer may name, per
// subscription, fallback listings among those its org also subscribes to
// (contracts.Contract.Fallbacks, in order). A call that starts new work (a
// send or a stream naming no task) whose listing could not take it, for
// exactly the reasons the meter retries on another endpoint (balance.go:
// every endpoint ejected, a connection refused or a TLS failure before the
// request was written, an HTTP 502 or 503 naming no task), goes to the
// first fallback that takes it. Nothing else falls back: not a refusal of
// the meter's own (a budget, a rate limit, a kill switch of the primary),
// not an answer that named a task, not a stream that began, not a call on
// an existing task.
//
// The fallback is called as if the buyer had called it: the call runs the
// chain again from entitle for the fallback listing (its casbin grant, the
// org's contract to it, its plan, kill switches, limits, budgets, credit,
// idempotency), so nothing is bypassed; one the fallback's admission
// refuses is metered on that contract, as any refusal, and the next
// fallback is tried. The primary's refused attempt keeps its own usage row
// (its error code, no cost), the method named "to-fallback:<method>"; the
// work is the fallback's row: its listing, contract, plan and price. Its
// task is bound to the fallback listing, so that later calls on it made
// through the primary's endpoint (GetTask, cancel, resubscribe, replies)
// go to the fallback. Fallbacks are one hop: a fallback's own fallbacks are
// never followed.
//
// Every answer to a call under a subscription with fallbacks names the
// listing that served it in ServedByHeader; a whole answer a fallback
// served also says so in the usage extension's object of the Task or
// Message it carries (servedBy: wire.SetServedBy). A stream's events go
// as the agent sent them. A subscription without fallbacks costs one
// length test here.

// ServedByHeader names the listing whose agent answered, on the answer of
// every call under a subscription with fallbacks.
const ServedByHeader = "AgentMarket-Served-By"

// fallback is the chain's stage that sends a new task to a fallback
// listing when the subscription's own cannot take it, and a call on a
// task a fallback holds to that fallback.
type fallback struct {
	p *Proxy
}

func (f fallback) serve(cl *call, next handler) error {
	fbs := cl.contract.Fallbacks
	if len(fbs) == 0 || cl.req == nil {
		return next(cl)
	}
	id := cl.req.TaskID()
	if id != "" {
		if l := f.p.fallbackHolding(cl.x.Context(), cl, id); l != "" {
			f.p.serveFallback(cl, l, true)
			return nil
		}
	}
	if id != "" || cl.req.Method != wire.MethodSend && cl.req.Method != wire.MethodStream {
		// The listing's own call: its answer names it.
		cl.x = &heldExchange{exchange: cl.x, servedBy: cl.target.ListingID, pass: true}
		return next(cl)
	}
	if l := f.p.fallbackSent(cl); l != "" {
		// A retry of a send a fallback served: answered there (idem.go),
		// not made again at the primary.
		f.p.serveFallback(cl, l, true)
		return nil
	}
	h := &heldExchange{exchange: cl.x, servedBy: cl.target.ListingID}
	cl.x, cl.mayFallBack = h, true
	if err := next(cl); err != nil {
		h.pass = true // a stage's refusal: serve answers it, through h
		return err
	}
	if !h.held || !cl.notTaken {
		return h.release()
	}
	for _, l := range fbs {
		if l == cl.target.ListingID {
			continue
		}
		if served := f.p.serveFallback(cl, l, false); served {
			return nil
		}
	}
	return h.release()
}

// serveFallback runs cl's request through the chain for listing l: for a
// call on a task l holds (direct), answered whatever becomes of it; for a
// new task, held back and reported not served when l too could not take
// it (or refused it), so that the next fallback is tried.
func (p *Proxy) serveFallback(cl *call, l string, direct bool) bool {
	fc := &call{start: p.Clock.Now(), trace: cl.trace, listingID: l, actor: cl.actor, bytesIn: cl.bytesIn,
		body: cl.body, parse: cl.parse, restVersion: cl.restVersion, fallbackFor: cl.target.ListingID}
	fc.dialect.buyer = cl.dialect.buyer
	base := cl.x
	if h, ok := base.(*heldExchange); ok {
		base = h.exchange
	}
	h := &heldExchange{exchange: base, servedBy: l, mark: true}
	fc.x = h
	if direct {
		// The primary is never finished: its span is this call's.
		fc.span = cl.span
	} else {
		fc.mayFallBack = true
	}
	if err := p.fallbackChain(fc); err != nil {
		if fc.span != nil && (fc.target == nil || fc.contract == nil) {
			fc.span.end(fc, nil, refusalCode(err)) // fail meters (and ends) none
		}
		_ = p.fail(h, fc, err)
		if direct {
			_ = h.release()
		}
		return direct
	}
	if direct || !h.held || !fc.notTaken {
		if !direct {
			p.Metrics.fallback(cl.target.ListingID, l)
			p.fallbacks.Add(1)
			p.Logger.InfoContext(cl.x.Context(), "the listing's agent took nothing; a fallback served the call", "trace_id", cl.trace.traceID,
				"listing", cl.target.ListingID, "fallback", l)
		}
		_ = h.release()
		return true
	}
	return false
}

// fallbackHolding is the fallback listing that holds the task id a call
// names, "" when the subscription's own listing does (or none is known:
// ownership then answers as usual).
func (p *Proxy) fallbackHolding(ctx context.Context, cl *call, id string) string {
	fbs, own := cl.contract.Fallbacks, cl.target.ListingID
	if p.owners.Peek(own, id) != nil {
		return ""
	}
	for _, b := range p.owners.ByTask(id) {
		if b.ListingID != own && slices.Contains(fbs, b.ListingID) && mayRelay(b, cl.actor.OrgID) {
			return b.ListingID
		}
	}
	if _, err := p.owners.Known(ctx, own, id); err == nil {
		return ""
	}
	for _, l := range fbs {
		if b, err := p.owners.Known(ctx, l, id); err == nil && l != own && mayRelay(b, cl.actor.OrgID) {
			return l
		}
	}
	return ""
}

// fallbackSent is the fallback listing that this meter saw take the same
// message under the send's messageId within the idempotency window, ""
// when none did. Only this meter's own index is read: a retry through
// another meter goes to the primary (the one case where the work may be
// done twice, besides a fallback speaking another protocol version, whose
// message's digest differs).
func (p *Proxy) fallbackSent(cl *call) string {
	id := cl.req.MessageID()
	if p.Sent == nil || id == "" {
		return ""
	}
	var digest string
	now := p.Clock.Now()
	for _, l := range cl.contract.Fallbacks {
		e := p.sentIdx.get(contracts.SentKey{ListingID: l, OrgID: cl.actor.OrgID, MessageID: sentMessageKey(id)})
		if e == nil || e.replaceable(now) {
			continue
		}
		if digest == "" {
			out, err := outbound(cl)
			if err != nil {
				return ""
			}
			sum := out.MessageDigest()
			digest = hex.EncodeToString(sum[:])
		}
		if e.digest == digest {
			return l
		}
	}
	return ""
}

// fallbackTags is the cost tag of a call a fallback served in the stead
// of listing (metering.FallbackTag).
func fallbackTags(listing string) agentmarket.Tags {
	b, _ := json.Marshal(map[string]string{metering.FallbackTag: listing})
	return agentmarket.Tags(b)
}

// Fallbacks counts the calls a fallback listing served.
func (p *Proxy) Fallbacks() uint64 { return p.fallbacks.Load() }

// beforeWork reports whether a failed round trip shows the agent took
// nothing: its endpoint was ejected, or the connection never came up.
func beforeWork(err error) bool {
	var ej ejectedError
	return errors.As(err, &ej) || notAccepted(err)
}

// heldExchange holds a whole answer back until the fallback stage knows
// whether it goes to the buyer (pass: at once), naming the listing that
// served; a stream goes through at once (its agent took the work).
type heldExchange struct {
	exchange
	servedBy string
	// mark: a fallback served; the usage extension of the answer's Task or
	// Message says so too (wire.SetServedBy).
	mark        bool
	pass, held  bool
	status      int
	contentType string
	body        []byte
	header      []string
}

func (h *heldExchange) Answer(status int, contentType string, body []byte, header ...string) error {
	if h.pass {
		return h.exchange.Answer(status, contentType, body, append(slices.Clip(header), ServedByHeader, h.servedBy)...)
	}
	// Copied: the body may be the agent's pooled buffer (fastExchange).
	h.held, h.status, h.contentType, h.body, h.header = true, status, contentType, bytes.Clone(body), slices.Clone(header)
	return nil
}

func (h *heldExchange) Stream(write func(w *bufio.Writer), header ...string) error {
	return h.exchange.Stream(write, append(slices.Clip(header), ServedByHeader, h.servedBy)...)
}

// release sends the answer held.
func (h *heldExchange) release() error {
	h.pass = true
	if !h.held {
		return nil
	}
	h.held = false
	if h.mark && !strings.HasPrefix(h.contentType, "text/event-stream") {
		h.body, _ = wire.SetServedBy(h.body, h.servedBy)
	}
	return h.exchange.Answer(h.status, h.contentType, h.body, append(h.header, ServedByHeader, h.servedBy)...)
}
