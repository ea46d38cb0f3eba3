package serve_test

import (
	"context"
	"net"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/agentmarket/agentmarket/cmd/internal/config"
	"github.com/agentmarket/agentmarket/cmd/internal/serve"
)

// grpcReceiver is an OTLP/gRPC trace receiver that keeps the names of the
// spans it gets and the service they came from.
type grpcReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu      sync.Mutex
	names   []string
	service string
}

func (r *grpcReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				r.service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.names = append(r.names, s.Name)
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// TestTracingOverGRPC: with --otel-protocol grpc, the provider Tracing
// builds exports over OTLP/gRPC, in plaintext to an http:// endpoint, and
// its shutdown sends what it batched.
func TestTracingOverGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	recv := &grpcReceiver{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, recv)
	go srv.Serve(ln)
	defer srv.Stop()

	tp, err := serve.Tracing(t.Context(), config.OTel{Endpoint: "http://" + ln.Addr().String(), Protocol: "grpc", SampleRatio: 1}, "meter")
	if err != nil || tp == nil {
		t.Fatalf("Tracing: %v, %v", tp, err)
	}
	_, span := tp.Tracer("test").Start(t.Context(), "a2a SendMessage")
	span.End()
	if err := tp.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	if len(recv.names) != 1 || recv.names[0] != "a2a SendMessage" || recv.service != "agentmarket-meter" {
		t.Errorf("received %v from %q", recv.names, recv.service)
	}
}

// TestTracingOff: no endpoint, no provider.
func TestTracingOff(t *testing.T) {
	if tp, err := serve.Tracing(t.Context(), config.OTel{}, "meter"); tp != nil || err != nil {
		t.Errorf("Tracing without an endpoint: %v, %v", tp, err)
	}
}
