package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/glebarez/go-sqlite"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/agentmarket/agentmarket/cmd/internal/serve"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// started is a marketplace running in this test process through run().
type started struct {
	URL     string
	DataDir string
	Output  *syncBuffer // everything run() printed
	done    chan error
	cancel  context.CancelFunc
	stopped bool
}

// stop shuts the marketplace down and waits for run() to return.
func (s *started) stop(t *testing.T) {
	t.Helper()
	if s.stopped {
		return
	}
	s.stopped = true
	s.cancel()
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Errorf("marketplace did not stop within 15s")
	}
}

// syncBuffer collects output written from another goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startMarketplace runs the real binary's run() on a free port with the
// given settings and waits until it listens. It stops when the test ends.
func startMarketplace(t *testing.T, env map[string]string, args ...string) *started {
	t.Helper()
	return startMarketplaceWith(t, env, nil, args...)
}

// startMarketplaceWith is startMarketplace with options for the core.
func startMarketplaceWith(t *testing.T, env map[string]string, opts []serve.Option, args ...string) *started {
	t.Helper()
	dataDir := t.TempDir()
	vars := map[string]string{
		"AGENTMARKET_ADDR":              "127.0.0.1:0",
		"AGENTMARKET_DATA_DIR":          dataDir,
		"AGENTMARKET_FETCH_ALLOW_CIDRS": "127.0.0.0/8",
		"AGENTMARKET_LOG_LEVEL":         "warn",
	}
	for k, v := range env {
		vars[k] = v
	}
	s := &started{DataDir: vars["AGENTMARKET_DATA_DIR"], Output: &syncBuffer{}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	pr, pw := io.Pipe()
	go func() {
		err := run(ctx, args, func(k string) string { return vars[k] }, io.MultiWriter(pw, s.Output), opts...)
		pw.CloseWithError(fmt.Errorf("run returned: %v", err))
		s.done <- err
	}()
	t.Cleanup(func() { s.stop(t) })
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			if _, after, ok := strings.Cut(line, "listening on "); ok && strings.HasPrefix(after, "http") {
				select {
				case urlc <- after:
				default:
				}
			}
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case s.URL = <-urlc:
	case err := <-s.done:
		t.Fatalf("marketplace exited before listening: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("marketplace did not listen within 30s")
	}
	return s
}

// client calls the API with a key and decodes JSON answers.
type client struct {
	t    *testing.T
	base string
	key  string
}

type response struct {
	Status int
	Body   []byte
	JSON   map[string]any
}

func (c client) do(method, path string, body any) response {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	out := response{Status: res.StatusCode}
	out.Body, _ = io.ReadAll(res.Body)
	_ = json.Unmarshal(out.Body, &out.JSON)
	return out
}

func (c client) with(key string) client { c.key = key; return c }

func (r response) str(path ...string) string {
	s, _ := r.at(path...).(string)
	return s
}

// at is the value at path in r's JSON (nil when none).
func (r response) at(path ...string) any {
	var v any = r.JSON
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	return v
}

// errorFields returns "field:rule" for each field error of an error answer.
func (r response) errorFields() []string {
	var out []string
	e, _ := r.JSON["error"].(map[string]any)
	fs, _ := e["fields"].([]any)
	for _, f := range fs {
		m := f.(map[string]any)
		out = append(out, fmt.Sprintf("%s:%s", m["field"], m["rule"]))
	}
	return out
}

func (r response) code() string { return r.str("error", "code") }

func signup(t *testing.T, c client, org, email string) (orgID, key string) {
	t.Helper()
	r := c.do("POST", "/api/v1/signup", map[string]any{"org_name": org, "email": email, "password": "correct horse battery"})
	if r.Status != 201 {
		t.Fatalf("signup %s: %d %s", org, r.Status, r.Body)
	}
	return r.str("org", "id"), r.str("api_key", "key")
}

func testdataCard(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "listings", "storetest", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// agent serves a card at the well-known path, like a seller's agent.
func agent(t *testing.T, card []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/agent-card.json" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(card)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestHealth(t *testing.T) {
	m := startMarketplace(t, nil)
	c := client{t: t, base: m.URL}
	for _, p := range []string{"/healthz", "/readyz"} {
		if r := c.do("GET", p, nil); r.Status != 200 {
			t.Errorf("%s = %d %s", p, r.Status, r.Body)
		}
	}
	r := c.do("GET", "/metrics", nil)
	if r.Status != 200 || !strings.Contains(string(r.Body), "agentmarket_marketplace_http_requests_total") {
		t.Errorf("/metrics = %d, missing request counter", r.Status)
	}
	if r := c.do("GET", "/api/v1/openapi.json", nil); r.Status != 200 || r.JSON["openapi"] == nil {
		t.Errorf("openapi.json = %d", r.Status)
	}
}

// databases runs f against the embedded default (SQLite) and against
// PostgreSQL; dsn is empty for SQLite.
func databases(t *testing.T, f func(t *testing.T, env map[string]string, dsn string)) {
	t.Run("sqlite", func(t *testing.T) { f(t, map[string]string{}, "") })
	t.Run("postgres", func(t *testing.T) {
		dsn := relationaltest.PostgresDSN(t)
		f(t, map[string]string{
			"AGENTMARKET_DATABASE_URL": dsn,
			"AGENTMARKET_SECRET_KEY":   "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
			"AGENTMARKET_AUTO_APPROVE": "true",
		}, dsn)
	})
}

// dumpRow reads one listings row straight from the database, every
// column as text, the way someone with a copy of the database would.
func dumpRow(t *testing.T, m *started, dsn, id string) string {
	t.Helper()
	driver, source, q := "sqlite", filepath.Join(m.DataDir, "agentmarket.db"), "SELECT * FROM listings WHERE id = ?"
	if dsn != "" {
		driver, source, q = "pgx", dsn, "SELECT * FROM listings WHERE id = $1"
	}
	db, err := sql.Open(driver, source)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(q, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	if !rows.Next() {
		t.Fatalf("no row for %s", id)
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i, v := range vals {
		if bs, ok := v.([]byte); ok {
			v = string(bs)
		}
		fmt.Fprintf(&b, "%s=%v\n", cols[i], v)
	}
	return b.String()
}
