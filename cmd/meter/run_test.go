package main

import (
	"bufio"
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
}
