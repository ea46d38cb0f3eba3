package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// meterProcess is a meter running in this test process through run().
type meterProcess struct {
	URL    string
	Output *syncBuffer
}

// runMeter runs the real meter's run() in this process on PostgreSQL with
// extra settings, waits for its whole banner, and stops it when the test
// ends.
func runMeter(t *testing.T, extra map[string]string) *meterProcess {
	t.Helper()
	dsn := relationaltest.PostgresDSN(t)
	vars := map[string]string{
		"AGENTMARKET_METER_ADDR":   "127.0.0.1:0",
		"AGENTMARKET_DATABASE_URL": dsn,
		"AGENTMARKET_SECRET_KEY":   "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
		"AGENTMARKET_DATA_DIR":     t.TempDir(),
		"AGENTMARKET_LOG_LEVEL":    "warn",
	}
	for k, v := range extra {
		vars[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &meterProcess{Output: &syncBuffer{}}
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, func(k string) string { return vars[k] }, m.Output) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := m.Output.String()
		if _, after, ok := strings.Cut(out, "listening on "); ok && strings.Contains(after, "  public URL ") {
			m.URL, _, _ = strings.Cut(after, "\n")
			return m
		}
		select {
		case err := <-done:
			t.Fatalf("meter exited before listening: %v\n%s", err, out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("meter did not start within 30s:\n%s", out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMeterServesOps starts the real meter on PostgreSQL and checks its
// health, readiness and metrics endpoints.
func TestMeterServesOps(t *testing.T) {
	base := runMeter(t, nil).URL
	client := &http.Client{Timeout: 5 * time.Second}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		res, err := client.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("%s = %d %s", p, res.StatusCode, body)
		}
		if p == "/metrics" && !strings.Contains(string(body), "agentmarket_meter_http_requests_total") {
			t.Errorf("/metrics lacks the request counter")
		}
	}

	// Oversize URLs and headers are answered 431 in the API's error shape,
	// on the ops paths and the meter's own alike.
	send := func(method, path string, header http.Header, body []byte) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(body))
		for k, v := range header {
			req.Header[k] = v
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	long := strings.Repeat("x", 5000)
	for _, p := range []string{"/healthz", "/a2a/lst_x/.well-known/agent-card.json"} {
		if status, body := send("GET", p+"?q="+long, nil, nil); status != 431 || !strings.Contains(body, `"code":"headers_too_large"`) {
			t.Errorf("GET %s with a 5000-byte URL: %d %s, want 431 headers_too_large", p, status, body)
		}
		if status, body := send("GET", p, http.Header{"X-Padding": {long}}, nil); status != 431 || !strings.Contains(body, `"code":"headers_too_large"`) {
			t.Errorf("GET %s with a 5000-byte header: %d %s, want 431 headers_too_large", p, status, body)
		}
	}
	// Bodies: 1 MiB off the meter's paths; on them, the meter's own limit,
	// answered in JSON-RPC.
	big := bytes.Repeat([]byte("x"), 3<<19)
	if status, body := send("POST", "/healthz", nil, big); status != 413 || !strings.Contains(body, `"code":"body_too_large"`) {
		t.Errorf("1.5 MiB POST /healthz: %d %.200s, want 413 body_too_large", status, body)
	}
	if status, body := send("POST", "/a2a/lst_x", http.Header{"Content-Type": {"application/json"}}, big); status == 413 || !strings.Contains(body, `"jsonrpc":"2.0"`) {
		t.Errorf("1.5 MiB POST /a2a/lst_x: %d %.200s, want the meter's JSON-RPC answer", status, body)
	}
}

// TestMeterOperatorListener (issue 23, item 4): with
// AGENTMARKET_METRICS_ADDR the meter serves /metrics there only, named in
// its banner; its public listener answers /metrics 404 and still answers
// the probes.
func TestMeterOperatorListener(t *testing.T) {
	m := runMeter(t, map[string]string{"AGENTMARKET_METRICS_ADDR": "127.0.0.1:0"})
	found := regexp.MustCompile(`\n  metrics +(http://127\.0\.0\.1:\d+)/metrics, on the operator listener only\n`).FindStringSubmatch(m.Output.String())
	if found == nil || found[1] == m.URL {
		t.Fatalf("the banner does not name an operator listener of its own:\n%s", m.Output)
	}
	get := func(url string) (int, string) {
		t.Helper()
		res, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if status, body := get(m.URL + "/metrics"); status != 404 || strings.Contains(body, "agentmarket_") {
		t.Errorf("public /metrics = %d %.300s, want 404", status, body)
	}
	for _, base := range []string{m.URL, found[1]} {
		for _, p := range []string{"/healthz", "/readyz"} {
			if status, body := get(base + p); status != 200 {
				t.Errorf("%s%s = %d %s", base, p, status, body)
			}
		}
	}
	if status, body := get(found[1] + "/metrics"); status != 200 || !strings.Contains(body, "agentmarket_meter_http_requests_total") ||
		!strings.Contains(body, "agentmarket_meter_spool_rows") {
		t.Errorf("operator /metrics = %d, lacks the meter's series", status)
	}
}

// TestMeterReportsDependencies: the meter names PostgreSQL and an
// unreachable ClickHouse at start, and stays ready while its spool takes
// the usage, saying so in /readyz.
func TestMeterReportsDependencies(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	chAddr := ln.Addr().String()
	ln.Close()
	m := runMeter(t, map[string]string{"AGENTMARKET_CLICKHOUSE_URL": "clickhouse://" + chAddr + "/default"})
	out := m.Output.String()
	for _, want := range []string{
		"  database     PostgreSQL at 127.0.0.1:",
		": up, PostgreSQL ",
		"  usage_store  ClickHouse at " + chAddr + "/default: DOWN (the usage store (ClickHouse) failed: connection refused); serving without it: calls go on",
		"  spool        usage spool at ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the banner lacks %q:\n%s", want, out)
		}
	}
	res, err := http.Get(m.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var r struct {
		Status string
		Checks map[string]struct{ State, Detail, Error, Impact string }
	}
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || r.Status != "degraded" || r.Checks["usage_store"].State != "down" ||
		!strings.Contains(r.Checks["usage_store"].Impact, "waits in the spool") || r.Checks["database"].State != "up" ||
		r.Checks["spool"].Detail != "0 rows (0 bytes) waiting to ship" {
		t.Errorf("/readyz = %d %+v", res.StatusCode, r)
	}
}
