package a2aproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/agentcard"
	"github.com/agentmarket/agentmarket/metering"
)

// Limits of the meter; zero fields take the defaults.
type Limits struct {
	RequestTimeout    time.Duration // non-streaming calls; default 30s
	StreamIdleTimeout time.Duration // longest silence of a stream; default 120s
	Heartbeat         time.Duration // SSE comment sent to the buyer when idle; default 15s
	MaxRequestBytes   int           // default 1 MiB
	MaxResultBytes    int           // default 256 KiB
	SettleTimeout     time.Duration // how long a task is polled after its buyer left; default 10m
	SettleInterval    time.Duration // poll interval while settling; default 1s
	CacheTTL          time.Duration // how long keys, listings and contracts are cached; default 2s
	// TaskTimeout is the end-to-end budget of a task (0: none): the meter
	// cancels a task at the agent this long after it began.
	TaskTimeout time.Duration
	// MaxPause is the longest a task may stay in input-required or
	// auth-required before the meter cancels it; default 24h.
	MaxPause time.Duration
	// EventRetention is how long the events of ended tasks are kept;
	// default 90 days.
	EventRetention time.Duration
	// OwnerIndexSize is how many task bindings the meter keeps in memory
	// (a binding not held is read from the database); default 200,000.
	OwnerIndexSize int
	// OwnerMissWait is how long a lookup of a task neither this meter nor
	// the database knows waits for another meter's projection before it
	// answers TaskNotFound; default 1s.
	OwnerMissWait time.Duration
	// MaxUnsettled is how many spooled rows may wait for their projections
	// (bindings, ledger) before the meter holds new calls back (up to
	// UnsettledWait, then -32058); default 2,000. It keeps the projections
	// within a fraction of a second of the calls, so that another meter
	// finds a new task within OwnerMissWait, and the spool from growing
	// without bound when calls come faster than the database takes them.
	MaxUnsettled int
	// UnsettledWait is how long a call waits for the projections to catch
	// up before it is refused; default 2s.
	UnsettledWait time.Duration
	// IdempotencyWindow is how long a send's messageId holds (idem.go): a
	// send whose messageId the same buyer org sent to the same listing
	// within it is answered with what the first send created, not
	// forwarded again; default 24h, negative: off (a listing may still set
	// its own).
	IdempotencyWindow time.Duration
	// SentIndexSize is how many sent messages the meter keeps in memory (a
	// messageId not held is looked up in the store); default 100,000.
	SentIndexSize int
	// StaleWhileDown is how long past CacheTTL the meter goes on with the
	// keys, listings, contracts, plans and grants it last read while the
	// database is unreachable (calls go on; their rows wait in the spool);
	// default 10m. A change made meanwhile (a revoked key) is seen once the
	// database answers again.
	StaleWhileDown time.Duration
	// StallAfter is how long a task may show no progress (no status
	// change, artifact or message the meter relayed or saw) before the
	// meter marks it stalled (stall.go); default 10m, negative: off (a
	// listing may still set its own).
	StallAfter time.Duration
}

func (l *Limits) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&l.RequestTimeout, 30*time.Second)
	def(&l.StreamIdleTimeout, 120*time.Second)
	def(&l.Heartbeat, 15*time.Second)
	def(&l.SettleTimeout, 10*time.Minute)
	def(&l.SettleInterval, time.Second)
	def(&l.CacheTTL, 2*time.Second)
	def(&l.MaxPause, 24*time.Hour)
	def(&l.EventRetention, 90*24*time.Hour)
	def(&l.OwnerMissWait, time.Second)
	def(&l.StaleWhileDown, 10*time.Minute)
	def(&l.UnsettledWait, 2*time.Second)
	def(&l.IdempotencyWindow, 24*time.Hour)
	def(&l.StallAfter, 10*time.Minute)
	if l.SentIndexSize == 0 {
		l.SentIndexSize = 100_000
	}
	if l.MaxUnsettled == 0 {
		l.MaxUnsettled = 2000
	}
	if l.OwnerIndexSize == 0 {
		l.OwnerIndexSize = 200_000
	}
	if l.MaxRequestBytes == 0 {
		l.MaxRequestBytes = 1 << 20
	}
	if l.MaxResultBytes == 0 {
		l.MaxResultBytes = 256 << 10
	}
}

// with returns l with a listing's own limits applied.
func (l Limits) with(o listings.Limits) Limits {
	if o.RequestTimeout > 0 {
		l.RequestTimeout = o.RequestTimeout
	}
	if o.StreamIdleTimeout > 0 {
		l.StreamIdleTimeout = o.StreamIdleTimeout
	}
	if o.MaxRequestBytes > 0 {
		l.MaxRequestBytes = o.MaxRequestBytes
	}
	if o.MaxResultBytes > 0 {
		l.MaxResultBytes = o.MaxResultBytes
	}
	if o.TaskTimeout > 0 {
		l.TaskTimeout = o.TaskTimeout
	}
	if o.MaxPause > 0 {
		l.MaxPause = o.MaxPause
	}
	if o.IdempotencyWindow > 0 {
		l.IdempotencyWindow = o.IdempotencyWindow
	}
	if o.StallAfter > 0 {
		l.StallAfter = o.StallAfter
	}
	return l
}

// withBudgets returns l with a contract's own time budgets applied: a
// buyer may only tighten what the listing allows.
func (l Limits) withBudgets(b contracts.TimeBudgets) Limits {
	tighten := func(d *time.Duration, v time.Duration) {
		if v > 0 && (*d == 0 || v < *d) {
			*d = v
		}
	}
	tighten(&l.RequestTimeout, b.RequestTimeout)
	tighten(&l.TaskTimeout, b.TaskTimeout)
	tighten(&l.MaxPause, b.MaxPause)
	return l
}

// Proxy is the meter. Build it with New.
type Proxy struct {
	PublicURL    string // the meter's base URL as buyers reach it
	Limits       Limits
	Auth         Authenticator
	Resolver     Resolver
	Plans        Plans
	Contracts    Contracts
	Entitlements Entitlements
	Owners       contracts.TaskOwners
	Ledger       metering.Ledger
	Recorder     Recorder
	Spend        Spend // nil: budgets are not enforced
	// Tasks records the life of tasks (pauses, cancels, deadlines); nil:
	// not recorded, and no task is canceled for its time.
	Tasks contracts.TaskLife
	// Sent keeps the records of the messages forwarded, for idempotent
	// sends (idem.go); nil: every send is forwarded.
	Sent contracts.SentMessages
	// Sealer seals ListTasks page tokens (they hold the agent's own token,
	// which could name another org's task); nil: Push's.
	Sealer Sealer
	// Unsettled, when set, is how many spooled rows wait for their
	// projections (spool.Shipper.Unsettled): calls are held back while
	// it is above Limits.MaxUnsettled.
	Unsettled func() int
	// Incidents marks a listing whose agent misbehaved in a way that could
	// leak one buyer's data to another (nil: only logged).
	Incidents Incidents
	// Push relays push notifications (nil: the meter refuses push configs,
	// and proxied cards say pushNotifications: false).
	Push *Push
	// Guard is the SSRF policy of every connection to an agent
	// (httpfetch.Guard with AGENTMARKET_FETCH_ALLOW_CIDRS); nil: the meter
	// connects to no agent (upstream.go).
	Guard AddressGuard
	// Dialer is the base dialer the guard is installed on; nil: a 30 s
	// connect timeout. Tests give it an in-memory resolver.
	Dialer  *net.Dialer
	Clock   agentmarket.Clock
	Logger  *slog.Logger
	Metrics *Metrics
	// Base is the context background work (streams whose buyer left,
	// settling) runs under; it ends at shutdown.
	Base context.Context

	actors    *ttlCache[agentmarket.Actor]
	targets   *ttlCache[*Target]
	contracts *ttlCache[*contracts.Contract]
	spent     *ttlCache[int64]
	plans     *ttlCache[*listings.Plan] // plan versions never change
	parents   *ttlCache[*contracts.TaskBinding]
	owners    *ownerIndex
	grants    *ttlCache[bool]
	// recordFailed is when a usage row last failed to be recorded (Unix
	// ns, 0: never), for RecordingErr.
	recordFailed atomic.Int64
	binds        *batcher[contracts.TaskBinding, bindResult]
	sentIdx      *sentIndex                             // idem.go
	sentFinds    *batcher[contracts.SentKey, sentFound] // idem.go
	sentWrites   chan sentWrite                         // idem.go
	dialects     dialectCache                           // of 0.3 HTTP+JSON agent interfaces (dialect.go)
	upstream     *http.Client                           // to agents, under Guard (upstream.go)
	// stalls is the progress of the tasks this meter saw (stall.go).
	stalls progressWatch
	// background counts work that outlives a request (cascades).
	background sync.WaitGroup
}

// Init fills defaults; call it once before Mount.
func (p *Proxy) Init() {
	p.Limits.defaults()
	now := p.Clock.Now
	stale := p.Limits.StaleWhileDown
	p.actors = newTTLCache[agentmarket.Actor](p.Limits.CacheTTL, now).staleFor(stale)
	p.targets = newTTLCache[*Target](p.Limits.CacheTTL, now).staleFor(stale)
	p.contracts = newTTLCache[*contracts.Contract](p.Limits.CacheTTL, now).staleFor(stale)
	p.spent = newTTLCache[int64](p.Limits.CacheTTL, now)
	p.plans = newTTLCache[*listings.Plan](time.Hour, now).staleFor(stale)
	p.parents = newTTLCache[*contracts.TaskBinding](p.Limits.CacheTTL, now)
	p.owners = newOwnerIndex(p.Owners, p.Limits.OwnerIndexSize, p.Limits.OwnerMissWait)
	p.grants = newTTLCache[bool](p.Limits.CacheTTL, now).staleFor(stale)
	p.initUpstream()
	if p.Base == nil {
		p.Base = context.Background()
	}
	if p.Logger == nil {
		p.Logger = slog.New(slog.DiscardHandler)
	}
	if p.Push != nil {
		p.Push.init()
		if p.Sealer == nil {
			p.Sealer = p.Push.Sealer
		}
	}
	p.startBatchers()
	p.initSent()
}

// Wait waits for the background work requests started (cascades of
// cancels) to end; call it after the base context ends.
func (p *Proxy) Wait() { p.background.Wait() }

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

// Endpoint is the meter URL buyers call for a listing.
func (p *Proxy) Endpoint(listingID string) string {
	return strings.TrimRight(p.PublicURL, "/") + "/a2a/" + listingID
}

func isNotFound(err error) bool { return agentmarket.KindOf(err) == agentmarket.NotFound }

// resolve is a listing's target, published or not, cached.
func (p *Proxy) resolve(ctx context.Context, listingID string) (*Target, error) {
	return p.targets.get(listingID, func() (*Target, error) { return p.Resolver.Resolve(ctx, listingID) }, isNotFound)
}

// openContract is an org's open contract for a listing, cached; a refusal
// is not (a buyer who just subscribed must not wait it out).
func (p *Proxy) openContract(ctx context.Context, orgID, listingID string) (*contracts.Contract, error) {
	return p.contracts.get(orgID+"|"+listingID, func() (*contracts.Contract, error) {
		return p.Contracts.OpenContract(ctx, orgID, listingID)
	}, func(error) bool { return false })
}

// plan is a plan version, cached (versions never change).
func (p *Proxy) plan(ctx context.Context, listingID string, version int) (*listings.Plan, error) {
	return p.plans.get(fmt.Sprintf("%s|%d", listingID, version), func() (*listings.Plan, error) {
		return p.Plans.Plan(ctx, listingID, version)
	}, func(error) bool { return false })
}

func (p *Proxy) target(ctx context.Context, listingID string) (*Target, error) {
	t, err := p.resolve(ctx, listingID)
	if err != nil {
		if isNotFound(err) {
			return nil, rpcErr(CodeListingUnavailable, http.StatusNotFound, fmt.Sprintf("no listing %q", listingID))
		}
		return nil, err
	}
	if !t.Published {
		return nil, rpcErr(CodeListingUnavailable, http.StatusOK, fmt.Sprintf("listing %q is not available (not published)", listingID))
	}
	return t, nil
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

// call is everything known about one buyer request as it goes through.
type call struct {
	start    time.Time
	trace    traceContext
	actor    agentmarket.Actor
	target   *Target
	contract *contracts.Contract
	plan     *listings.Plan
	req      *wire.Request
	id       json.RawMessage // the request's JSON-RPC id, once read
	// restVersion is set for HTTP+JSON buyers from the path, so errors
	// before the request is parsed still answer in their binding.
	restVersion wire.Version
	upVersion   wire.Version // the version spoken to the agent
	iface       agentcard.Interface
	dialect     restDialects
	lim         Limits // the meter's limits with the listing's overrides
	bytesIn     int
	bytesOut    int
	errCode     int
	obs         observed
	// label replaces the method name in the usage row of a call the meter
	// did not get from a buyer ("push" for a notification).
	label string
	// cancelBy and cancelWhy say who canceled and why, for cancels the
	// meter sends on its own.
	cancelBy, cancelWhy string
	// tracked is set when the task got a deadline or a parent: its end is
	// then recorded.
	tracked bool
	// inlinePush is the push config a send carried, registered once the
	// agent names the task.
	inlinePush *pushConfig
	// binds is set when this call bound its task: the usage row carries
	// the binding to the spool, which makes it durable.
	binds *metering.Binding
	// out is the request as the agent gets it, once made (outbound).
	out *wire.Request
	// sent is this call's hold on its send's messageId (idem.go); sentAcked
	// is set once the agent took the message, sentResult is its answer
	// when it was a message (in sentResultVersion, the agent's).
	sent              *sentEntry
	sentAcked         bool
	sentResult        []byte
	sentResultVersion wire.Version
	// replayed is set when the call repeated an earlier send and was
	// answered with what that one created: it bills nothing.
	replayed bool
	// lost is set when the agent answered TaskNotFound for the task the
	// call named, bound to the caller: the agent forgot it (agentRefused).
	lost bool
}

// agentRefused notes the error the agent answered the call with. A
// TaskNotFound for a task the meter bound to the caller (checkOwner let
// the call through) means the agent lost the task: the usage row says so
// (Usage.Lost), and the projection ends the task as lost and counts it on
// the listing. The buyer gets the agent's error as it is.
func (cl *call) agentRefused(e *wire.Error) {
	cl.errCode = e.Code
	cl.lost = e.Code == wire.CodeTaskNotFound && cl.obs.bound && cl.obs.taskID != "" && cl.req != nil && cl.req.Method.TaskScoped() &&
		cl.label == "" && cl.cancelBy == ""
}

func (p *Proxy) rpc(c *fiber.Ctx) error {
	cl, body := p.newCall(c)

	parse := func() (*wire.Request, *wire.Error) {
		version := c.Get("A2A-Version")
		if version == "" {
			version = c.Query("A2A-Version")
		}
		req, werr := wire.ParseRequest(body, version)
		if werr != nil && req != nil {
			cl.id = req.ID // a JSON-RPC error answer echoes the id when it could be read
		}
		return req, werr
	}
	return p.serve(c, cl, body, parse)
}

// rest serves the HTTP+JSON binding: the call becomes the same request a
// JSON-RPC client would have sent and goes through the same pipeline.
func (p *Proxy) rest(c *fiber.Ctx) error {
	cl, body := p.newCall(c)
	path := string(c.Request().URI().PathOriginal())
	path = strings.TrimPrefix(path, "/a2a/"+c.Params("listing"))
	query, _ := url.ParseQuery(string(c.Request().URI().QueryString()))
	cl.restVersion, cl.dialect.buyer = wire.RESTVersionOf(path, c.Get("A2A-Version"), query)
	parse := func() (*wire.Request, *wire.Error) {
		req, werr := wire.ParseREST(c.Method(), path, query, c.Get(fiber.HeaderContentType), body, c.Get("A2A-Version"))
		if req.Version != wire.V03 {
			cl.dialect.buyer = wire.DialectSpec // a 1.0 message without its header
		}
		if werr != nil {
			cl.req = req // answer in the buyer's binding and version
		}
		return req, werr
	}
	return p.serve(c, cl, body, parse)
}

// newCall starts a call: its clock, its trace, and a copy of the body
// (fasthttp reuses the request buffer).
func (p *Proxy) newCall(c *fiber.Ctx) (*call, []byte) {
	cl := &call{start: p.Clock.Now(), trace: parseTraceparent(c.Get("traceparent"))}
	body := append([]byte(nil), c.Body()...)
	cl.bytesIn = len(body)
	return cl, body
}

// serve runs one call through the pipeline, whatever the buyer's binding.
func (p *Proxy) serve(c *fiber.Ctx, cl *call, body []byte, parse func() (*wire.Request, *wire.Error)) error {
	if p.Metrics != nil {
		p.Metrics.inflight.Inc()
		defer p.Metrics.inflight.Dec()
	}
	if err := p.admit(c.UserContext(), c, cl, body, parse); err != nil {
		return p.fail(c, cl, err)
	}
	if replied, err := p.idempotent(c, cl); err != nil {
		return p.fail(c, cl, err)
	} else if replied {
		return nil
	}
	switch {
	case cl.req.Method.Streaming():
		return p.stream(c, cl)
	case cl.req.Method.Push():
		return p.pushMethod(c, cl)
	case cl.req.Method == wire.MethodListTasks && p.Sealer != nil:
		return p.listTasks(c, cl)
	}
	return p.unary(c, cl)
}

// admit runs every check before a request may go upstream: key, envelope,
// listing, contract, entitlement, task ownership.
func (p *Proxy) admit(ctx context.Context, c *fiber.Ctx, cl *call, body []byte, parse func() (*wire.Request, *wire.Error)) error {
	if err := p.RecordingErr(); err != nil {
		// A call that cannot be billed is not forwarded.
		return rpcErr(CodeMeterUnavailable, http.StatusServiceUnavailable, "the meter cannot record usage right now, so it forwards no calls; try another meter or again shortly")
	}
	if err := p.awaitProjections(ctx); err != nil {
		return err
	}
	secret, ok := bearer(c.Get(fiber.HeaderAuthorization))
	if !ok {
		return rpcErr(CodeUnauthorized, http.StatusUnauthorized, "send your AgentMarket API key as: Authorization: Bearer amk_…")
	}
	actor, err := p.actors.get(contracts.HashKey(secret), func() (agentmarket.Actor, error) { return p.Auth.Authenticate(ctx, secret) },
		func(err error) bool { return agentmarket.KindOf(err) == agentmarket.Unauthorized })
	if err != nil {
		return err
	}
	cl.actor = actor
	t, err := p.target(ctx, listingParam(c))
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

// awaitProjections holds a call back while more rows than MaxUnsettled
// wait for their projections, for UnsettledWait at most: backpressure
// that keeps the meter's pace to what its database takes.
func (p *Proxy) awaitProjections(ctx context.Context) error {
	if p.Unsettled == nil || p.Unsettled() <= p.Limits.MaxUnsettled {
		return nil
	}
	if p.Metrics != nil {
		p.Metrics.heldBack()
	}
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

// recordRetry is how long after a usage row could not be recorded the
// meter refuses calls before it tries again.
const recordRetry = time.Second

// RecordingErr is why the meter cannot record usage now, nil when it can:
// the recorder's own error (a spool whose fsync failed stays failed), or
// a row that could not be recorded within the last recordRetry (a full
// disk). /readyz reports it; calls are refused meanwhile.
func (p *Proxy) RecordingErr() error {
	if err := p.Recorder.Err(); err != nil {
		return err
	}
	if at := p.recordFailed.Load(); at != 0 && time.Since(time.Unix(0, at)) < recordRetry {
		return errors.New("the last usage row could not be recorded")
	}
	return nil
}

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

// upREST reports whether the agent is called over HTTP+JSON.
func (cl *call) upREST() bool { return cl.iface.Binding == agentcard.BindingHTTPJSON }

// buyerREST reports whether the buyer called over HTTP+JSON.
func (cl *call) buyerREST() bool { return cl.req != nil && cl.req.Binding == wire.BindingREST }

// passthrough reports whether the agent's bytes can go to the buyer as
// they are: same binding (JSON-RPC) and same version on both sides.
func (cl *call) passthrough() bool {
	return !cl.upREST() && !cl.buyerREST() && cl.upVersion == cl.req.Version
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

// bindsInDB reports whether a call's new binding goes to the database at
// once rather than through the spool: when the task's life is recorded
// right away (a deadline, a parent named, a pause, an inline push config),
// as those records update the binding's row, or when the call's usage row
// comes late (a stream).
func (p *Proxy) bindsInDB(cl *call, b *contracts.TaskBinding) bool {
	return b.DeadlineAt != nil || b.ParentTaskID != "" || cl.inlinePush != nil || interrupted(cl.obs.state) ||
		// A stream's usage row is written when it ends, maybe hours
		// later: the binding cannot wait for it to be durable.
		cl.req.Method.Streaming()
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

// upstreamRequest builds the request to the agent: the buyer's body (in
// the agent's version), the seller's credentials, the usage extension
// activated, the trace carried on. The buyer's own credentials and
// hop-by-hop headers are never forwarded. A 0.3 HTTP+JSON agent is called
// in the dialect it speaks, probed on the first call (dialect.go).
func (p *Proxy) upstreamRequest(ctx context.Context, cl *call, r *wire.Request, accept string) (*http.Request, error) {
	method, url, body, contentType := http.MethodPost, cl.iface.URL, r.Raw, "application/json"
	if cl.upREST() {
		var err error
		if d := p.agentDialect(ctx, cl); d != cl.dialect.agent {
			cl.dialect.agent = d
		}
		if cl.dialect.agent == wire.DialectSDK03 {
			method, url, body, err = wire.SDK03Upstream(r, cl.iface.URL)
		} else {
			method, url, body, err = wire.RESTUpstream(r, cl.upVersion, cl.iface.URL, cl.iface.Tenant)
		}
		if err != nil {
			return nil, err
		}
		contentType = wire.RESTContentType(cl.upVersion)
	}
	var rd io.Reader
	if len(body) > 0 {
		rd = &sentBody{b: body}
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		req.ContentLength = int64(len(body))
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "AgentMarket-Meter/1")
	if cl.upVersion == wire.V10 {
		req.Header.Set("A2A-Version", "1.0")
	}
	if cl.target.Card.HasExtension(wire.UsageExtensionURI) {
		h := "X-A2A-Extensions"
		if cl.upVersion == wire.V10 {
			h = "A2A-Extensions"
		}
		req.Header.Set(h, wire.UsageExtensionURI)
	}
	req.Header.Set("traceparent", cl.trace.child())
	if a := cl.target.UpstreamAuth; a != nil {
		req.Header.Set(a.Header, a.Value)
	}
	return req, nil
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
func (p *Proxy) unary(c *fiber.Ctx, cl *call) error {
	ctx, cancel := context.WithTimeout(p.Base, cl.lim.RequestTimeout)
	defer cancel()
	r, err := outbound(cl)
	if err != nil {
		return p.fail(c, cl, err)
	}
	req, err := p.upstreamRequest(ctx, cl, r, "application/json")
	if err != nil {
		return p.fail(c, cl, err)
	}
	res, err := p.send(cl, req)
	if err != nil {
		return p.fail(c, cl, upstreamErr(ctx, err, cl.lim.RequestTimeout))
	}
	defer res.Body.Close()
	return p.unaryFrom(c, cl, res)
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

// unaryFrom relays the agent's answer and meters the call.
func (p *Proxy) unaryFrom(c *fiber.Ctx, cl *call, res *http.Response) error {
	ctx := res.Request.Context()
	raw, err := readLimited(res, cl.lim.MaxResultBytes)
	if err != nil {
		if _, ok := err.(*rpcError); ok {
			return p.fail(c, cl, err)
		}
		return p.fail(c, cl, upstreamErr(ctx, err, cl.lim.RequestTimeout))
	}
	result, agentErr, err := agentAnswer(cl, cl.req.Method, res.StatusCode, res.Header.Get("Content-Type"), raw)
	if err != nil {
		return p.fail(c, cl, err)
	}
	if agentErr != nil {
		cl.agentRefused(agentErr)
		if cl.passthrough() {
			return p.reply(c, cl, ctx, http.StatusOK, raw)
		}
		return p.replyError(c, cl, ctx, wire.TranslateError(cl.upVersion, cl.req.Version, agentErr))
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
		return p.reply(c, cl, ctx, http.StatusOK, raw)
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
	return p.answer(c, cl, ctx, result)
}

// answer answers a result (in the buyer's version) in the buyer's binding.
func (p *Proxy) answer(c *fiber.Ctx, cl *call, ctx context.Context, result json.RawMessage) error {
	if cl.buyerREST() {
		status, body := cl.restResult(result)
		return p.reply(c, cl, ctx, status, body)
	}
	return p.reply(c, cl, ctx, http.StatusOK, resultResponse(cl.req.ID, result))
}

// sdk03Buyer reports whether the buyer speaks the official Go SDK's 0.3
// HTTP+JSON dialect (dialect.go).
func (cl *call) sdk03Buyer() bool { return cl.dialect.buyer == wire.DialectSDK03 }

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
func (p *Proxy) reply(c *fiber.Ctx, cl *call, ctx context.Context, status int, body []byte) error {
	contentType := p.contentType(c, cl)
	if cl.req.Method.Streaming() && (!cl.buyerREST() || cl.sdk03Buyer() && status == http.StatusOK) {
		// A streaming method answers an event stream, even when all it has
		// to say is an error (the agent answered JSON); the SDK's 0.3 REST
		// clients read only a stream there, but errors as plain answers.
		body, contentType = sseData(body), "text/event-stream"
	}
	cl.bytesOut = len(body)
	p.finish(ctx, cl, p.Clock.Now().Sub(cl.start))
	c.Set(fiber.HeaderContentType, contentType)
	c.Set("traceparent", cl.trace.header())
	return c.Status(status).Send(body)
}

// replyError answers an A2A error from the agent in the buyer's binding.
func (p *Proxy) replyError(c *fiber.Ctx, cl *call, ctx context.Context, e *wire.Error) error {
	if cl.buyerREST() {
		status, body := cl.restError(cl.req.Version, e)
		return p.reply(c, cl, ctx, status, body)
	}
	return p.reply(c, cl, ctx, http.StatusOK, wire.ErrorResponse(cl.req.ID, e))
}

func (p *Proxy) contentType(c *fiber.Ctx, cl *call) string {
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
func (p *Proxy) fail(c *fiber.Ctx, cl *call, err error) error {
	id := cl.id
	var we *wire.Error
	status := http.StatusOK
	if !errors.As(err, &we) {
		re := toRPC(err)
		if re.Code == CodeInternal {
			p.Logger.ErrorContext(c.UserContext(), "meter request failed", "trace_id", cl.trace.traceID, "err", err)
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
		p.finish(c.UserContext(), cl, p.Clock.Now().Sub(cl.start))
	} else if p.Metrics != nil {
		p.Metrics.observe(cl, 0)
	}
	c.Set(fiber.HeaderContentType, contentType)
	return c.Status(status).Send(out)
}

// bindAnswer binds the task an agent's answer names (bindTask), and tells
// the send's hold on its messageId what the agent answered.
func (p *Proxy) bindAnswer(ctx context.Context, cl *call) error {
	if err := p.bindTask(ctx, cl); err != nil {
		return err
	}
	p.sentLearned(cl)
	return nil
}

// bindTask records the buyer's org as the owner of the task the agent
// created, the first time the meter sees it. An answer about a task that
// is already another org's must not reach the caller: the error returned
// then replaces it (and the listing gets an incident); so does one whose
// owner could not be recorded, as its owner is then unknown.
func (p *Proxy) bindTask(ctx context.Context, cl *call) error {
	if cl.obs.taskID == "" {
		return nil
	}
	if cl.obs.bound {
		// A message to a task already bound (checkOwner).
		if cl.inlinePush != nil {
			p.registerInlinePush(cl)
		}
		return nil
	}
	cl.obs.bound = true
	b := contracts.TaskBinding{ListingID: cl.target.ListingID, TaskID: cl.obs.taskID,
		OrgID: cl.actor.OrgID, ContractID: cl.contract.ID, ContextID: cl.obs.contextID, CreatedAt: p.Clock.Now()}
	parent := p.parentOf(ctx, cl)
	if parent != nil {
		b.ParentListingID, b.ParentTaskID = parent.ListingID, parent.TaskID
	} else if cl.req != nil {
		b.ParentTaskID = cl.req.ParentTaskID() // unresolved: matched when a parent of this id is canceled
	}
	b.DeadlineAt = p.deadline(cl, parent)
	// The end of a task with a deadline or a known parent is recorded, so
	// the sweeper and cascades leave it alone once it completed. (A child
	// of an unresolved parent is not: that would cost a write on every
	// call naming a parent the meter never carried; a cascade reaching it
	// after it completed finds it not cancelable and records its end.)
	cl.tracked = b.DeadlineAt != nil || b.ParentListingID != ""
	// Bound in memory first: this meter's own bindings (projected or not)
	// decide at once. In steady state that is all: the usage row (Binds)
	// makes the binding durable and the shipper projects it (Project).
	got, created := p.owners.Bind(b)
	if !created && !mayRelay(got, cl.actor.OrgID) {
		p.agentTaskConflict(ctx, cl)
		return rpcErr(CodeAgentTaskConflict, http.StatusOK, "the agent answered with a task that is not yours; the meter withheld the answer and marked the listing")
	}
	if p.bindsInDB(cl, &b) {
		// The task's life is recorded at once (a deadline, a parent, a
		// pause, a push config) or its row comes late (a stream): its
		// binding goes to the database now, where another meter's may be.
		owner, err := p.bindOwner(ctx, b)
		if err != nil {
			if created {
				p.owners.Forget(b.ListingID, b.TaskID)
			}
			p.Logger.ErrorContext(ctx, "task binding failed", "trace_id", cl.trace.traceID, "task_id", cl.obs.taskID, "err", err)
			cl.obs = observed{}
			return rpcErr(CodeUpstreamUnreachable, http.StatusOK, "the meter could not record who owns the agent's task, so its answer was withheld; try again")
		}
		if owner != cl.actor.OrgID {
			p.agentTaskConflict(ctx, cl)
			return rpcErr(CodeAgentTaskConflict, http.StatusOK, "the agent answered with a task that is not yours; the meter withheld the answer and marked the listing")
		}
	}
	cl.binds = &metering.Binding{ParentListingID: b.ParentListingID, Stored: p.bindsInDB(cl, &b)}
	if b.DeadlineAt != nil {
		cl.binds.DeadlineAt = *b.DeadlineAt
	}
	if cl.inlinePush != nil {
		p.registerInlinePush(cl)
	}
	return nil
}

// agentTaskConflict handles an agent answering one org with a task bound
// to another (an agent that reuses task ids, say after a restart): the
// seller's listing gets an incident, and the call forgets the task so
// nothing of it is billed, recorded or tracked for the caller.
func (p *Proxy) agentTaskConflict(ctx context.Context, cl *call) {
	p.Logger.WarnContext(ctx, "agent answered with another org's task; answer withheld", "trace_id", cl.trace.traceID,
		"listing", cl.target.ListingID, "task_id", cl.obs.taskID, "org", cl.actor.OrgID)
	now := p.Clock.Now()
	err := p.Owners.MarkTaskReused(ctx, cl.target.ListingID, cl.obs.taskID, now)
	if isNotFound(err) && p.storeHeldBinding(ctx, cl.target.ListingID, cl.obs.taskID) {
		// Bound on this meter and not projected yet: stored now.
		err = p.Owners.MarkTaskReused(ctx, cl.target.ListingID, cl.obs.taskID, now)
	}
	if err != nil {
		p.Logger.ErrorContext(ctx, "reused task not marked", "trace_id", cl.trace.traceID, "task_id", cl.obs.taskID, "err", err)
	}
	p.owners.MarkReused(cl.target.ListingID, cl.obs.taskID, now)
	cl.obs = observed{}
	p.recordIncident(ctx, cl.target.ListingID)
}

// recordIncident marks a listing whose agent reused a task id.
func (p *Proxy) recordIncident(ctx context.Context, listingID string) {
	if p.Incidents == nil {
		return
	}
	detail := "the agent answered a buyer with a task id that belongs to another buyer organisation (an agent must never reuse task ids, also across restarts); the meter withheld the answer"
	if err := p.Incidents.RecordIncident(ctx, listingID, detail); err != nil {
		p.Logger.ErrorContext(ctx, "listing incident not recorded", "listing", listingID, "err", err)
	}
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
