package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/metering/clickhouse/clickhousetest"
	"github.com/agentmarket/agentmarket/metering/spool"
	"github.com/agentmarket/agentmarket/metering/storetest"
)

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// waitOutput waits until the marketplace has printed want (the lines after
// "listening on" come with the services' pings, the demo's after them),
// and returns all it printed.
func waitOutput(t *testing.T, m *started, want string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(m.Output.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output within 10s:\n%s", want, m.Output)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return m.Output.String()
}

// waitBanner waits for the start banner to be printed in full.
func waitBanner(t *testing.T, m *started) string { return waitOutput(t, m, "  try: curl ") }

// operatorKey reads the operator key the marketplace wrote on first start.
func operatorKey(t *testing.T, m *started) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(m.DataDir, "operator.key"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestUnreachableClickHouse: a configured ClickHouse that does not answer
// is named at start, with the cause; /readyz says the process serves
// without it and what that costs; the usage API says why it fails.
func TestUnreachableClickHouse(t *testing.T) {
	chAddr := closedPort(t)
	m := startMarketplace(t, map[string]string{"AGENTMARKET_CLICKHOUSE_URL": "clickhouse://" + chAddr + "/default"})
	c := client{t: t, base: m.URL}

	out := waitBanner(t, m)
	for _, want := range []string{
		"usage_store  ClickHouse at " + chAddr + "/default: DOWN (the usage store (ClickHouse) failed: connection refused); serving without it:",
		"stripe       not configured: billing on the platform's own ledger",
		"listings     new ones are published at once (auto-approve)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the banner lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`database +SQLite at .*agentmarket\.db: up, SQLite 3\.\d+`).MatchString(out) {
		t.Errorf("the banner lacks the database line:\n%s", out)
	}
	if !strings.Contains(out, `"msg":"dependency down","check":"usage_store"`) {
		t.Errorf("no log line says the usage store is down:\n%s", out)
	}

	r := c.do("GET", "/readyz", nil)
	if r.Status != 200 || r.str("status") != "degraded" {
		t.Fatalf("/readyz = %d %s, want 200 degraded", r.Status, r.Body)
	}
	checks := r.JSON["checks"].(map[string]any)
	us := checks["usage_store"].(map[string]any)
	if us["state"] != "down" || us["optional"] != true || !strings.Contains(us["error"].(string), "connection refused") ||
		!strings.Contains(us["impact"].(string), "spool") {
		t.Errorf("/readyz usage_store = %v", us)
	}
	if db := checks["database"].(map[string]any); db["state"] != "up" || !strings.HasPrefix(db["detail"].(string), "SQLite 3.") {
		t.Errorf("/readyz database = %v", db)
	}
	if sp := checks["spool"].(map[string]any); sp["state"] != "up" {
		t.Errorf("/readyz spool = %v", sp)
	}
	if strings.Contains(string(r.Body), chAddr) {
		t.Errorf("/readyz shows the server's address: %s", r.Body)
	}

	r = c.with(operatorKey(t, m)).do("GET", "/api/v1/usage?group_by=listing", nil)
	if r.Status != 503 || r.code() != "usage_store" || !strings.Contains(r.str("error", "message"), "connection refused") {
		t.Errorf("GET /usage = %d %s, want 503 naming the cause", r.Status, r.Body)
	}
}

// TestClickHouseAnnounced: a ClickHouse that answers is named with its
// version, and /readyz is ready.
func TestClickHouseAnnounced(t *testing.T) {
	dsn := clickhousetest.DSN(t)
	m := startMarketplace(t, map[string]string{"AGENTMARKET_CLICKHOUSE_URL": dsn})
	if !regexp.MustCompile(`usage_store +ClickHouse at 127\.0\.0\.1:\d+/t_[0-9a-f]+: up, ClickHouse \d+\.\d+`).MatchString(waitBanner(t, m)) {
		t.Errorf("the banner lacks the usage store:\n%s", m.Output)
	}
	r := client{t: t, base: m.URL}.do("GET", "/readyz", nil)
	if r.Status != 200 || r.str("status") != "ready" {
		t.Errorf("/readyz = %d %s", r.Status, r.Body)
	}
}

// TestShutdownIsBounded: with a client that never finishes its request
// and usage that the (unreachable) store cannot take, the marketplace
// still stops within its shutdown budget, and says what it left behind.
func TestShutdownIsBounded(t *testing.T) {
	dataDir := t.TempDir()
	sp, err := spool.Open(filepath.Join(dataDir, "spool"), spool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Append(storetest.Row(1, time.Now().UTC())); err != nil {
		t.Fatal(err)
	}
	sp.Close()
	m := startMarketplace(t, map[string]string{
		"AGENTMARKET_DATA_DIR":         dataDir,
		"AGENTMARKET_CLICKHOUSE_URL":   "clickhouse://" + closedPort(t) + "/default",
		"AGENTMARKET_SHUTDOWN_TIMEOUT": "2s",
		"AGENTMARKET_LOG_LEVEL":        "info",
	})
	// Headers sent, the body never: the request stays under way.
	conn, err := net.Dial("tcp", strings.TrimPrefix(m.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("POST /api/v1/signup HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)

	t0 := time.Now()
	m.cancel()
	select {
	case err := <-m.done:
		m.stopped = true
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the marketplace did not stop within 20s")
	}
	took := time.Since(t0)
	if took > 4*time.Second { // 2 s, and room for a loaded machine; it took 15 s before
		t.Errorf("shutdown took %s with a 2s budget", took)
	}
	out := m.Output.String()
	for _, want := range []string{`"msg":"shutting down","budget":"2s"`, `"msg":"http server: requests still open after half the budget`,
		`1 usage rows stay in the spool and ship at the next start`} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %s:\n%s", want, out)
		}
	}
	if !strings.Contains(out, `"msg":"stopped"`) && !strings.Contains(out, `"msg":"shutdown budget spent`) {
		t.Errorf("the log does not say the process stopped:\n%s", out)
	}
}

// TestClickHouseClusterMode: with a cluster name, the marketplace runs its
// usage store on the cluster (the tables made on every node at start) and
// says so.
func TestClickHouseClusterMode(t *testing.T) {
	cluster, nodes := clickhousetest.Cluster(t)
	m := startMarketplace(t, map[string]string{"AGENTMARKET_CLICKHOUSE_URL": nodes[0], "AGENTMARKET_CLICKHOUSE_CLUSTER": cluster})
	if !regexp.MustCompile(`usage_store +ClickHouse at 127\.0\.0\.1:\d+/t_[0-9a-f]+ \(cluster ` + cluster + `\): up, ClickHouse \d+\.\d+`).MatchString(waitBanner(t, m)) {
		t.Errorf("the banner lacks the cluster:\n%s", m.Output)
	}
	c := client{t: t, base: m.URL}
	if r := c.do("GET", "/readyz", nil); r.str("status") != "ready" {
		t.Errorf("/readyz = %d %s", r.Status, r.Body)
	}
	if r := c.with(operatorKey(t, m)).do("GET", "/api/v1/usage?group_by=listing", nil); r.Status != 200 {
		t.Errorf("GET /usage = %d %s", r.Status, r.Body)
	}
}

// operatorURL is the operator listener the marketplace's banner names.
func operatorURL(t *testing.T, m *started) string {
	t.Helper()
	found := regexp.MustCompile(`\n  metrics +(http://127\.0\.0\.1:\d+)/metrics, on the operator listener only\n`).FindStringSubmatch(waitBanner(t, m))
	if found == nil || found[1] == m.URL {
		t.Fatalf("the banner does not name an operator listener of its own:\n%s", m.Output)
	}
	return found[1]
}

// TestOperatorListener (issue 23, item 4): with AGENTMARKET_METRICS_ADDR
// the marketplace serves /metrics on that listener only, named in its
// banner: the public listener answers it 404 and still answers the
// probes; the operator listener answers /metrics (the embedded meter's
// series too, and with AGENTMARKET_METRICS_LISTING_COST the cost billed
// per listing) and the probes, and closes with the process. Without
// them, /metrics is on the public listener, with no cost per listing.
func TestOperatorListener(t *testing.T) {
	cm := newCommerceMarket(t, map[string]string{"AGENTMARKET_METRICS_ADDR": "127.0.0.1:0", "AGENTMARKET_METRICS_LISTING_COST": "true"}, changePricing)
	opsURL := operatorURL(t, cm.m)
	public, operator := client{t: t, base: cm.m.URL}, client{t: t, base: opsURL}
	if r := public.do("GET", "/metrics", nil); r.Status != 404 || strings.Contains(string(r.Body), "agentmarket_") {
		t.Errorf("public /metrics = %d %.300s, want 404", r.Status, r.Body)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if r := public.do("GET", p, nil); r.Status != 200 {
			t.Errorf("public %s = %d %s", p, r.Status, r.Body)
		}
		if r := operator.do("GET", p, nil); r.Status != 200 {
			t.Errorf("operator %s = %d %s", p, r.Status, r.Body)
		}
	}
	if r := operator.do("GET", "/api/v1/listings", nil); r.Status != 404 {
		t.Errorf("the operator listener serves the API: %d", r.Status)
	}
	cm.subscribe(t, cm.buyer, map[string]any{})
	cm.call(t, cm.buyer)
	// 222 micros: 9 input tokens × 3 + 13 output × 15.
	metrics := func(c client) string { return string(c.do("GET", "/metrics", nil).Body) }
	waitFor(t, "the call's cost in /metrics", 10*time.Second, func() bool {
		return strings.Contains(metrics(operator), `agentmarket_meter_cost_micros_total{listing="`+cm.listing+`"} 222`)
	})
	body := metrics(operator)
	for _, want := range []string{
		`agentmarket_marketplace_http_requests_total{method="GET",route="/healthz",status="200"} 1`, // the public listener's
		`agentmarket_marketplace_http_requests_total{method="GET",route="unmatched",status="404"} 1`,
		`agentmarket_meter_tokens_total{direction="input",listing="` + cm.listing + `",source="reported"} 9`,
		"agentmarket_meter_a2a_inflight_requests 0",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("operator /metrics lacks %s", want)
		}
	}
	cm.m.stop(t)
	if res, err := http.Get(opsURL + "/healthz"); err == nil {
		res.Body.Close()
		t.Errorf("the operator listener still answers after the process stopped: %d", res.StatusCode)
	}

	plain := newCommerceMarket(t, nil, changePricing)
	if want := "\n  metrics      " + plain.m.URL + "/metrics, on the public listener (AGENTMARKET_METRICS_ADDR serves it apart)\n"; !strings.Contains(waitBanner(t, plain.m), want) {
		t.Errorf("the banner lacks %q:\n%s", want, plain.m.Output)
	}
	plain.subscribe(t, plain.buyer, map[string]any{})
	plain.call(t, plain.buyer)
	tokens := `agentmarket_meter_tokens_total{direction="input",listing="` + plain.listing + `",source="reported"} 9`
	waitFor(t, "the call's tokens in /metrics", 10*time.Second, func() bool { return strings.Contains(metrics(client{t: t, base: plain.m.URL}), tokens) })
	if body := metrics(client{t: t, base: plain.m.URL}); strings.Contains(body, "cost_micros_total") {
		t.Errorf("/metrics exports the cost per listing by default")
	}
}
