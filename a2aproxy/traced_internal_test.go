package a2aproxy

import (
	"bufio"
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// bareExchange is an exchange with no headers that answers nothing.
type bareExchange struct{}

func (bareExchange) Context() context.Context                    { return context.Background() }
func (bareExchange) Header(string) string                        { return "" }
func (bareExchange) Answer(int, string, []byte, ...string) error { return nil }
func (bareExchange) Stream(func(*bufio.Writer), ...string) error { return nil }

// TestTracedStagePanics: a stage after the tracing stage panics; the
// call's server span is still ended and exported, as an internal error,
// and the panic goes on.
func TestTracedStagePanics(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	stage := traced{t: newSpanMaker(tp.Tracer("a2aproxy"))}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic was swallowed")
			}
		}()
		_ = stage.serve(&call{x: bareExchange{}, listingID: "lst_1"}, func(*call) error { panic("a stage broke") })
	}()
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Status.Description != "JSON-RPC error -32603" {
		t.Errorf("spans after a panic: %+v, want the server span ended as -32603", spans)
	}
}

// TestBackgroundSpanParent: a background call that carries a real parent
// span (an agent's traceparent) is its child, sampled as it was; one that
// carries only a trace id is a root span the sampler decides on (a ratio
// of 0 keeps none), naming the carried trace.
func TestBackgroundSpanParent(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	never := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0))))
	defer never.Shutdown(context.Background())
	p := &Proxy{Base: context.Background(), tracing: newSpanMaker(never.Tracer("a2aproxy"))}

	const agentTrace, agentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	cl := &call{trace: parseTraceparent("00-" + agentTrace + "-" + agentSpan + "-01")}
	p.traceBackground(cl)
	cl.span.span.End()
	cancel := &call{trace: traceContext{traceID: "0af7651916cd43dd8448eb211c80319c", spanID: randomHex(8), flags: "01"}}
	p.traceBackground(cancel)
	cancel.span.span.End()
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].SpanContext.TraceID().String() != agentTrace || spans[0].Parent.SpanID().String() != agentSpan {
		t.Fatalf("spans with a ratio of 0: %+v, want only the push's, under the agent's span", spans)
	}

	exp.Reset()
	always := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer always.Shutdown(context.Background())
	p.tracing = newSpanMaker(always.Tracer("a2aproxy"))
	p.traceBackground(cancel)
	cancel.span.span.End()
	spans = exp.GetSpans()
	if len(spans) != 1 || spans[0].Parent.IsValid() {
		t.Fatalf("the cancel's span: %+v, want a root span", spans)
	}
	var carried string
	for _, kv := range spans[0].Attributes {
		if kv.Key == "agentmarket.trace.carried_id" {
			carried = kv.Value.AsString()
		}
	}
	if carried != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("agentmarket.trace.carried_id = %q, want the cancel's trace", carried)
	}
}

// TestRandomHex: ids of 8, 12 and 16 bytes in lower-case hex, each new,
// and one allocation (the string) each.
func TestRandomHex(t *testing.T) {
	seen := map[string]bool{}
	for _, n := range []int{8, 12, 16} {
		for range 1000 {
			s := randomHex(n)
			if len(s) != 2*n || strings.Trim(s, "0123456789abcdef") != "" || seen[s] {
				t.Fatalf("randomHex(%d) = %q (seen before: %v)", n, s, seen[s])
			}
			seen[s] = true
		}
	}
	if a := testing.AllocsPerRun(100, func() { _ = randomHex(16) }); a > 1 {
		t.Errorf("randomHex allocates %v times, want 1", a)
	}
}
