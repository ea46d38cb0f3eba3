package a2aproxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings/agentcard"
)

// The stages of the chain (chain.go), in order, and what each keeps.

// gate refuses calls the meter could not bill and keeps the meter's pace
// to what its projections take.
type gate struct {
	acct *accounting
	// unsettled, limits and metrics: awaitProjections.
	unsettled func() int
	limits    *Limits
	metrics   *Metrics
}

func (g gate) serve(cl *call, next handler) error {
	if err := g.acct.err(); err != nil {
		// A call that cannot be billed is not forwarded.
		return rpcErr(CodeMeterUnavailable, http.StatusServiceUnavailable, "the meter cannot record usage right now, so it forwards no calls; try another meter or again shortly")
	}
	if err := g.awaitProjections(cl.x.Context()); err != nil {
		return err
	}
	return next(cl)
}

// authenticate turns the bearer key into the caller (cached).
type authenticate struct {
	auth   Authenticator
	actors *ttlCache[agentmarket.Actor]
}

func (a authenticate) serve(cl *call, next handler) error {
	secret, ok := bearer(cl.x.Header("Authorization"))
	if !ok {
		return rpcErr(CodeUnauthorized, http.StatusUnauthorized, "send your AgentMarket API key as: Authorization: Bearer amk_…")
	}
	ctx := cl.x.Context()
	actor, err := a.actors.get(contracts.HashKey(secret), func() (agentmarket.Actor, error) { return a.auth.Authenticate(ctx, secret) },
		func(err error) bool { return agentmarket.KindOf(err) == agentmarket.Unauthorized })
	if err != nil {
		return err
	}
	cl.actor = actor
	return next(cl)
}

// entitle finds the listing and the caller's open contract for it, and
// asks casbin whether the caller's org may invoke it. From here the call
// is attributable: every refusal after it is metered.
type entitle struct {
	p *Proxy // its listing, contract and grant caches, which background calls share
}

func (e entitle) serve(cl *call, next handler) error {
	p, ctx := e.p, cl.x.Context()
	t, err := p.target(ctx, cl.listingID)
	if err != nil {
		return err
	}
	cl.target = t
	cl.lim = p.Limits.with(t.Limits)
	ct, err := p.openContract(ctx, cl.actor.OrgID, t.ListingID)
	if err != nil {
		if isNotFound(err) {
			return rpcErr(CodeNotEntitled, http.StatusForbidden, fmt.Sprintf("your organisation has no active subscription to listing %q", t.ListingID))
		}
		return err
	}
	if !ct.Status.Invocable() {
		return rpcErr(CodeNotEntitled, http.StatusForbidden, fmt.Sprintf("your subscription to listing %q is %s", t.ListingID, ct.Status))
	}
	if err := p.mayInvoke(cl.actor.OrgID, t.ListingID); err != nil {
		return err
	}
	cl.contract = ct
	cl.lim = cl.lim.withBudgets(ct.Budgets)
	return next(cl)
}

// decode bounds the body and reads the request by the reading rule (in
// the buyer's binding: the handler's parse), and what it asks of push.
type decode struct {
	p *Proxy // push support and inline configs (push.go, push_inline.go)
}

func (d decode) serve(cl *call, next handler) error {
	if len(cl.body) > cl.lim.MaxRequestBytes {
		return rpcErr(CodeRequestTooLarge, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request is %d bytes; the limit is %d", len(cl.body), cl.lim.MaxRequestBytes))
	}
	req, werr := cl.parse()
	if werr != nil {
		return werr
	}
	cl.id = req.ID
	cl.req = req
	if req.Method.Push() && !d.p.pushSupported(cl) {
		// The proxied card says pushNotifications: false.
		return wire.PushNotificationNotSupported("this agent does not offer push notifications through the AgentMarket meter")
	}
	if body, cfg := wire.InlinePush(req); cfg != nil {
		if err := d.p.takeInlinePush(cl.x.Context(), cl, body, cfg); err != nil {
			return err
		}
	}
	return next(cl)
}

// route takes the contract's frozen plan and picks the agent's interface.
type route struct {
	p *Proxy // its plan cache, which background calls share
}

func (r route) serve(cl *call, next handler) error {
	plan, err := r.p.plan(cl.x.Context(), cl.target.ListingID, cl.contract.PlanVersion)
	if err != nil {
		return err
	}
	cl.plan = plan
	if err := chooseInterface(cl); err != nil {
		return err
	}
	return next(cl)
}

// ownership answers TaskNotFound for a task the caller's org does not own.
type ownership struct {
	owners *ownerIndex
}

func (o ownership) serve(cl *call, next handler) error {
	if err := o.check(cl.x.Context(), cl); err != nil {
		return err
	}
	return next(cl)
}

// idempotency answers a send whose messageId the org sent before from the
// first send (idem.go).
type idempotency struct {
	p *Proxy // the sent index, its lookups and writes, the replay (idem.go)
}

func (i idempotency) serve(cl *call, next handler) error {
	replied, err := i.p.idempotent(cl.x, cl)
	if err != nil || replied {
		return err
	}
	return next(cl)
}

// maxPace is the delay of a call while the projections lag by
// MaxUnsettled rows (awaitProjections).
const maxPace = 10 * time.Millisecond

// awaitProjections keeps the meter's pace to what its database takes.
// While more than half of MaxUnsettled spooled rows wait for their
// projections, each call is paced: delayed in proportion to the lag past
// that half, up to maxPace at MaxUnsettled, so that under load the calls
// slow together and the lag settles below the limit. Past MaxUnsettled
// (a database that does not keep up even so) a call is held back until
// the lag falls, for UnsettledWait at most. Holding alone (at the limit,
// every call waited while a batch of usage was stored, the rest none)
// left the worst calls of a saturated meter 4 times slower than pacing
// does (measured on 2 December 2026; BENCHMARKS.md in git history).
func (g gate) awaitProjections(ctx context.Context) error {
	if g.unsettled == nil {
		return nil
	}
	lag, soft := g.unsettled(), g.limits.MaxUnsettled/2
	if lag <= soft {
		return nil
	}
	if lag <= g.limits.MaxUnsettled {
		g.metrics.paced()
		t := time.NewTimer(time.Duration(float64(maxPace) * float64(lag-soft) / float64(g.limits.MaxUnsettled-soft)))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return nil
	}
	g.metrics.heldBack()
	wait, cancel := context.WithTimeout(ctx, g.limits.UnsettledWait)
	defer cancel()
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for g.unsettled() > g.limits.MaxUnsettled {
		select {
		case <-wait.Done():
			return rpcErr(CodeMeterBusy, http.StatusServiceUnavailable,
				fmt.Sprintf("the meter is busy catching up with the usage it recorded (more than %d rows wait); retry shortly or use another meter", g.limits.MaxUnsettled))
		case <-t.C:
		}
	}
	return nil
}

// RecordingErr is why the meter cannot record usage now, nil when it can
// (accounting.err). /readyz reports it; calls are refused meanwhile (gate).
func (p *Proxy) RecordingErr() error { return p.acct.err() }

// errNotEntitled is casbin's refusal, kept out of the entitlement cache.
var errNotEntitled = errors.New("not entitled")

// mayInvoke is casbin's invoke check for an org and a listing. A grant is
// cached for CacheTTL (casbin's evaluation costs more than the rest of a
// call's checks together); a refusal is not, so a buyer who just
// subscribed is not kept waiting. A revoked right thus takes at most the
// policy reload interval plus CacheTTL to reach every meter.
func (p *Proxy) mayInvoke(orgID, listingID string) error {
	_, err := p.grants.get(orgID+"|"+listingID, func() (bool, error) {
		ok, err := p.Entitlements.Allowed(contracts.OrgSubject(orgID), "*", contracts.ListingObject(listingID), contracts.ActInvoke)
		if err == nil && !ok {
			err = errNotEntitled
		}
		return ok, err
	}, func(error) bool { return false })
	if errors.Is(err, errNotEntitled) {
		return rpcErr(CodeNotEntitled, http.StatusForbidden, fmt.Sprintf("your organisation may not invoke listing %q", listingID))
	}
	return err
}

// chooseInterface picks the agent's JSON-RPC interface in the buyer's
// version, else its preferred JSON-RPC interface of another version (the
// request and its answers are then translated).
func chooseInterface(cl *call) error {
	supported := func(i agentcard.Interface) bool {
		return (i.Binding == agentcard.BindingJSONRPC || i.Binding == agentcard.BindingHTTPJSON) &&
			(i.ProtocolVersion == string(wire.V03) || i.ProtocolVersion == string(wire.V10))
	}
	// The card's order is the seller's preference; among those, the
	// buyer's own version spares a translation.
	for _, i := range cl.target.Card.Interfaces {
		if supported(i) && wire.Version(i.ProtocolVersion) == cl.req.Version {
			cl.iface, cl.upVersion = i, cl.req.Version
			return nil
		}
	}
	for _, i := range cl.target.Card.Interfaces {
		if supported(i) {
			cl.iface, cl.upVersion = i, wire.Version(i.ProtocolVersion)
			return nil
		}
	}
	return wire.UnsupportedOperation("this agent offers no JSON-RPC or HTTP+JSON interface of A2A 0.3 or 1.0 that the meter can reach")
}

// check answers TaskNotFound for any task operation on a task the
// buyer's org did not create through the meter, exactly as for a task
// that does not exist.
func (o ownership) check(ctx context.Context, cl *call) error {
	// A message's references give the agent those tasks as context: each
	// must be the caller's own, as the task it continues.
	for _, ref := range cl.req.ReferenceTaskIDs() {
		b, err := o.owners.Lookup(ctx, cl.target.ListingID, ref)
		if err != nil && !isNotFound(err) {
			return err
		}
		if err != nil || !mayRelay(b, cl.actor.OrgID) {
			return wire.TaskNotFound(ref)
		}
	}
	id := cl.req.TaskID()
	if id == "" {
		return nil
	}
	b, err := o.owners.Lookup(ctx, cl.target.ListingID, id)
	if err != nil {
		if isNotFound(err) {
			if cl.req.Method.TaskScoped() || cl.req.Method == wire.MethodSend || cl.req.Method == wire.MethodStream {
				return wire.TaskNotFound(id)
			}
			return nil
		}
		return err
	}
	if !mayRelay(b, cl.actor.OrgID) {
		return wire.TaskNotFound(id)
	}
	cl.obs.taskID, cl.obs.bound = id, true // already bound: no need to bind it again
	return nil
}

// mayRelay reports whether the bound task b may reach org: its owner's,
// and not a task id the agent reused for another org (the agent then
// holds both orgs' data under it, so it goes to no one).
func mayRelay(b *contracts.TaskBinding, org string) bool {
	return b.OrgID == org && b.ReusedAt == nil
}

func bearer(h string) (string, bool) {
	scheme, secret, ok := strings.Cut(h, " ")
	secret = strings.TrimSpace(secret)
	return secret, ok && strings.EqualFold(scheme, "Bearer") && secret != ""
}
