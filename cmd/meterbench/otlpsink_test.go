package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TestOTLPSinkTakesTheSDKsExports: the OpenTelemetry SDK's own OTLP/HTTP
// exporter, the one the meter uses, exports spans to the sink without an
// error, and the sink counts them.
func TestOTLPSinkTakesTheSDKsExports(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sink, err := startOTLPSink(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.stop()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(sink.url+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	for range 3 {
		_, span := tp.Tracer("meterbench").Start(ctx, "call")
		span.End()
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("the exporter's shutdown: %v", err)
	}
	if got := sink.exports.Load(); got != 3 || sink.bytes.Load() == 0 {
		t.Errorf("the sink counted %d exports (%d bytes), want 3", got, sink.bytes.Load())
	}
	if d := sink.detail(); !strings.Contains(d, "3 exports") {
		t.Errorf("detail: %s", d)
	}
}
