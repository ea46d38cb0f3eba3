package serve

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/agentmarket/agentmarket/cmd/internal/config"
)

// Tracing builds the OpenTelemetry tracer provider of the binary named
// service from the OTLP settings (AGENTMARKET_OTEL_*), or returns nil
// when AGENTMARKET_OTEL_ENDPOINT is empty: then nothing is traced and
// nothing is spent on it. The exporter connects lazily: a collector that
// is down costs spans, never the start or a call. Shutdown (Core.Close,
// after the meter has stopped) flushes the spans still batched.
func Tracing(ctx context.Context, cfg config.OTel, service string) (*sdktrace.TracerProvider, error) {
	if cfg.Endpoint == "" {
		return nil, nil
	}
	exp, err := otlpExporter(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter (AGENTMARKET_OTEL_ENDPOINT): %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("agentmarket-"+service)))
	if err != nil {
		res = resource.Default()
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		// A buyer's sampled flag is followed, so that the meter's spans are
		// there whenever the buyer's and the agent's are.
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
	), nil
}

// otlpExporter is the OTLP exporter cfg names: over HTTP (protobuf) or
// gRPC, TLS unless the endpoint is an http:// URL or Insecure is set.
func otlpExporter(ctx context.Context, cfg config.OTel) (sdktrace.SpanExporter, error) {
	endpoint, path, insecure := cfg.Endpoint, "", cfg.Insecure
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil {
			return nil, err
		}
		endpoint, path, insecure = u.Host, u.Path, u.Scheme == "http"
	}
	if cfg.Protocol == "grpc" {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(endpoint), otlptracegrpc.WithHeaders(cfg.Headers)}
		if insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	if path == "" || path == "/" {
		path = "/v1/traces"
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(endpoint), otlptracehttp.WithURLPath(path), otlptracehttp.WithHeaders(cfg.Headers)}
	if insecure {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	return otlptracehttp.New(ctx, opts...)
}
