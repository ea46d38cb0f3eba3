package a2aproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

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
	// LocalShare is the share (0 to 1) of each rate limit, session cap,
	// budget and credit balance this meter admits while it holds them on
	// its own (no SharedRates and SharedBudgets, or while they fail):
	// 1/N for N meters without Redis keeps them together within the
	// limit. 0 means 1: each meter admits the whole limit (docs/limits.md).
	LocalShare float64
	// MaxUnsettled is how many spooled rows may wait for their projections
	// (bindings, ledger) before the meter holds new calls back (up to
	// UnsettledWait, then -32058); default 2,000. Past half of it, calls
	// are paced (awaitProjections). It keeps the projections
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
// CardSigner signs the proxied cards the meter serves and publishes the
// keys that verify them (listings/cardsig.Signer).
type CardSigner interface {
	SignCard(ctx context.Context, card []byte) ([]byte, error)
	JWKS(ctx context.Context) ([]byte, time.Duration, error)
}

// CardKeysPath is where the meter publishes the JWKS of the keys its
// proxied cards are signed with (the jku of their signatures).
const CardKeysPath = "/.well-known/jwks.json"

type Proxy struct {
	PublicURL string // the meter's base URL as buyers reach it
	// CardSigner signs every proxied card (A2A 1.0 §8.4), replacing the
	// seller's signatures, which no longer match; nil: served unsigned.
	CardSigner   CardSigner
	Limits       Limits
	Auth         Authenticator
	Resolver     Resolver
	Plans        Plans
	Contracts    Contracts
	Entitlements Entitlements
	Owners       contracts.TaskOwners
	// Shared is where the meters of one deployment share their bindings
	// (Redis): a task bound through one meter is found for its owner on
	// every other at once, not once the database's projection has it.
	// nil: the database alone. A failure of Shared sends the call down
	// the database path (logged, counted); no call is refused for it.
	Shared SharedOwners
	// SharedBills, with Shared, is where each call's bill is decided, on
	// the call path (sharedbills.go): no relational row per call; the
	// ledger bills only the tasks the shared bills do not hold.
	SharedBills SharedBills
	Ledger      metering.Ledger
	Recorder    Recorder
	Spend       Spend // nil: budgets are not enforced
	// OrgSpend reads orgs' spend for their monthly budgets; nil: org
	// budgets are not enforced.
	OrgSpend OrgSpend
	// SharedBudgets, with Shared, is where every meter of the deployment
	// reserves under budgets (reserve.go); nil, or while it fails, each
	// meter holds them on its own.
	SharedBudgets SharedBudgets
	// Credit is the orgs' prepaid credit (credit.go); nil: none is burned.
	Credit contracts.CreditReader
	// Switches are the kill switches (killswitch.go); nil: none.
	Switches *Switchboard
	// SharedRates holds rate limits and session caps for every meter
	// (ratelimit.go); nil: this meter holds them on its own.
	SharedRates SharedRates
	// Tasks records the life of tasks (pauses, cancels, deadlines); nil:
	// not recorded, and no task is canceled for its time.
	Tasks contracts.TaskLife
	// Sent keeps the records of the messages forwarded, for idempotent
	// sends (idem.go); nil: every send is forwarded.
	Sent contracts.SentMessages
	// Sealer seals ListTasks page tokens (they hold the agent's own token,
	// which could name another org's task); nil: Push's.
	Sealer Sealer
	// BillInMemory decides each call's bill when its row is recorded,
	// from the meter's own ledger in memory (billbook.go): for a meter
	// that is the only one billing its listings' tasks (the embedded
	// default). Off, rows are spooled pending and the shipper bills them
	// through Ledger, which several meters share.
	BillInMemory bool
	// Warm, with BillInMemory, reports whether the rows the spool held when
	// the meter started have all been projected (their bills are then in
	// the tasks' stored rows); until then a bill of a task the meter does
	// not hold waits. nil: warm from the start.
	Warm func() bool
	// Unsettled, when set, is how many spooled rows wait for their
	// projections in a way that should slow calls down
	// (spool.Shipper.Backpressure: not while the projections' database is
	// down): calls are paced past half of Limits.MaxUnsettled and held
	// back past it.
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
	// Tracer makes the meter's spans (spans.go): a server span per buyer
	// call, a client span per request to the agent, spans for cancels and
	// push deliveries; nil: none, at no cost, and the buyer's trace id is
	// carried on as before (trace.go).
	Tracer trace.Tracer
	// Base is the context background work (streams whose buyer left,
	// settling) runs under; it ends at shutdown.
	Base context.Context

	actors     *ttlCache[agentmarket.Actor]
	targets    *ttlCache[*Target]
	contracts  *ttlCache[*contracts.Contract]
	book       *budgetBook               // budgets' spend and reservations (reserve.go)
	rates      *rateKeeper               // rate limits and session caps (ratelimit.go)
	credits    *creditBook               // prepaid credit's reservations (credit.go); nil without Credit
	plans      *ttlCache[*listings.Plan] // plan versions never change
	parents    *ttlCache[*contracts.TaskBinding]
	owners     *ownerIndex
	grants     *ttlCache[bool]
	acct       *accounting // accounting.go
	bills      *billBook   // billbook.go, with BillInMemory
	binds      *batcher[contracts.TaskBinding, bindResult]
	sharedBind *batcher[contracts.TaskBinding, bindResult] // to Shared
	sentIdx    *sentIndex                                  // idem.go
	sentFinds  *batcher[contracts.SentKey, sentFound]      // idem.go
	sentWrites chan sentWrite                              // idem.go
	sentLocal  bool                                        // Sent answers lookups at once (localLookups, idem.go)
	sentAtOnce bool                                        // Sent takes claims on the call path (claimsAtOnce, idem.go)
	dialects   dialectCache                                // of 0.3 HTTP+JSON agent interfaces (dialect.go)
	upstream   *http.Client                                // to agents, under Guard (upstream.go): streams, probes
	fast       *fastClients                                // to agents, under Guard: unary calls (upstream_fast.go)
	outliers   *outliers                                   // endpoints ejected after failures in a row (eject.go)
	balancer   balancer                                    // calls in flight per endpoint, retries (balance.go)
	// invokeRoles are the roles each org lets invoke (invokers.go).
	invokeRoles *roleCache
	// stalls is the progress of the tasks this meter saw (stall.go).
	stalls progressWatch
	// later holds the writes the store refused that nothing else would make
	// again, for the task sweeper (later.go).
	later laterWrites
	// background counts work that outlives a request (cascades).
	background sync.WaitGroup
	// chain is the call path: the stages, then forward (chain.go).
	chain handler
	// fallbackChain is the chain from entitle on, without the fallback
	// stage, for a call a fallback listing serves (fallback.go).
	fallbackChain handler
	// fallbacks counts the calls a fallback served (Fallbacks).
	fallbacks atomic.Uint64
	// tracing is set when Tracer is (spans.go).
	tracing *spanMaker
}

// Init fills defaults; call it once before Mount.
func (p *Proxy) Init() {
	p.Limits.defaults()
	now := p.Clock.Now
	stale := p.Limits.StaleWhileDown
	p.actors = newTTLCache[agentmarket.Actor](p.Limits.CacheTTL, now).staleFor(stale)
	p.targets = newTTLCache[*Target](p.Limits.CacheTTL, now).staleFor(stale)
	p.contracts = newTTLCache[*contracts.Contract](p.Limits.CacheTTL, now).staleFor(stale)
	p.plans = newTTLCache[*listings.Plan](time.Hour, now).staleFor(stale)
	p.parents = newTTLCache[*contracts.TaskBinding](p.Limits.CacheTTL, now)
	p.owners = newOwnerIndex(p.Owners, p.Limits.OwnerIndexSize, p.Limits.OwnerMissWait)
	if p.Shared != nil {
		p.owners.shared = p.Shared
		p.owners.fallback = func(err error) {
			p.Metrics.SharedFallback("lookup")
			p.Logger.Debug("task owner not read from the shared state; reading the database", "err", err)
		}
	}
	p.grants = newTTLCache[bool](p.Limits.CacheTTL, now).staleFor(stale)
	p.invokeRoles = newRoleCache(p.Limits.CacheTTL, now)
	p.initUpstream()
	if p.Base == nil {
		p.Base = context.Background()
	}
	if p.Logger == nil {
		p.Logger = slog.New(slog.DiscardHandler)
	}
	p.book = newBudgetBook(p.Spend, p.OrgSpend, p.Clock, p.Limits.CacheTTL, p.Logger)
	p.book.shared, p.book.base, p.book.metrics, p.book.share = p.SharedBudgets, p.Base, p.Metrics, share(p.Limits.LocalShare)
	local := newLocalRates(p.Clock)
	local.share = share(p.Limits.LocalShare)
	p.rates = &rateKeeper{local: local, shared: p.SharedRates, clock: p.Clock, base: p.Base, metrics: p.Metrics, logger: p.Logger}
	if p.Credit != nil {
		p.credits = newCreditBook(p.Credit, p.Clock, p.Limits.CacheTTL, p.Logger)
		p.credits.shared, p.credits.base, p.credits.metrics, p.credits.share = p.SharedBudgets, p.Base, p.Metrics, share(p.Limits.LocalShare)
	}
	p.acct = &accounting{recorder: p.Recorder, clock: p.Clock, logger: p.Logger, metrics: p.Metrics}
	switch {
	case p.BillInMemory:
		p.bills = newBillBook(p.Owners, p.Limits.OwnerIndexSize, func() bool { return p.Warm == nil || p.Warm() })
		p.acct.bills = p.bills
	case p.SharedBills != nil:
		p.acct.bills = sharedBook{p.SharedBills}
	}
	if p.Push != nil {
		p.Push.init()
		if p.Sealer == nil {
			p.Sealer = p.Push.Sealer
		}
	}
	p.startBatchers()
	p.initSent()
	p.chain = compose(p.forward, p.traced(p.stages())...)
	p.fallbackChain = compose(p.forward, p.admission(false)...)
}

// Wait waits for the background work requests started (cascades of
// cancels) to end; call it after the base context ends.
func (p *Proxy) Wait() { p.background.Wait() }

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
	return p.plans.get(listingID+"|"+strconv.Itoa(version), func() (*listings.Plan, error) {
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

// call is everything known about one buyer request as it goes through.
type call struct {
	listingID string // the listing of the path (its target, once resolved)
	start     time.Time
	trace     traceContext
	span      *callSpan // when the meter traces (traced.go)
	actor     agentmarket.Actor
	target    *Target
	contract  *contracts.Contract
	plan      *listings.Plan
	req       *wire.Request
	id        json.RawMessage // the request's JSON-RPC id, once read
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
	// reusedID: a send under a messageId this org sent before with another
	// message (idem.go): its usage row's method says so.
	reusedID bool
	// rowID, when set, is the usage row's id (a notification's, the same
	// on every retry of it); else a new one.
	rowID string
	// cancelBy and cancelWhy say who canceled and why, for cancels the
	// meter sends on its own.
	cancelBy, cancelWhy string
	// tracked is set when the task got a deadline or a parent: its end is
	// then recorded.
	tracked bool
	// hold is the call's reservation under its budgets (reserve.go),
	// settled when it ends (finish).
	hold budgetHold
	// rate is what the call took under rate limits and session caps
	// (ratelimit.go), given back when it ends (finish); nil: none.
	rate *rateHold
	// credit is the call's reservation against its org's prepaid credit
	// (credit.go), settled when it ends (finish).
	credit creditHold
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
	// fresh is set when this call bound its task, new to this meter: the
	// bill book starts it from nothing (billbook.go).
	fresh bool
	// seen is what the call observed of its task's usage (reported or
	// estimated), for its log line.
	seen metering.Counters
	// x is the buyer's side of the call, body its request body and parse
	// its reading in the buyer's binding: what the chain's stages read.
	x     exchange
	body  []byte
	parse func() (*wire.Request, *wire.Error)
	// routed is the balancer's choice of endpoint (balance.go); nil for a
	// listing with one.
	routed *routed
	// mayFallBack is set on a call that starts new work under a
	// subscription with fallbacks; notTaken, once its agent took nothing
	// (every endpoint ejected, refused before work started): the fallback
	// stage then tries the fallbacks (fallback.go).
	mayFallBack, notTaken bool
	// fallbackFor is the listing the buyer called, on a call a fallback
	// listing serves: its usage row is tagged with it (FallbackTag).
	fallbackFor string
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

// serve runs one call through the chain (chain.go), whatever the buyer's
// binding: a stage's refusal is answered here, in the buyer's binding.
func (p *Proxy) serve(c exchange, cl *call, body []byte, parse func() (*wire.Request, *wire.Error)) error {
	if p.Metrics != nil {
		p.Metrics.inflight.Inc()
		defer p.Metrics.inflight.Dec()
	}
	cl.x, cl.body, cl.parse = c, body, parse
	if err := p.chain(cl); err != nil {
		return p.fail(cl.x, cl, err) // cl.x: c, or c with a stage's headers (ratelimit.go)
	}
	return nil
}

// forward is the chain's last handler: it forwards an admitted call and
// answers it, whatever becomes of it.
func (p *Proxy) forward(cl *call) error {
	c := cl.x
	switch {
	case cl.req.Method.Streaming():
		p.stream(c, cl)
	case cl.req.Method.Push():
		p.pushMethod(c, cl)
	case cl.req.Method == wire.MethodListTasks && p.Sealer != nil:
		p.listTasks(c, cl)
	default:
		p.unary(c, cl)
	}
	return nil
}

// stages are the chain's stages in order (chain.go).
func (p *Proxy) stages() []stage {
	return append([]stage{
		gate{acct: p.acct, unsettled: func() int { return p.unsettled() }, limits: &p.Limits, metrics: p.Metrics},
		authenticate{auth: p.Auth, actors: p.actors},
		invokers{ent: p.Entitlements, roles: p.invokeRoles},
	}, p.admission(true)...)
}

// admission are the stages from entitle on: with the fallback stage for a
// buyer's call, without it for a call a fallback serves (one hop).
func (p *Proxy) admission(withFallback bool) []stage {
	s := []stage{
		entitle{p: p},
		decode{p: p},
		route{p: p},
	}
	if withFallback {
		s = append(s, fallback{p: p})
	}
	return append(s,
		ownership{owners: p.owners},
		killswitch{board: p.Switches},
		limit{rates: p.rates, owners: p.owners},
		reserve{book: p.book},
		credit{book: p.credits},
		idempotency{p: p},
		balance{p: p},
	)
}

// unsettled is Unsettled's lag, 0 without one.
func (p *Proxy) unsettled() int {
	if p.Unsettled == nil {
		return 0
	}
	return p.Unsettled()
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

// sdk03Buyer reports whether the buyer speaks the official Go SDK's 0.3
// HTTP+JSON dialect (dialect.go).
func (cl *call) sdk03Buyer() bool { return cl.dialect.buyer == wire.DialectSDK03 }
