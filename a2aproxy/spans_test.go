package a2aproxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmarket/agentmarket/a2aproxy"
)

const (
	buyerTrace  = "0af7651916cd43dd8448eb211c80319c"
	buyerParent = "b7ad6b7169203331"
)

// startTracedCore is startCore with the meter's spans recorded in memory.
func startTracedCore(t *testing.T, agent *coreAgent, inMemory bool) (*fiber.App, *coreMarket, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(t.Context()) })
	p, m := newCoreProxy(t, agent, nil)
	p.Tracer = tp.Tracer("a2aproxy")
	p.BillInMemory = inMemory
	app, m := mountCore(p, m)
	return app, m, exp
}

// doTraced sends a buyer's 1.0 request with a traceparent and tracestate.
func doTraced(t *testing.T, app *fiber.App, key, body string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest("POST", "/a2a/lst_core", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("traceparent", "00-"+buyerTrace+"-"+buyerParent+"-01")
	req.Header.Set("tracestate", "buyer=orchestrator-7")
	res, err := app.Test(req, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func attrsOf(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		out[kv.Key] = kv.Value
	}
	return out
}

func spansOfKind(spans tracetest.SpanStubs, kind trace.SpanKind) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.SpanKind == kind {
			out = append(out, s)
		}
	}
	return out
}

// wantAttrs checks the attributes a span must carry, by their values'
// printed form.
func wantAttrs(t *testing.T, what string, s tracetest.SpanStub, want map[string]string) {
	t.Helper()
	got := attrsOf(s)
	for k, v := range want {
		if g, ok := got[attribute.Key(k)]; !ok || g.Emit() != v {
			t.Errorf("%s: %s = %q (present: %v), want %q", what, k, g.Emit(), ok, v)
		}
	}
}

// TestSpansOfASend: with a tracer, one buyer send through the meter is a
// server span, child of the buyer's traceparent, and a client span, child
// of the server span, in the buyer's trace; the agent gets the client
// span's traceparent and the buyer's tracestate, the buyer's answer names
// the server span, and the usage row carries the buyer's trace id as
// without a tracer. The server span says what the call was (method,
// version, bindings, task, context, state, listing, seller, buyer, key,
// tokens, cost); the client span what the agent answered.
func TestSpansOfASend(t *testing.T) {
	agent := startCoreAgent(t, "1.0")
	app, m, exp := startTracedCore(t, agent, true)
	res, body := doTraced(t, app, "amk_acme", send10)
	if res.StatusCode != 200 || !strings.Contains(body, `"task-1"`) {
		t.Fatalf("answer: %d %s", res.StatusCode, body)
	}
	spans := exp.GetSpans()
	servers, clients := spansOfKind(spans, trace.SpanKindServer), spansOfKind(spans, trace.SpanKindClient)
	if len(servers) != 1 || len(clients) != 1 {
		t.Fatalf("%d server and %d client spans, want one each: %+v", len(servers), len(clients), spans)
	}
	srv, cli := servers[0], clients[0]
	if srv.SpanContext.TraceID().String() != buyerTrace || srv.Parent.SpanID().String() != buyerParent || !srv.Parent.IsRemote() {
		t.Errorf("server span in trace %s under %s, want the buyer's %s under %s", srv.SpanContext.TraceID(), srv.Parent.SpanID(), buyerTrace, buyerParent)
	}
	if cli.SpanContext.TraceID() != srv.SpanContext.TraceID() || cli.Parent.SpanID() != srv.SpanContext.SpanID() {
		t.Errorf("client span %s under %s, want under the server span %s", cli.SpanContext.TraceID(), cli.Parent.SpanID(), srv.SpanContext.SpanID())
	}
	h := agent.requests()[0].header
	if want := "00-" + buyerTrace + "-" + cli.SpanContext.SpanID().String() + "-01"; h.Get("traceparent") != want {
		t.Errorf("traceparent at the agent %q, want the client span's %q", h.Get("traceparent"), want)
	}
	if h.Get("tracestate") != "buyer=orchestrator-7" {
		t.Errorf("tracestate at the agent %q, want the buyer's", h.Get("tracestate"))
	}
	if want := "00-" + buyerTrace + "-" + srv.SpanContext.SpanID().String() + "-01"; res.Header.Get("traceparent") != want {
		t.Errorf("traceparent answered %q, want the server span's %q", res.Header.Get("traceparent"), want)
	}
	if rows := m.usage(); len(rows) != 1 || rows[0].TraceID != buyerTrace {
		t.Errorf("usage rows %+v, want one with the buyer's trace id", rows)
	}
	if srv.Name != "a2a SendMessage" || srv.Status.Code == codes.Error {
		t.Errorf("server span %q status %v", srv.Name, srv.Status)
	}
	wantAttrs(t, "server span", srv, map[string]string{
		"a2a.method": "SendMessage", "a2a.version": "1.0", "a2a.binding": "JSONRPC", "a2a.agent.binding": "JSONRPC", "a2a.agent.version": "1.0",
		"a2a.task.id": "task-1", "a2a.context.id": "ctx-1", "a2a.task.state": "completed",
		"agentmarket.listing.id": "lst_core", "agentmarket.seller.org_id": "org_seller", "agentmarket.buyer.org_id": "org_acme", "agentmarket.key.id": "key_acme",
		// 12 input tokens at 1 unit a million, 34 output at 2: 12 + 68 micros.
		"agentmarket.tokens.input": "12", "agentmarket.tokens.output": "34", "agentmarket.tokens.estimated": "false",
		"agentmarket.cost.micros": "80", "agentmarket.cost.currency": "usd",
	})
	if _, ok := attrsOf(srv)["a2a.error.code"]; ok {
		t.Errorf("a successful call has an error code: %v", attrsOf(srv))
	}
	wantAttrs(t, "client span", cli, map[string]string{"http.request.method": "POST", "http.response.status_code": "200", "agentmarket.attempt": "1",
		"server.address": strings.TrimPrefix(agent.URL, "http://")})
}

// TestSpansOfAStream: a stream's server span counts the events the buyer
// got and says when the first came; its client span lasts the stream.
func TestSpansOfAStream(t *testing.T) {
	agent := startCoreAgent(t, "1.0")
	app, _, exp := startTracedCore(t, agent, false)
	stream := `{"jsonrpc":"2.0","id":8,"method":"SendStreamingMessage","params":{"message":{"messageId":"m-s","role":"ROLE_USER","parts":[{"text":"go"}]}}}`
	res, body := doTraced(t, app, "amk_acme", stream)
	if res.StatusCode != 200 || strings.Count(body, "data:") != 2 {
		t.Fatalf("answer: %d %s", res.StatusCode, body)
	}
	servers := spansOfKind(exp.GetSpans(), trace.SpanKindServer)
	if len(servers) != 1 {
		t.Fatalf("%d server spans", len(servers))
	}
	srv := servers[0]
	wantAttrs(t, "stream span", srv, map[string]string{"a2a.method": "SendStreamingMessage", "a2a.stream.events": "2", "a2a.task.id": "task-s",
		"a2a.task.state": "completed", "agentmarket.tokens.input": "3", "agentmarket.tokens.output": "4"})
	if v, ok := attrsOf(srv)["a2a.stream.time_to_first_event_ms"]; !ok || v.AsFloat64() <= 0 {
		t.Errorf("time to first event %v (present: %v)", v.AsFloat64(), ok)
	}
	if _, ok := attrsOf(srv)["agentmarket.cost.micros"]; ok {
		t.Errorf("a row billed later by the shipper has a cost on its span: %v", attrsOf(srv))
	}
}

// TestSpanOfARefusal: a call refused before it is attributed (a bad key)
// is a server span with the refusal's code, and no call to the agent.
func TestSpanOfARefusal(t *testing.T) {
	agent := startCoreAgent(t, "1.0")
	app, _, exp := startTracedCore(t, agent, false)
	res, body := doTraced(t, app, "amk_nobody", send10)
	if res.StatusCode != 401 && !strings.Contains(body, "error") {
		t.Fatalf("answer: %d %s", res.StatusCode, body)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].SpanKind != trace.SpanKindServer {
		t.Fatalf("spans %+v, want the server span alone", spans)
	}
	wantAttrs(t, "refused span", spans[0], map[string]string{"a2a.error.code": strconv.Itoa(a2aproxy.CodeUnauthorized)})
	if spans[0].Status.Code != codes.Error || spans[0].SpanContext.TraceID().String() != buyerTrace {
		t.Errorf("refused span status %v trace %s", spans[0].Status, spans[0].SpanContext.TraceID())
	}
}
