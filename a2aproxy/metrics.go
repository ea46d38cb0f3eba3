package a2aproxy

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/metering"
)

// Metrics are the meter's Prometheus series, per listing.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	tokensC  *prometheus.CounterVec
	cost     *prometheus.CounterVec
	inflight prometheus.Gauge
	pushIn   *prometheus.CounterVec
	pushOut  *prometheus.CounterVec
	canceled *prometheus.CounterVec
	clamped  *prometheus.CounterVec
	held     prometheus.Counter
	pacedC   prometheus.Counter
	sent     *prometheus.CounterVec
	lost     *prometheus.CounterVec
	stalled  *prometheus.CounterVec
	shared   *prometheus.CounterVec
	unbill   *prometheus.CounterVec
	fellBack *prometheus.CounterVec
	push     *pushMetrics
}

// MetricsOptions choose the meter's optional series.
type MetricsOptions struct {
	// ListingCost adds agentmarket_meter_cost_micros_total{listing}, the
	// list price billed on each listing: money per listing, which only
	// the operator asks for (it is each seller's revenue, and with few
	// buyers each buyer's spend).
	ListingCost bool
}

// NewMetrics registers the meter's series on reg.
func NewMetrics(reg prometheus.Registerer, opts MetricsOptions) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "a2a_requests_total",
			Help: "A2A calls through the meter, by listing, method and JSON-RPC error code (0 = success)."}, []string{"listing", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "a2a_request_duration_seconds",
			Help: "Latency of A2A calls through the meter, by listing.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}, []string{"listing"}),
		tokensC: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "tokens_total",
			Help: "Tokens billed, by listing, direction (input, output) and source (reported, estimated)."}, []string{"listing", "direction", "source"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "a2a_inflight_requests",
			Help: "A2A calls in progress (streams included)."}),
		pushIn: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "push_notifications_total",
			Help: "Push notifications agents posted to the meter's callbacks, by listing and outcome (accepted, refused)."}, []string{"listing", "outcome"}),
		pushOut: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "push_delivery_attempts_total",
			Help: "Attempts to deliver push notifications to buyers' webhooks, by outcome (delivered, retry, failed)."}, []string{"outcome"}),
		canceled: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "tasks_canceled_total",
			Help: "Tasks the meter canceled at their agents, by why (pause, deadline, cascade)."}, []string{"why"}),
		clamped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "usage_clamped_total",
			Help: "Calls whose reported or observed usage passed a counter's bound (agentmarket.MaxQuantity) and was counted as the bound, by listing."}, []string{"listing"}),
	}
	reg.MustRegister(m.requests, m.latency, m.tokensC, m.inflight, m.pushIn, m.pushOut, m.canceled)
	m.push = newPushMetrics(reg)
	if opts.ListingCost {
		m.cost = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "cost_micros_total",
			Help: "List price of the usage billed, in micro-units, by listing."}, []string{"listing"})
		reg.MustRegister(m.cost)
	}
	m.held = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "calls_held_back_total",
		Help: "Calls the meter held back because too many spooled rows (2,000 by default) waited for their projections (bindings, ledger): the database does not keep up."})
	m.pacedC = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "calls_paced_total",
		Help: "Calls the meter delayed (up to 10 ms, in proportion to the lag) because more than half the spooled rows it allows (1,000 of 2,000 by default) waited for their projections: the database is close to its pace."})
	m.sent = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "sends_deduplicated_total",
		Help: "Sends whose messageId the buyer org had sent to the listing before (idempotent sends), by listing and outcome: replayed (answered with what the first send created, not forwarded), reused_id (another message under a messageId sent before: forwarded and billed as a new send; its usage row's method is reused-id:<method>), refused (the rare digest collision, -32059), unchecked (the store could not be read, so the send was forwarded)."},
		[]string{"listing", "outcome"})
	m.lost = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "tasks_lost_total",
		Help: "Tasks recorded lost, by listing: the agent answered TaskNotFound for a task the meter had bound (it forgot it, say in a restart)."},
		[]string{"listing"})
	m.stalled = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "tasks_stalled_total",
		Help: "Tasks the meter marked stalled, by listing: no progress (status change, artifact or message) for longer than the listing's stall_after."},
		[]string{"listing"})
	m.shared = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "shared_state_fallbacks_total",
		Help: "Operations on the state meters share (Redis) that failed and went down the database path instead, by operation (bind, lookup, sent_find, sent_record)."},
		[]string{"op"})
	m.unbill = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "calls_unbilled_total",
		Help: "Calls about a task billed in the shared state (Redis) that billed nothing because it did not answer, by listing: the task's next call bills an agent's cumulative report; what the meter estimated for the call alone is not billed."},
		[]string{"listing"})
	m.fellBack = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "fallbacks_total",
		Help: "Calls starting new work that the subscription's own listing could not take (every endpoint ejected, or refused before work started) and a fallback listing served, by listing and fallback (fallback.go)."},
		[]string{"listing", "fallback"})
	reg.MustRegister(m.clamped, m.held, m.pacedC, m.sent, m.lost, m.stalled, m.shared, m.unbill, m.fellBack)
	return m
}

// observe counts a call. Its labels come from closed sets, never from
// what a buyer or an agent chose: the listing only once it was found, the
// method only once the request parsed (so it is an A2A method), the code
// when it is JSON-RPC's, A2A's or the meter's own (an agent may answer any
// integer: "other"; the usage row keeps the code itself).
func (m *Metrics) observe(cl *call, latency time.Duration) {
	listing, method := "", ""
	if cl.target != nil {
		listing = cl.target.ListingID
	}
	if cl.req != nil {
		method = cl.req.Name
	}
	code, ok := codeLabels[cl.errCode]
	if !ok {
		code = "other"
	}
	m.requests.WithLabelValues(listing, method, code).Inc()
	if listing != "" && cl.span != nil {
		cl.span.observe(m.latency.WithLabelValues(listing), latency.Seconds())
	} else if listing != "" {
		m.latency.WithLabelValues(listing).Observe(latency.Seconds())
	}
}

// codeLabels are the label values of the error codes counted one by one.
var codeLabels = func() map[int]string {
	out := map[int]string{}
	for _, c := range []int{0, wire.CodeParseError, wire.CodeInvalidRequest, wire.CodeMethodNotFound, wire.CodeInvalidParams,
		wire.CodeInternalError, wire.CodeTaskNotFound, wire.CodeTaskNotCancelable, wire.CodePushNotificationNotSupported,
		wire.CodeUnsupportedOperation, wire.CodeContentTypeNotSupported, wire.CodeInvalidAgentResponse,
		wire.CodeExtendedCardNotConfigured, wire.CodeExtensionSupportRequired, wire.CodeVersionNotSupported,
		CodeUnauthorized, CodeNotEntitled, CodeBudgetExhausted, CodeListingUnavailable, CodeUpstreamUnreachable,
		CodeUpstreamTimeout, CodeResultTooLarge, CodeRequestTooLarge, CodeStreamIdle, CodeUpstreamRefused, CodeAgentTaskConflict, CodeBudgetUnchecked, CodeMeterUnavailable, CodeMeterBusy, CodeMessageIDReused} {
		out[c] = strconv.Itoa(c)
	}
	return out
}()

func (m *Metrics) tokens(u metering.Usage) {
	src := "reported"
	if u.Estimated {
		src = "estimated"
	}
	m.tokensC.WithLabelValues(u.ListingID, "input", src).Add(float64(u.InputTokens))
	m.tokensC.WithLabelValues(u.ListingID, "output", src).Add(float64(u.OutputTokens))
	if m.cost != nil {
		m.cost.WithLabelValues(u.ListingID).Add(float64(u.CostMicros))
	}
}

// The counters below are nil-safe: a Proxy without Metrics counts nothing.

func (m *Metrics) pushReceived(listing, outcome string) {
	if m != nil {
		m.pushIn.WithLabelValues(listing, outcome).Inc()
	}
}

func (m *Metrics) pushAttempt(outcome string) {
	if m != nil {
		m.pushOut.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) taskCanceled(why string) {
	if m != nil {
		m.canceled.WithLabelValues(why).Inc()
	}
}

func (m *Metrics) paced() {
	if m != nil {
		m.pacedC.Inc()
	}
}

func (m *Metrics) heldBack() {
	if m != nil {
		m.held.Inc()
	}
}

func (m *Metrics) sentOutcome(listing, outcome string) {
	if m != nil {
		m.sent.WithLabelValues(listing, outcome).Inc()
	}
}

// SharedFallback counts an operation on the shared state (Redis) that
// went down the database path (op: bind, lookup, sent_find, sent_record).
func (m *Metrics) SharedFallback(op string) {
	if m != nil {
		m.shared.WithLabelValues(op).Inc()
	}
}

func (m *Metrics) fallback(listing, fallback string) {
	if m != nil {
		m.fellBack.WithLabelValues(listing, fallback).Inc()
	}
}

func (m *Metrics) unbilled(listing string) {
	if m != nil {
		m.unbill.WithLabelValues(listing).Inc()
	}
}

func (m *Metrics) usageClamped(listing string) {
	if m != nil {
		m.clamped.WithLabelValues(listing).Inc()
	}
}

func (m *Metrics) taskLost(listing string) {
	if m != nil {
		m.lost.WithLabelValues(listing).Inc()
	}
}

func (m *Metrics) taskStalled(listing string) {
	if m != nil {
		m.stalled.WithLabelValues(listing).Inc()
	}
}
