//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/cmd/internal/demoagent"
	"github.com/agentmarket/agentmarket/cmd/internal/serve"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/casbin"
	contractsgorm "github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/aesgcm"
	listingsgorm "github.com/agentmarket/agentmarket/listings/gormstore"
	"github.com/agentmarket/agentmarket/listings/httpfetch/httpfetchtest"
	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/clickhouse"
	"github.com/agentmarket/agentmarket/metering/spool"
	"github.com/agentmarket/agentmarket/migrations/relational"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

const testSecretKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

// TestClickHouseOutageAndMeterKill is the durability promise of the meter,
// end to end: usage is spooled locally before the buyer's answer
// completes, so ClickHouse going down and the meter being SIGKILLed lose
// nothing, and rows shipped twice count once.
//
// A buyer sends calls through the meter (a child process) to a demo agent
// that reports its usage. ClickHouse (a private server) is killed after
// the first calls; every call still succeeds. Later the meter is SIGKILLed
// and a new one starts on the same spool, still without ClickHouse, and the
// calls go on. ClickHouse then comes back (same data) and the usage store
// must hold exactly one row per call, with the tokens the agent reported.
// Finally a third meter ships a copy of the spool as the first meter left
// it, which is what a crash between a batch's insert and its
// acknowledgement leaves behind: the totals must not move.
func TestClickHouseOutageAndMeterKill(t *testing.T) {
	const (
		calls       = 40
		killCHAfter = 10 // calls answered before ClickHouse is killed
		killMeterAt = 25 // calls answered before the meter is SIGKILLed
	)
	began := time.Now()
	pgDSN := relationaltest.PostgresDSN(t)
	chSrv := startClickHouse(t)
	chSrv.exec("CREATE DATABASE agentmarket_fault")
	chDSN := chSrv.dsn("agentmarket_fault")

	agent := demoagent.New(demoagent.Config{Version: "0.3", ReportUsage: true, StepDelay: 2 * time.Millisecond,
		RequireAuth: "seller-secret", Name: "Fault Summarizer"})
	agentSrv := httptest.NewServer(agent)
	t.Cleanup(agentSrv.Close)
	agent.SetBaseURL(agentSrv.URL + "/")
	mk := setUpMarket(t, pgDSN, agentSrv.URL+"/.well-known/agent-card.json")

	dataDir := t.TempDir()
	env := map[string]string{
		"AGENTMARKET_DATABASE_URL":   pgDSN,
		"AGENTMARKET_SECRET_KEY":     testSecretKey,
		"AGENTMARKET_CLICKHOUSE_URL": chDSN,
		"AGENTMARKET_DATA_DIR":       dataDir,
		"AGENTMARKET_LOG_LEVEL":      "info",
		// The agent listens on loopback, which the meter refuses otherwise.
		"AGENTMARKET_FETCH_ALLOW_CIDRS": "127.0.0.0/8",
	}
	meter := startMeter(t, "life 1", env)
	t.Logf("+%v: meter life 1 at %s, ClickHouse on 127.0.0.1:%d", since(began), meter.url, chSrv.tcp)

	var taskIDs []string
	snapshot := filepath.Join(t.TempDir(), "data")
	for i := 1; i <= calls; i++ {
		id, err := mk.send(meter.url, fmt.Sprintf("call %d: the quarterly report shows revenue up in every region", i))
		if err != nil {
			t.Fatalf("call %d through meter %s (ClickHouse down: %v): %v", i, meter.name, i > killCHAfter, err)
		}
		taskIDs = append(taskIDs, id)
		switch i {
		case killCHAfter:
			// Shipping works before the outage: the spool's cursor is not
			// at its start when the outage begins.
			waitDrained(t, meter, killCHAfter)
			chSrv.kill()
			t.Logf("+%v: first %d rows shipped; ClickHouse killed", since(began), i)
		case killMeterAt:
			meter.sigkill()
			t.Logf("+%v: meter life 1 SIGKILLed after call %d", since(began), i)
			// What this spool holds now is, for the rows a later meter
			// ships, what a crash between insert and acknowledgement
			// leaves: rows that will be in the store and still in a spool.
			copyDir(t, filepath.Join(dataDir, "spool"), filepath.Join(snapshot, "spool"))
			meter = startMeter(t, "life 2", env)
			t.Logf("+%v: meter life 2 at %s on the same spool, ClickHouse still down", since(began), meter.url)
		}
	}
	t.Logf("+%v: %d calls answered", since(began), calls)

	if err := chSrv.start(); err != nil {
		t.Fatalf("restart clickhouse-server: %v", err)
	}
	t.Logf("+%v: ClickHouse restarted", since(began))

	ctx := context.Background()
	store, err := clickhouse.Open(ctx, chDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	q := metering.Query{ListingID: mk.listingID, From: began.Add(-time.Minute), To: time.Now().Add(time.Minute)}

	// Life 2 ships its backlog once its retry comes round.
	waitDrained(t, meter, 0)
	rows := waitRows(t, store, q, calls)
	t.Logf("+%v: %d usage rows in ClickHouse, meter life 2's spool empty", since(began), len(rows))
	checkUsage(t, agent, taskIDs, rows, store, q)

	// A third meter on the copy of life 1's spool sends its rows again.
	backlog := spoolBacklog(t, filepath.Join(snapshot, "spool"))
	if backlog != killMeterAt-killCHAfter {
		t.Errorf("life 1's spool held %d unshipped rows when it was killed, want the %d answered while ClickHouse was down",
			backlog, killMeterAt-killCHAfter)
	}
	env3 := maps.Clone(env)
	env3["AGENTMARKET_DATA_DIR"] = snapshot
	resend := startMeter(t, "life 3 (re-send)", env3)
	waitDrained(t, resend, backlog)
	raw, err := chSrv.count("SELECT count() FROM agentmarket_fault.usage")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("+%v: meter life 3 re-sent %d rows; the table holds %d rows before merges", since(began), backlog, raw)
	rows, err = store.Rows(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	checkUsage(t, agent, taskIDs, rows, store, q)
	t.Logf("+%v: done", since(began))
}

// checkUsage checks that the store holds exactly one row per call, each
// with the usage the agent reported for its task, and totals that agree.
func checkUsage(t *testing.T, agent *demoagent.Agent, taskIDs []string, rows []metering.Usage, store metering.Store, q metering.Query) {
	t.Helper()
	want := map[string]demoagent.Usage{}
	var sum demoagent.Usage
	for _, id := range taskIDs {
		task, ok := agent.Task(id)
		if !ok {
			t.Fatalf("the agent has no task %s", id)
		}
		want[id] = task.Usage
		sum.InputTokens += task.Usage.InputTokens
		sum.OutputTokens += task.Usage.OutputTokens
		sum.ComputeMs += task.Usage.ComputeMs
	}
	if len(want) != len(taskIDs) {
		t.Fatalf("%d calls made only %d distinct tasks", len(taskIDs), len(want))
	}
	if len(rows) != len(taskIDs) {
		t.Errorf("%d usage rows for %d calls", len(rows), len(taskIDs))
	}
	seen := map[string]int{}
	for _, r := range rows {
		seen[r.TaskID]++
		w, ok := want[r.TaskID]
		switch {
		case !ok:
			t.Errorf("usage row %s for task %q that no call made", r.ID, r.TaskID)
		case seen[r.TaskID] > 1:
			t.Errorf("task %s counted %d times (row %s)", r.TaskID, seen[r.TaskID], r.ID)
		case r.InputTokens != w.InputTokens || r.OutputTokens != w.OutputTokens || r.ComputeMs != w.ComputeMs ||
			r.Tasks != 1 || r.Estimated || r.Method != "message/send" || r.State != "completed":
			t.Errorf("task %s: row in=%d out=%d compute=%d tasks=%d estimated=%v method=%s state=%s; the agent reported in=%d out=%d compute=%d",
				r.TaskID, r.InputTokens, r.OutputTokens, r.ComputeMs, r.Tasks, r.Estimated, r.Method, r.State,
				w.InputTokens, w.OutputTokens, w.ComputeMs)
		}
	}
	for _, id := range taskIDs {
		if seen[id] == 0 {
			t.Errorf("task %s has no usage row: lost", id)
		}
	}
	q.GroupBy = metering.ByListing
	totals, err := store.Totals(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(taskIDs))
	if len(totals) != 1 || totals[0].Calls != n || totals[0].Tasks != n || totals[0].InputTokens != sum.InputTokens ||
		totals[0].OutputTokens != sum.OutputTokens || totals[0].ComputeMs != sum.ComputeMs || totals[0].Estimated != 0 {
		t.Errorf("totals = %+v, want one listing with calls=tasks=%d in=%d out=%d compute=%d, none estimated",
			totals, n, sum.InputTokens, sum.OutputTokens, sum.ComputeMs)
	}
}

// waitRows polls the store (30 s at most) until it holds want rows.
func waitRows(t *testing.T, store metering.Store, q metering.Query, want int) []metering.Usage {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rows, err := store.Rows(context.Background(), q)
		if err == nil && len(rows) >= want {
			return rows
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d usage rows in ClickHouse after 30s, want %d (last error: %v)", len(rows), want, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitDrained waits (30 s at most) until the meter has shipped at least
// shipped rows and its spool holds none.
func waitDrained(t *testing.T, m *meterProc, shipped int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		depth, err1 := m.metric("agentmarket_meter_spool_rows")
		sent, err2 := m.metric("agentmarket_meter_usage_rows_shipped_total")
		if err1 == nil && err2 == nil && depth == 0 && sent >= float64(shipped) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("meter %s: spool rows %v (%v), shipped %v (%v) after 30s; want 0 rows left and at least %d shipped",
				m.name, depth, err1, sent, err2, shipped)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// spoolBacklog is the number of unshipped rows in a spool directory.
func spoolBacklog(t *testing.T, dir string) int {
	t.Helper()
	s, err := spool.Open(dir, spool.Options{})
	if err != nil {
		t.Fatalf("open spool copy: %v", err)
	}
	defer s.Close()
	return int(s.Stats().Rows)
}

// copyDir copies the regular files of src into dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o750); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
}

func since(t0 time.Time) time.Duration { return time.Since(t0).Round(time.Millisecond) }

// faultMarket is the control plane the meter reads: a seller's listing of
// the agent and a buyer subscribed to it, with an orchestrator key.
type faultMarket struct {
	listingID string
	buyerKey  string
	client    *http.Client
}

// setUpMarket creates the seller, the listing (the agent's card, fetched
// and pasted) and the buyer's subscription through the domain services,
// on the PostgreSQL database the meter will use.
func setUpMarket(t *testing.T, dsn, cardURL string) *faultMarket {
	t.Helper()
	ctx := context.Background()
	db, err := relational.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	defer db.Close()
	key, err := base64.StdEncoding.DecodeString(testSecretKey)
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := aesgcm.New(key)
	if err != nil {
		t.Fatal(err)
	}
	clock := agentmarket.SystemClock{}
	accountStore := contractsgorm.New(db.DB)
	accounts := &contracts.Accounts{Store: accountStore, Clock: clock, BcryptCost: bcrypt.MinCost}
	authz, err := casbin.New(ctx, accountStore)
	if err != nil {
		t.Fatal(err)
	}
	catalog := &listings.Service{Store: listingsgorm.New(db.DB), Endpoints: httpfetchtest.Loopback(nil), Sealer: sealer, Clock: clock, AutoApprove: true}
	subs := &contracts.Subscriptions{Store: accountStore, Listings: serve.CatalogTerms{Catalog: catalog}, Policies: authz, Clock: clock}

	signup := func(org, email string) agentmarket.Actor {
		res, err := accounts.Signup(ctx, contracts.SignupInput{OrgName: org, Email: email, Password: "fault-test-password"})
		if err != nil {
			t.Fatalf("signup %s: %v", org, err)
		}
		actor, err := accounts.Authenticate(ctx, res.Secret)
		if err != nil {
			t.Fatal(err)
		}
		return actor
	}
	seller := signup("Fault Agents", "seller@fault.example")
	buyer := signup("Fault Buyer", "buyer@fault.example")

	res, err := http.Get(cardURL)
	if err != nil {
		t.Fatal(err)
	}
	card, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("agent card: %d %v", res.StatusCode, err)
	}
	l, err := catalog.Create(ctx, seller, listings.CreateInput{Card: card,
		Pricing:      json.RawMessage(`{"currency":"usd","input_tokens_per_million_micros":3000000,"output_tokens_per_million_micros":15000000,"per_task_micros":2000}`),
		UpstreamAuth: &listings.UpstreamAuth{Header: "Authorization", Value: "Bearer seller-secret"}})
	if err != nil {
		t.Fatalf("create listing: %v", err)
	}
	if _, err := subs.Subscribe(ctx, buyer, contracts.SubscribeInput{ListingID: l.ID}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	_, secret, err := accounts.CreateKey(ctx, buyer, contracts.KeyInput{Name: "orchestrator", Role: agentmarket.RoleBuyer})
	if err != nil {
		t.Fatal(err)
	}
	return &faultMarket{listingID: l.ID, buyerKey: secret, client: &http.Client{Timeout: 10 * time.Second}}
}

// send makes one blocking A2A 0.3 message/send through the meter at
// meterURL and returns the id of the completed task.
func (mk *faultMarket) send(meterURL, text string) (string, error) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": map[string]any{
		"message": map[string]any{"kind": "message", "messageId": agentmarket.NewID("msg"), "role": "user",
			"parts": []any{map[string]any{"kind": "text", "text": text}}}}})
	req, err := http.NewRequest(http.MethodPost, meterURL+"/a2a/"+mk.listingID, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+mk.buyerKey)
	res, err := mk.client.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return "", err
	}
	var out struct {
		Result struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(b, &out); err != nil || res.StatusCode != http.StatusOK || out.Error != nil ||
		out.Result.ID == "" || out.Result.Status.State != "completed" {
		return "", fmt.Errorf("HTTP %d: %s", res.StatusCode, b)
	}
	return out.Result.ID, nil
}

// get reads a task through the meter at meterURL (A2A 0.3 tasks/get) and
// returns its id, or the error answered.
func (mk *faultMarket) get(meterURL, taskID string) (string, error) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": map[string]any{"id": taskID}})
	req, err := http.NewRequest(http.MethodPost, meterURL+"/a2a/"+mk.listingID, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+mk.buyerKey)
	res, err := mk.client.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var out struct {
		Result struct {
			ID string `json:"id"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Error != nil {
		return "", fmt.Errorf("HTTP %d: %s", res.StatusCode, b)
	}
	return out.Result.ID, nil
}
