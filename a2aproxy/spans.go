package a2aproxy

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmarket/agentmarket/a2aproxy/pushqueue"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/metering"
)

// The meter's spans (issue 27), made through the OpenTelemetry API: the
// API package is the vendor-neutral interface OpenTelemetry splits from
// its SDK for libraries to import, as slog's Handler is for logs; only
// cmd/ builds the SDK's provider and its OTLP exporter, and hands the
// meter a trace.Tracer (Proxy.Tracer). A span per buyer call (server,
// traced.go), a client span per request to the agent (each attempt, each
// settling poll), a span per cancel the meter sends on its own (the
// sweeper's, a cascade's) and per push notification it meters, and a
// client span per push delivery attempt. Every one costs nothing when
// Tracer is nil: the call path checks cl.span against nil, no more.

// The attributes the meter sets (docs/operations.md says what each
// means). A2A's follow the names gateways use (a2a.*), the marketplace's
// are agentmarket.*.
const (
	attrMethod       = attribute.Key("a2a.method")
	attrVersion      = attribute.Key("a2a.version")
	attrBinding      = attribute.Key("a2a.binding")
	attrAgentVersion = attribute.Key("a2a.agent.version")
	attrAgentBinding = attribute.Key("a2a.agent.binding")
	attrTaskID       = attribute.Key("a2a.task.id")
	attrContextID    = attribute.Key("a2a.context.id")
	attrTaskState    = attribute.Key("a2a.task.state")
	attrErrorCode    = attribute.Key("a2a.error.code")
	attrFirstEvent   = attribute.Key("a2a.stream.time_to_first_event_ms")
	attrEvents       = attribute.Key("a2a.stream.events")
	attrListing      = attribute.Key("agentmarket.listing.id")
	attrSeller       = attribute.Key("agentmarket.seller.org_id")
	attrBuyer        = attribute.Key("agentmarket.buyer.org_id")
	attrKey          = attribute.Key("agentmarket.key.id")
	attrInputTokens  = attribute.Key("agentmarket.tokens.input")
	attrOutputTokens = attribute.Key("agentmarket.tokens.output")
	attrEstimated    = attribute.Key("agentmarket.tokens.estimated")
	attrCost         = attribute.Key("agentmarket.cost.micros")
	attrCurrency     = attribute.Key("agentmarket.cost.currency")
	attrCallKind     = attribute.Key("agentmarket.call.kind")
	attrCanceledBy   = attribute.Key("agentmarket.cancel.by")
	attrAttempt      = attribute.Key("agentmarket.attempt")
	attrDeliveryID   = attribute.Key("agentmarket.push.delivery_id")
	attrHTTPMethod   = attribute.Key("http.request.method")
	attrHTTPStatus   = attribute.Key("http.response.status_code")
	attrServer       = attribute.Key("server.address")
	// attrCarriedTrace is the trace id a background call's usage row
	// carries, when its span could not be made a part of that trace.
	attrCarriedTrace = attribute.Key("agentmarket.trace.carried_id")
)

// spanMaker is what the meter's spans are made with.
type spanMaker struct {
	tracer trace.Tracer
	// prop reads and writes traceparent and tracestate (W3C Trace
	// Context), the SDK's own propagator.
	prop propagation.TextMapPropagator
}

func newSpanMaker(t trace.Tracer) *spanMaker {
	return &spanMaker{tracer: t, prop: propagation.TraceContext{}}
}

// nowWall is the wall clock spans measure with, as the SDK's own
// timestamps do: a span's times are the real ones, whatever clock the
// meter's business runs on (Proxy.Clock).
func nowWall() time.Time { return time.Now() }

// traceOf is the call's trace context as the meter records and answers
// it, from its span.
func traceOf(sc trace.SpanContext) traceContext {
	// The call's span is the parent of what the meter does on its own for
	// it later (the cancel of a stream a kill switch ended).
	return traceContext{traceID: sc.TraceID().String(), spanID: sc.SpanID().String(), flags: sc.TraceFlags().String(), parent: sc.SpanID()}
}

// callSpan is a call's span and the client span of its request to the
// agent, open while that request is. Only the goroutine that runs the
// call touches it (the handler's, then the stream relay's or the
// settling poll's, one after the other).
type callSpan struct {
	t    *spanMaker
	ctx  context.Context // holds span: the parent of the client spans
	span trace.Span
	// client is the open client span to the agent, nil when none.
	client   trace.Span
	attempts int
	begun    time.Time
	// firstEvent is how long after begun the buyer got the stream's first
	// event; events how many it got.
	firstEvent time.Duration
	events     int
	ended      bool
}

// exchangeCarrier reads the buyer's trace headers for the propagator.
type exchangeCarrier struct{ x exchange }

func (c exchangeCarrier) Get(key string) string { return c.x.Header(key) }
func (c exchangeCarrier) Set(string, string)    {}
func (c exchangeCarrier) Keys() []string        { return []string{"traceparent", "tracestate"} }

// headerPairs writes the propagator's headers into an agentRequest's
// name, value pairs.
type headerPairs struct{ h *[]string }

func (c headerPairs) Get(string) string     { return "" }
func (c headerPairs) Set(key, value string) { *c.h = append(*c.h, key, value) }
func (c headerPairs) Keys() []string        { return nil }

// startClient opens the client span of a request to the agent (ending the
// one before it: a retry, the next settling poll) and returns h with its
// traceparent and tracestate, so that the agent's spans are its children.
func (s *callSpan) startClient(cl *call, ar agentRequest, name string, h []string) []string {
	s.endClient(0, nil)
	s.attempts++
	attrs := []attribute.KeyValue{attrHTTPMethod.String(ar.method), attrAttempt.Int(s.attempts),
		attrAgentBinding.String(cl.iface.Binding), attrAgentVersion.String(string(cl.upVersion))}
	if u, err := url.Parse(ar.url); err == nil {
		attrs = append(attrs, attrServer.String(u.Host))
	}
	ctx, span := s.t.tracer.Start(s.ctx, "a2a agent "+name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	s.client = span
	s.t.prop.Inject(ctx, headerPairs{&h})
	return h
}

// endClient ends the open client span, if any, with the agent's HTTP
// status (0: none) or the transport's error.
func (s *callSpan) endClient(status int, err error) {
	if s.client == nil {
		return
	}
	if status > 0 {
		s.client.SetAttributes(attrHTTPStatus.Int(status))
		if status >= 500 {
			s.client.SetStatus(codes.Error, http.StatusText(status))
		}
	}
	if err != nil {
		s.client.RecordError(err)
		s.client.SetStatus(codes.Error, err.Error())
	}
	s.client.End()
	s.client = nil
}

// event counts an event relayed to the buyer of a stream.
func (s *callSpan) event() {
	if s.events == 0 {
		s.firstEvent = nowWall().Sub(s.begun)
	}
	s.events++
}

// end ends the call's spans with what the call became: u is its usage row
// (nil for a call refused before it was attributed), code its JSON-RPC
// error code (0: none).
func (s *callSpan) end(cl *call, u *metering.Usage, code int) {
	if s.ended {
		return
	}
	s.ended = true
	if s.client != nil && code != 0 {
		s.client.SetAttributes(attrErrorCode.Int(code))
	}
	s.endClient(0, nil)
	attrs := make([]attribute.KeyValue, 0, 24)
	if cl.req != nil {
		name := cl.req.Name
		switch {
		case cl.cancelBy != "":
			s.span.SetName("a2a cancel by " + cl.cancelBy)
			attrs = append(attrs, attrCallKind.String("cancel"), attrCanceledBy.String(cl.cancelBy))
		case cl.label != "":
			s.span.SetName("a2a " + cl.label)
			attrs = append(attrs, attrCallKind.String(cl.label))
		default:
			s.span.SetName("a2a " + name)
		}
		binding := "JSONRPC"
		if cl.buyerREST() {
			binding = "HTTP+JSON"
		}
		attrs = append(attrs, attrMethod.String(name), attrVersion.String(string(cl.req.Version)), attrBinding.String(binding))
		if cl.req.Method.Streaming() {
			attrs = append(attrs, attrEvents.Int(s.events))
			if s.events > 0 {
				attrs = append(attrs, attrFirstEvent.Float64(float64(s.firstEvent.Microseconds())/1000))
			}
		}
	}
	if cl.iface.Binding != "" {
		attrs = append(attrs, attrAgentBinding.String(cl.iface.Binding), attrAgentVersion.String(string(cl.upVersion)))
	}
	if cl.target != nil {
		attrs = append(attrs, attrListing.String(cl.target.ListingID), attrSeller.String(cl.target.SellerOrgID))
	}
	if cl.actor.OrgID != "" {
		attrs = append(attrs, attrBuyer.String(cl.actor.OrgID))
	}
	if cl.actor.KeyID != "" {
		attrs = append(attrs, attrKey.String(cl.actor.KeyID))
	}
	if u != nil {
		attrs = append(attrs, spanUsage(cl, u)...)
	} else if cl.obs.taskID != "" {
		attrs = append(attrs, attrTaskID.String(cl.obs.taskID))
	}
	if code != 0 {
		attrs = append(attrs, attrErrorCode.Int(code))
		s.span.SetStatus(codes.Error, fmt.Sprintf("JSON-RPC error %d", code))
	}
	s.span.SetAttributes(attrs...)
	s.span.End()
}

// endSpan ends the call's span, if it has one open, for a call that is
// not metered (finish ends it otherwise); code is its error code, else
// the call's own.
func (cl *call) endSpan(code int) {
	if cl.span != nil {
		if code == 0 {
			code = cl.errCode
		}
		cl.span.end(cl, nil, code)
	}
}

// spanUsage are the attributes of a metered call's usage row: its task,
// and the tokens and cost it billed when the meter decided its bill on
// the call path (else the shipper bills it later: the tokens are then the
// task's as the call observed them, and no cost is known yet).
func spanUsage(cl *call, u *metering.Usage) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	if u.TaskID != "" {
		attrs = append(attrs, attrTaskID.String(u.TaskID))
	}
	if u.ContextID != "" {
		attrs = append(attrs, attrContextID.String(u.ContextID))
	}
	if u.State != "" {
		attrs = append(attrs, attrTaskState.String(u.State))
	}
	if u.Billed != nil {
		attrs = append(attrs, attrInputTokens.Int64(u.InputTokens), attrOutputTokens.Int64(u.OutputTokens),
			attrCost.Int64(u.CostMicros))
	} else if cl.seen != (metering.Counters{}) {
		attrs = append(attrs, attrInputTokens.Int64(cl.seen.InputTokens), attrOutputTokens.Int64(cl.seen.OutputTokens))
	}
	if u.Billed != nil || cl.seen != (metering.Counters{}) {
		attrs = append(attrs, attrEstimated.Bool(u.Estimated))
	}
	if u.Currency != "" {
		attrs = append(attrs, attrCurrency.String(u.Currency))
	}
	return attrs
}

// traceBackground opens the span of a call the meter makes on its own (a
// cancel, a push notification it meters). Under the caller's span when
// the call carries a real one (the agent's traceparent on a push
// notification), sampled as that span was; otherwise (a cancel requested
// by a buyer's call, a cascade, a sweep: only the trace id is kept) a root
// span of its own, which the sampler decides on like any other, naming
// the trace the call carries (the usage row's trace id) in an attribute:
// a parent id that no span has would leave the span an orphan, and
// forcing it sampled would bypass the configured ratio.
func (p *Proxy) traceBackground(cl *call) {
	ctx := p.Base
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
	if parent := trace.SpanID(cl.trace.parent); parent.IsValid() {
		var flags trace.TraceFlags
		if cl.trace.flags == "01" || cl.trace.flags == "03" {
			flags = trace.FlagsSampled
		}
		ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: mustTraceID(cl.trace.traceID),
			SpanID: parent, TraceFlags: flags, Remote: true}))
	} else {
		opts = append(opts, trace.WithNewRoot(), trace.WithAttributes(attrCarriedTrace.String(cl.trace.traceID)))
	}
	ctx, span := p.tracing.tracer.Start(ctx, "a2a background call", opts...)
	cl.span = &callSpan{t: p.tracing, ctx: ctx, span: span, begun: nowWall()}
}

func mustTraceID(s string) trace.TraceID {
	id, _ := trace.TraceIDFromHex(s)
	return id
}

// deliverTraced is deliver under a client span of its own, when the meter
// traces: a push delivery's trace begins with it (a delivery keeps no
// trace of the call that caused it), and the webhook gets its
// traceparent.
func (p *Proxy) deliverTraced(ctx context.Context, d contracts.Delivery) (pushqueue.Outcome, string) {
	if p.tracing == nil {
		return p.deliver(ctx, d)
	}
	ctx, span := p.tracing.tracer.Start(ctx, "a2a push delivery", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attrDeliveryID.String(d.ID), attrListing.String(d.ListingID), attrTaskID.String(d.TaskID), attrBuyer.String(d.OrgID),
		attrAttempt.Int(d.Attempts+1), attrServer.String(d.Destination)))
	out, last := p.deliver(ctx, d)
	if !out.OK {
		span.SetStatus(codes.Error, last)
	}
	span.End()
	return out, last
}

// injectTrace writes the trace of ctx into h, when the meter traces.
func (p *Proxy) injectTrace(ctx context.Context, h http.Header) {
	if p.tracing != nil {
		p.tracing.prop.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// observe records a latency into o with an exemplar naming the call's
// trace, when the call's span is sampled: Prometheus then links the
// histogram's bucket to the trace (exemplars are served in the
// OpenMetrics format).
func (s *callSpan) observe(o prometheus.Observer, v float64) {
	sc := s.span.SpanContext()
	if eo, ok := o.(prometheus.ExemplarObserver); ok && sc.IsSampled() {
		eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": sc.TraceID().String()})
		return
	}
	o.Observe(v)
}
