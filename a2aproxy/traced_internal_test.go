package a2aproxy

import (
	"bufio"
	"context"
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
