package a2aproxy

import (
	"errors"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// traced is the chain's first stage when tracing is on (Proxy.Tracer,
// issue 27): it opens the call's server span, a child of the buyer's
// traceparent and tracestate as the SDK's W3C propagator reads them, and
// makes the call's trace (cl.trace: the usage row's trace id, the
// traceparent answered to the buyer) that span's. The span ends when the
// call is metered (finish, spans.go), with what the call became: its
// task, state, tokens, cost and error code; or here, for a call refused
// before it was known whose it was (fail meters none).
//
// First in the chain, so that refusals (a bad key, a budget) are traced
// too. Without a Tracer the stage is not composed at all (Proxy.traced):
// a call then pays nothing for tracing, and the hand-written context of
// trace.go carries the buyer's trace id on, as before.
type traced struct{ t *spanMaker }

func (s traced) serve(cl *call, next handler) error {
	ctx := s.t.prop.Extract(cl.x.Context(), exchangeCarrier{cl.x})
	ctx, span := s.t.tracer.Start(ctx, "a2a call", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attrListing.String(cl.listingID)))
	cl.span = &callSpan{t: s.t, ctx: ctx, span: span, begun: nowWall()}
	cl.trace = traceOf(span.SpanContext())
	returned := false
	defer func() {
		if !returned {
			// A stage panicked: the span is not lost with the call (the
			// panic goes on to Fiber's recover).
			cl.span.end(cl, nil, wire.CodeInternalError)
		}
	}()
	err := next(cl)
	returned = true
	if err != nil && (cl.target == nil || cl.contract == nil) {
		cl.span.end(cl, nil, refusalCode(err))
	}
	return err
}

// refusalCode is the JSON-RPC code fail answers err with.
func refusalCode(err error) int {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Code
	}
	return toRPC(err).Code
}

// traced returns the chain's stages with the tracing stage first when
// the meter traces, as they are otherwise.
func (p *Proxy) traced(stages []stage) []stage {
	if p.Tracer == nil {
		return stages
	}
	p.tracing = newSpanMaker(p.Tracer)
	return append([]stage{traced{t: p.tracing}}, stages...)
}
