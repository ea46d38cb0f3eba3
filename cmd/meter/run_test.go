package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/migrations/gormdb/gormdbtest"
)

// TestMeterServesOps starts the real meter on PostgreSQL and checks its
// health, readiness and metrics endpoints.
func TestMeterServesOps(t *testing.T) {
	dsn := gormdbtest.PostgresDSN(t)
	vars := map[string]string{
		"AGENTMARKET_METER_ADDR":   "127.0.0.1:0",
		"AGENTMARKET_DATABASE_URL": dsn,
		"AGENTMARKET_SECRET_KEY":   "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
		"AGENTMARKET_DATA_DIR":     t.TempDir(),
		"AGENTMARKET_LOG_LEVEL":    "warn",
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, nil, func(k string) string { return vars[k] }, pw)
		pw.CloseWithError(fmt.Errorf("run returned: %v", err))
		done <- err
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	var base string
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if _, after, ok := strings.Cut(sc.Text(), "listening on "); ok {
			base = after
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if base == "" {
		t.Fatal("meter never listened")
	}
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
