package main

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it takes what an
// OpenTelemetry exporter posts to /v1/traces (protobuf) and keeps the
// spans, with their service.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []receivedSpan
}

type receivedSpan struct {
	service string
	*tracepb.Span
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var in coltracepb.ExportTraceServiceRequest
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" || err != nil || proto.Unmarshal(body, &in) != nil {
			http.Error(w, "not an OTLP/HTTP protobuf export", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range in.ResourceSpans {
			service := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					r.spans = append(r.spans, receivedSpan{service: service, Span: s})
				}
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *otlpReceiver) received() []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receivedSpan(nil), r.spans...)
}

// attrs are a span's attributes, printed.
func (s receivedSpan) attrs() map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.Key] = strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			out[kv.Key] = strconv.FormatBool(v.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			out[kv.Key] = strconv.FormatFloat(v.DoubleValue, 'f', -1, 64)
		}
	}
	return out
}

// TestTracesToOTLP: with AGENTMARKET_OTEL_ENDPOINT set, one buyer call
// through the real meter (the embedded one, its real OTLP/HTTP exporter)
// to an official SDK agent reaches an OTLP receiver as connected spans: a
// server span, child of the buyer's traceparent, in the buyer's trace,
// and a client span, its child; the SDK agent's execution gets a
// traceparent that names that client span, so that the agent's own spans
// join the buyer's trace. The spans say which call it was, and the usage
// shipper's batches are spans too.
func TestTracesToOTLP(t *testing.T) {
	recv := startOTLPReceiver(t)
	m := startMarketplace(t, map[string]string{"AGENTMARKET_OTEL_ENDPOINT": recv.URL, "AGENTMARKET_OTEL_PROTOCOL": "http/protobuf"})
	api := client{t: t, base: m.URL}
	sellerOrg, seller := signup(t, api, "Acme Agents", "owner@acme.example")
	buyerOrg, buyerKey := signup(t, api, "Globex", "it@globex.example")
	ag := startSDKAgent(t, "1.0", a2a.TransportProtocolJSONRPC)
	r := api.with(seller).do("POST", "/api/v1/listings", map[string]any{"card_url": ag.URL, "pricing": pricing})
	if r.Status != 201 {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	listing := r.str("id")
	if r = api.with(buyerKey).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": listing}); r.Status != 201 {
		t.Fatalf("subscribe: %d %s", r.Status, r.Body)
	}
	endpoint := r.str("endpoint")

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-otel","role":"ROLE_USER","parts":[{"text":"trace me"}]}}}`
	req, _ := http.NewRequest("POST", endpoint, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+buyerKey)
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(answer), "TASK_STATE_COMPLETED") {
		t.Fatalf("send: %d %s", res.StatusCode, answer)
	}
	// Stopping the marketplace shuts the tracer provider down, which
	// exports what it batched.
	m.stop(t)

	var server, clientSpan *receivedSpan
	batches := 0
	spans := recv.received()
	for i, s := range spans {
		switch {
		case s.Name == "a2a SendMessage" && s.Kind == tracepb.Span_SPAN_KIND_SERVER:
			server = &spans[i]
		case strings.HasPrefix(s.Name, "a2a agent ") && s.Kind == tracepb.Span_SPAN_KIND_CLIENT:
			clientSpan = &spans[i]
		case s.Name == "usage batch insert":
			batches++
		}
	}
	if server == nil || clientSpan == nil {
		t.Fatalf("no server and client spans of the call among %d received: %v", len(spans), spans)
	}
	if got := hex.EncodeToString(server.TraceId); got != traceID || hex.EncodeToString(server.ParentSpanId) != parentID {
		t.Errorf("server span in trace %s under %x, want the buyer's %s under %s", got, server.ParentSpanId, traceID, parentID)
	}
	if hex.EncodeToString(clientSpan.TraceId) != traceID || hex.EncodeToString(clientSpan.ParentSpanId) != hex.EncodeToString(server.SpanId) {
		t.Errorf("client span in trace %x under %x, want under the server span %x", clientSpan.TraceId, clientSpan.ParentSpanId, server.SpanId)
	}
	if server.service != "agentmarket-marketplace" {
		t.Errorf("service.name %q", server.service)
	}
	got := server.attrs()
	for k, want := range map[string]string{"a2a.method": "SendMessage", "a2a.version": "1.0", "a2a.binding": "JSONRPC",
		"a2a.agent.binding": "JSONRPC", "a2a.task.state": "completed", "agentmarket.listing.id": listing,
		"agentmarket.seller.org_id": sellerOrg, "agentmarket.buyer.org_id": buyerOrg} {
		if got[k] != want {
			t.Errorf("server span %s = %q, want %q", k, got[k], want)
		}
	}
	for _, k := range []string{"a2a.task.id", "a2a.context.id", "agentmarket.key.id", "agentmarket.tokens.output", "agentmarket.cost.micros"} {
		if got[k] == "" {
			t.Errorf("server span has no %s: %v", k, got)
		}
	}
	if batches == 0 {
		t.Errorf("no span of the shipper's batches among %d", len(spans))
	}
	tp, ok := ag.Exec.traceparents.Load("trace me")
	if want := "00-" + traceID + "-" + hex.EncodeToString(clientSpan.SpanId) + "-01"; !ok || tp != want {
		t.Errorf("the SDK agent's execution got traceparent %v, want the meter's client span's %s", tp, want)
	}
}
