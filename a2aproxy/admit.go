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

// admit runs every check before a request may go upstream: key, envelope,
// listing, contract, entitlement, task ownership.
func (p *Proxy) admit(ctx context.Context, c exchange, cl *call, body []byte, parse func() (*wire.Request, *wire.Error)) error {
	if err := p.RecordingErr(); err != nil {
		// A call that cannot be billed is not forwarded.
		return rpcErr(CodeMeterUnavailable, http.StatusServiceUnavailable, "the meter cannot record usage right now, so it forwards no calls; try another meter or again shortly")
	}
	if err := p.awaitProjections(ctx); err != nil {
		return err
	}
	secret, ok := bearer(c.Header("Authorization"))
	if !ok {
		return rpcErr(CodeUnauthorized, http.StatusUnauthorized, "send your AgentMarket API key as: Authorization: Bearer amk_…")
	}
	actor, err := p.actors.get(contracts.HashKey(secret), func() (agentmarket.Actor, error) { return p.Auth.Authenticate(ctx, secret) },
		func(err error) bool { return agentmarket.KindOf(err) == agentmarket.Unauthorized })
	if err != nil {
		return err
	}
	cl.actor = actor
	t, err := p.target(ctx, cl.listingID)
	if err != nil {
		return err
	}
	cl.target = t
	cl.lim = p.Limits.with(t.Limits)
	ct, err := p.openContract(ctx, actor.OrgID, t.ListingID)
	if err != nil {
		if isNotFound(err) {
			return rpcErr(CodeNotEntitled, http.StatusForbidden, fmt.Sprintf("your organisation has no active subscription to listing %q", t.ListingID))
		}
		return err
	}
	if !ct.Status.Invocable() {
		return rpcErr(CodeNotEntitled, http.StatusForbidden, fmt.Sprintf("your subscription to listing %q is %s", t.ListingID, ct.Status))
	}
	if err := p.mayInvoke(actor.OrgID, t.ListingID); err != nil {
		return err
	}
	cl.contract = ct
	cl.lim = cl.lim.withBudgets(ct.Budgets)
	// From here the call is attributable: every refusal below is metered.
	if len(body) > cl.lim.MaxRequestBytes {
		return rpcErr(CodeRequestTooLarge, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request is %d bytes; the limit is %d", len(body), cl.lim.MaxRequestBytes))
	}
	req, werr := parse()
	if werr != nil {
		return werr
	}
	cl.id = req.ID
	cl.req = req
	if req.Method.Push() && !p.pushSupported(cl) {
		// The proxied card says pushNotifications: false.
		return wire.PushNotificationNotSupported("this agent does not offer push notifications through the AgentMarket meter")
	}
	if body, cfg := wire.InlinePush(req); cfg != nil {
		if err := p.takeInlinePush(ctx, cl, body, cfg); err != nil {
			return err
		}
	}
	if err := p.checkBudgets(ctx, cl); err != nil {
		return err
	}
	plan, err := p.plan(ctx, t.ListingID, ct.PlanVersion)
	if err != nil {
		return err
	}
	cl.plan = plan
	if err := p.chooseInterface(cl); err != nil {
		return err
	}
	return p.checkOwner(ctx, cl)
}

// lastSpendGrace is how old the last spend read for a budget may be and
// still stand in when the usage store cannot answer. Past it, budgets fail
// closed: a call under a budget is refused (CodeBudgetUnchecked) until the
// spend can be read again, so a budget is never overshot by more than
// what a minute of calls costs. Calls without a budget go on (their usage
// is spooled).
const lastSpendGrace = time.Minute

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
// does (BENCHMARKS.md, "Where issue 12 stands").
func (p *Proxy) awaitProjections(ctx context.Context) error {
	if p.Unsettled == nil {
		return nil
	}
	lag, soft := p.Unsettled(), p.Limits.MaxUnsettled/2
	if lag <= soft {
		return nil
	}
	if lag <= p.Limits.MaxUnsettled {
		p.Metrics.paced()
		t := time.NewTimer(time.Duration(float64(maxPace) * float64(lag-soft) / float64(p.Limits.MaxUnsettled-soft)))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return nil
	}
	p.Metrics.heldBack()
	wait, cancel := context.WithTimeout(ctx, p.Limits.UnsettledWait)
	defer cancel()
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for p.Unsettled() > p.Limits.MaxUnsettled {
		select {
		case <-wait.Done():
			return rpcErr(CodeMeterBusy, http.StatusServiceUnavailable,
				fmt.Sprintf("the meter is busy catching up with the usage it recorded (more than %d rows wait); retry shortly or use another meter", p.Limits.MaxUnsettled))
		case <-t.C:
		}
	}
	return nil
}

// RecordingErr is why the meter cannot record usage now, nil when it can
// (accounting.err). /readyz reports it; calls are refused meanwhile.
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

// checkBudgets refuses calls once the key's or the contract's monthly
// budget is spent. Spend is read from the usage store (cached briefly), so
// a burst of concurrent calls can overshoot a budget by what they cost.
func (p *Proxy) checkBudgets(ctx context.Context, cl *call) error {
	if p.Spend == nil {
		return nil
	}
	now := p.Clock.Now()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	check := func(budget *int64, keyID, contractID, what string) error {
		if budget == nil {
			return nil
		}
		key := keyID + "|" + contractID + "|" + month.Format("2006-01")
		spent, err := p.spent.get(key, func() (int64, error) { return p.Spend.Spent(ctx, keyID, contractID, month) },
			func(error) bool { return false })
		if err != nil {
			last, at, ok := p.spent.last(key)
			if !ok || now.Sub(at) > lastSpendGrace {
				p.Logger.WarnContext(ctx, "call refused: its budget cannot be checked, the usage store is unavailable",
					"trace_id", cl.trace.traceID, "budget_of", what, "err", err)
				return rpcErr(CodeBudgetUnchecked, http.StatusOK, fmt.Sprintf("the %s's monthly budget cannot be checked right now (spend is unavailable); retry shortly", what))
			}
			spent = last
		}
		if spent >= *budget {
			return rpcErr(CodeBudgetExhausted, http.StatusOK, fmt.Sprintf("the %s's monthly budget of %d micros is spent (%d micros this month)", what, *budget, spent))
		}
		return nil
	}
	if err := check(cl.actor.KeyBudgetMicros, cl.actor.KeyID, "", "API key"); err != nil {
		return err
	}
	return check(cl.contract.MonthlyBudgetMicros, "", cl.contract.ID, "subscription")
}

// chooseInterface picks the agent's JSON-RPC interface in the buyer's
// version, else its preferred JSON-RPC interface of another version (the
// request and its answers are then translated).
func (p *Proxy) chooseInterface(cl *call) error {
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

// checkOwner answers TaskNotFound for any task operation on a task the
// buyer's org did not create through the meter, exactly as for a task
// that does not exist.
func (p *Proxy) checkOwner(ctx context.Context, cl *call) error {
	// A message's references give the agent those tasks as context: each
	// must be the caller's own, as the task it continues.
	for _, ref := range cl.req.ReferenceTaskIDs() {
		b, err := p.owners.Lookup(ctx, cl.target.ListingID, ref)
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
	b, err := p.owners.Lookup(ctx, cl.target.ListingID, id)
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
