package a2aproxy

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/metering"
)

// Rate limits and session caps (docs/limits.md).
//
// A call is admitted under the rate limits of its API key, its
// subscription, its org and its listing (the seller's, over every buyer)
// at once, or refused (CodeRateLimited; HTTP 429 with Retry-After on
// HTTP+JSON). Each rate is a bucket that holds the limit and refills
// continuously over its window (a generic cell rate algorithm, GCRA):
// requests per second and per minute (a call takes one from each), and
// tokens per minute, taken out when the call ends by the tokens its usage
// row says it used (a call is admitted while the bucket is not empty);
// besides, a cap on the calls in flight. The answers of limited calls carry what is left in
// RateLimit-Policy and RateLimit headers (the IETF httpapi draft).
//
// A subscription's session caps bound each conversation (contextId): its
// sends and what they cost. A send in a context past a cap is refused
// (CodeSessionCapped); other contexts, and task operations in that one,
// go on.
//
// With SharedRates (Redis) every meter of a deployment takes the same
// counts, one script per check, so a limit holds across them. While Redis
// fails, and without it, each meter applies the configured limits in its
// own memory (so N meters without Redis admit up to N times a limit):
// never no limit, never refusing everything.

// SharedRates holds rate limits and session caps for every meter of a
// deployment (contracts/redis). Holders are named by ids ("k:key_1"); a
// holder's limits are four numbers in limits (per second, per minute,
// tokens per minute, in flight; 0: none), in the order of ids.
type SharedRates interface {
	// TakeRates admits the call callID under every limit at once, or
	// under none: refused is -1 when it admitted (left then holds, per
	// limit, what is left after it, -1 where there is no limit), else
	// the index in limits of the first limit that refused it, and wait
	// how long until that limit would admit a call. The call counts in
	// flight until DoneRates, or lease.
	TakeRates(ctx context.Context, callID string, ids []string, limits []int64, lease time.Duration) (refused int, wait time.Duration, left []int64, err error)
	// DoneRates ends callID: it no longer counts in flight, and tokens
	// are taken out of every bucket of tokens per minute.
	DoneRates(ctx context.Context, callID string, ids []string, limits []int64, tokens int64) error
	// TakeSession checks the session id under its caps (0: none): refused
	// is -1 when it is within them (and, when count, one more send is
	// counted), 0 when its calls reached maxCalls, 1 when what it cost
	// reached maxMicros; calls and micros are its counts.
	TakeSession(ctx context.Context, id string, maxCalls, maxMicros int64, count bool) (refused int, calls, micros int64, err error)
	// AddSession adds to the session id's counts.
	AddSession(ctx context.Context, id string, calls, micros int64) error
}

// inFlightLease bounds how long a call counts in flight in the shared
// state when its meter never ends it (killed mid-call).
const inFlightLease = 15 * time.Minute

// limit is the chain's stage of rate limits and session caps.
type limit struct {
	rates *rateKeeper
	// owners names the context of a send that continues a task without
	// naming its context.
	owners *ownerIndex
}

// rateKeeper holds the limits: in the shared state when there is one
// and it answers, else in this meter's memory.
type rateKeeper struct {
	local   *localRates
	shared  SharedRates // nil: local only
	clock   agentmarket.Clock
	base    context.Context
	metrics *Metrics
	logger  *slog.Logger
}

// rateHold is what an admitted limited call must give back when it ends.
type rateHold struct {
	callID string
	// ids are the holders limiting the call, limits their four limits
	// each, which their places in holderNames (on the arrays below).
	ids      []string
	limits   []int64
	which    [4]int
	idBuf    [4]string
	limitBuf [16]int64
	shared   bool // taken in the shared state
	// session is the conversation's id when the subscription caps
	// sessions; counted, whether this call was counted in it on admission.
	session string
	counted bool
}

// holders of a call's rate limits, in the order of rateHold.ids.
var holderNames = [...]string{"key", "subscription", "org", "listing"}

func (l limit) serve(cl *call, next handler) error {
	caps := cl.contract.SessionCaps
	if cl.actor.KeyRateLimits.IsZero() && cl.contract.RateLimits.IsZero() && cl.actor.OrgRateLimits.IsZero() &&
		cl.target.Limits.Rate.IsZero() && caps.IsZero() {
		return next(cl) // nothing configured: nothing taken
	}
	h := &rateHold{callID: cl.trace.spanID}
	if err := l.rates.takeSession(cl, h, caps, l.owners); err != nil {
		return err
	}
	if err := l.rates.take(cl, h); err != nil {
		if h.counted {
			l.rates.uncount(cl.x.Context(), h.session)
		}
		return err
	}
	cl.rate = h
	return next(cl)
}

// take admits cl under its rate limits, or refuses it.
func (k *rateKeeper) take(cl *call, h *rateHold) error {
	all := [4]agentmarket.RateLimits{cl.actor.KeyRateLimits, cl.contract.RateLimits, cl.actor.OrgRateLimits, cl.target.Limits.Rate}
	n := 0
	for i, l := range all {
		if l.IsZero() {
			continue
		}
		switch i {
		case 0:
			h.idBuf[n] = "k:" + cl.actor.KeyID
		case 1:
			h.idBuf[n] = "s:" + cl.contract.ID
		case 2:
			h.idBuf[n] = "o:" + cl.actor.OrgID
		case 3:
			h.idBuf[n] = "l:" + cl.target.ListingID
		}
		h.limitBuf[4*n], h.limitBuf[4*n+1], h.limitBuf[4*n+2], h.limitBuf[4*n+3] = l.RequestsPerSecond, l.RequestsPerMinute, l.TokensPerMinute, l.MaxInFlight
		h.which[n] = i
		n++
	}
	if n == 0 {
		return nil
	}
	h.ids, h.limits = h.idBuf[:n], h.limitBuf[:4*n]
	ctx := cl.x.Context()
	refused, wait, left, err := -1, time.Duration(0), []int64(nil), error(nil)
	if k.shared != nil {
		refused, wait, left, err = k.shared.TakeRates(ctx, h.callID, h.ids, h.limits, inFlightLease)
		if err == nil {
			h.shared = true
		} else {
			k.metrics.SharedFallback("rates")
			k.logger.DebugContext(ctx, "rate limits taken in this meter's memory: the shared state did not answer", "err", err)
		}
	}
	if !h.shared {
		refused, wait, left, _ = k.local.TakeRates(ctx, h.callID, h.ids, h.limits, inFlightLease)
	}
	if refused >= 0 {
		holder, kind := holderNames[h.which[refused/4]], refused%4
		secs := max(int64(math.Ceil(wait.Seconds())), 1)
		cl.x = headed{cl.x, []string{"Retry-After", strconv.FormatInt(secs, 10)}}
		return rpcErr(CodeRateLimited, http.StatusOK, fmt.Sprintf("the %s's limit of %d %s is reached: retry in %d s",
			holder, h.limits[refused], limitUnits[kind], secs))
	}
	policy, remaining := rateHeaders(h, left)
	cl.x = headed{cl.x, []string{"RateLimit-Policy", policy, "RateLimit", remaining}}
	return nil
}

var limitUnits = [4]string{"requests a second", "requests a minute", "tokens a minute", "calls in flight"}

// policyNames name each limit in the headers, by holder and kind
// ("key-rpm"), quoted as the headers' items are.
var policyNames = func() (n [4][4]string) {
	for i, h := range holderNames {
		for k, kind := range [4]string{"rps", "rpm", "tpm", "inflight"} {
			n[i][k] = strconv.Quote(h + "-" + kind)
		}
	}
	return n
}()

// policyParams are what RateLimit-Policy says of each kind of limit
// besides its quota: its window in seconds, its unit.
var policyParams = [4]string{";w=1", ";w=60", `;w=60;qu="tokens"`, `;qu="concurrent-requests"`}

// rateHeaders are the RateLimit-Policy and RateLimit of h's limits after
// this call, one item per limit: q its quota, w its window; r what is left
// (left), t the seconds until the bucket is full again.
func rateHeaders(h *rateHold, left []int64) (policy, remaining string) {
	p, r := make([]byte, 0, 64*len(h.ids)), make([]byte, 0, 48*len(h.ids))
	for i, lim := range h.limits {
		if lim <= 0 {
			continue
		}
		if len(p) > 0 {
			p, r = append(p, ", "...), append(r, ", "...)
		}
		name, k := policyNames[h.which[i/4]][i%4], i%4
		p = append(strconv.AppendInt(append(append(p, name...), ";q="...), lim, 10), policyParams[k]...)
		rem := max(left[i], 0)
		var t int64
		if k < 3 {
			t = ((lim-rem)*windows[k] + lim*1000 - 1) / (lim * 1000)
		}
		r = strconv.AppendInt(append(strconv.AppendInt(append(append(r, name...), ";r="...), rem, 10), ";t="...), t, 10)
	}
	return string(p), string(r)
}

// takeSession refuses a send in a context past its subscription's caps,
// and counts it in its context.
func (k *rateKeeper) takeSession(cl *call, h *rateHold, caps contracts.SessionCaps, owners *ownerIndex) error {
	if caps.IsZero() || cl.req == nil {
		return nil
	}
	if m := cl.req.Method; m != wire.MethodSend && m != wire.MethodStream {
		return nil // reading or canceling a task of a capped context goes on
	}
	h.session = "s:" + cl.contract.ID + "|"
	ctxID := cl.req.ContextID()
	if id := cl.req.TaskID(); ctxID == "" && id != "" && owners != nil {
		// A send that continues a task is in the task's context, named
		// or not: ownership found the task the caller's, and left its
		// binding in the index.
		if b := owners.Peek(cl.target.ListingID, id); b != nil {
			ctxID = b.ContextID
		}
	}
	if ctxID == "" {
		return nil // a new conversation: counted when it ends, under the context the agent gave it
	}
	h.session += ctxID
	refused, calls, micros, err := k.sessions(cl.x.Context()).TakeSession(cl.x.Context(), h.session, caps.MaxCalls, caps.MaxMicros, true)
	if err != nil {
		k.metrics.SharedFallback("session")
		refused, calls, micros, _ = k.local.TakeSession(cl.x.Context(), h.session, caps.MaxCalls, caps.MaxMicros, true)
	}
	switch refused {
	case 0:
		return rpcErr(CodeSessionCapped, http.StatusOK, fmt.Sprintf(
			"context %q reached its subscription's cap of %d calls; start a new context", ctxID, caps.MaxCalls))
	case 1:
		return rpcErr(CodeSessionCapped, http.StatusOK, fmt.Sprintf(
			"context %q reached its subscription's cap of %d micros (it cost %d); start a new context", ctxID, caps.MaxMicros, micros))
	}
	_ = calls
	h.counted = true
	return nil
}

// uncount takes back a send counted in its session that a rate limit
// refused.
func (k *rateKeeper) uncount(ctx context.Context, session string) {
	if err := k.sessions(ctx).AddSession(ctx, session, -1, 0); err != nil {
		_ = k.local.AddSession(ctx, session, -1, 0)
	}
}

// sessions is where sessions are counted now.
func (k *rateKeeper) sessions(context.Context) SharedRates {
	if k.shared != nil {
		return k.shared
	}
	return k.local
}

// done gives back what cl took: its place in flight, the tokens its usage
// row says it used, its cost in its session.
func (k *rateKeeper) done(cl *call, u *metering.Usage) {
	h := cl.rate
	cl.rate = nil // once
	if len(h.ids) > 0 {
		tokens := u.InputTokens + u.OutputTokens
		if u.Pending != nil {
			// Not billed on the call path: what the task reported or was
			// estimated in all, which errs on the side of stopping early.
			tokens = cl.seen.InputTokens + cl.seen.OutputTokens
		}
		var err error
		if h.shared {
			if err = k.shared.DoneRates(k.base, h.callID, h.ids, h.limits, tokens); err != nil {
				k.metrics.SharedFallback("rates")
			}
		}
		if !h.shared || err != nil {
			_ = k.local.DoneRates(k.base, h.callID, h.ids, h.limits, tokens)
		}
	}
	if h.session == "" {
		return
	}
	var calls int64
	if !h.counted {
		if u.ContextID == "" || u.ErrorCode != 0 {
			return // no conversation to count it in
		}
		h.session += u.ContextID
		calls = 1
	}
	cost := settledCost(cl, u)
	if calls == 0 && cost == 0 {
		return
	}
	if err := k.sessions(k.base).AddSession(k.base, h.session, calls, cost); err != nil {
		k.metrics.SharedFallback("session")
		_ = k.local.AddSession(k.base, h.session, calls, cost)
	}
}

// headed is an exchange whose answers carry more headers (name, value
// pairs) than the pipeline gives them.
type headed struct {
	exchange
	header []string
}

func (x headed) Answer(status int, contentType string, body []byte, header ...string) error {
	return x.exchange.Answer(status, contentType, body, append(header, x.header...)...)
}

func (x headed) Stream(write func(w *bufio.Writer), header ...string) error {
	return x.exchange.Stream(write, append(header, x.header...)...)
}
