package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/cmd/internal/demoagent"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/clickhouse"
	"github.com/agentmarket/agentmarket/metering/clickhouse/clickhousetest"
	"github.com/agentmarket/agentmarket/metering/embedded"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// meterEnv is a marketplace with its embedded meter on one of the two
// storage set-ups: SQLite with the embedded usage store, or PostgreSQL with
// ClickHouse.
type meterEnv struct {
	name  string
	env   map[string]string
	chDSN string
}

func meterEnvs(t *testing.T, f func(t *testing.T, e meterEnv)) {
	t.Run("sqlite+embedded", func(t *testing.T) {
		f(t, meterEnv{name: "sqlite", env: map[string]string{}})
	})
	t.Run("postgres+clickhouse", func(t *testing.T) {
		ch := clickhousetest.DSN(t)
		f(t, meterEnv{name: "postgres", chDSN: ch, env: map[string]string{
			"AGENTMARKET_DATABASE_URL":   relationaltest.PostgresDSN(t),
			"AGENTMARKET_SECRET_KEY":     "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
			"AGENTMARKET_AUTO_APPROVE":   "true",
			"AGENTMARKET_CLICKHOUSE_URL": ch,
		}})
	})
}

// usageRows reads the usage rows straight from the usage store the
// marketplace writes to, waiting (bounded) until want rows are there.
func usageRows(t *testing.T, m *started, e meterEnv, want int) []metering.Usage {
	t.Helper()
	ctx := context.Background()
	var store metering.Store
	if e.chDSN != "" {
		s, err := clickhouse.Open(ctx, e.chDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		store = s
	} else {
		s, err := embedded.Open(filepath.Join(m.DataDir, "usage.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		store = s
	}
	q := metering.Query{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour)}
	deadline := time.Now().Add(15 * time.Second)
	for {
		rows, err := store.Rows(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) >= want || time.Now().After(deadline) {
			if len(rows) < want {
				t.Fatalf("%d usage rows after 15s, want %d", len(rows), want)
			}
			return rows
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rpc is a JSON-RPC call through the meter.
type rpc struct {
	t       *testing.T
	url     string
	key     string
	version string // "1.0" sends A2A-Version: 1.0
	header  http.Header
}

func (r rpc) post(method string, params any) (*http.Response, error) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	req, _ := http.NewRequest("POST", r.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if r.key != "" {
		req.Header.Set("Authorization", "Bearer "+r.key)
	}
	if r.version == "1.0" {
		req.Header.Set("A2A-Version", "1.0")
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	return http.DefaultClient.Do(req)
}

// call sends a unary call and returns the decoded result or error.
func (r rpc) call(method string, params any) (result map[string]any, rpcErr map[string]any) {
	r.t.Helper()
	res, err := r.post(method, params)
	if err != nil {
		r.t.Fatalf("%s: %v", method, err)
	}
	defer res.Body.Close()
	var out struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	b, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(b, &out); err != nil {
		r.t.Fatalf("%s: not JSON-RPC (%d): %s", method, res.StatusCode, b)
	}
	return out.Result, out.Error
}

type sseEvent struct {
	at   time.Time
	data map[string]any
}

// stream sends a streaming call and collects the events with the time
// each arrived.
func (r rpc) stream(method string, params any) []sseEvent {
	r.t.Helper()
	res, err := r.post(method, params)
	if err != nil {
		r.t.Fatalf("%s: %v", method, err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		b, _ := io.ReadAll(res.Body)
		r.t.Fatalf("%s: content type %q: %s", method, ct, b)
	}
	var out []sseEvent
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				r.t.Fatalf("bad event %q", d)
			}
			out = append(out, sseEvent{at: time.Now(), data: m})
		}
	}
	return out
}

func msg03(text string, extra map[string]any) map[string]any {
	m := map[string]any{"kind": "message", "messageId": fmt.Sprintf("m-%d", time.Now().UnixNano()), "role": "user",
		"parts": []any{map[string]any{"kind": "text", "text": text}}}
	for k, v := range extra {
		m[k] = v
	}
	return map[string]any{"message": m}
}

func msg10(text string, extra map[string]any) map[string]any {
	m := map[string]any{"messageId": fmt.Sprintf("m-%d", time.Now().UnixNano()), "role": "ROLE_USER",
		"parts": []any{map[string]any{"text": text}}}
	for k, v := range extra {
		m[k] = v
	}
	return map[string]any{"message": m}
}

func get(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, _ := v.(map[string]any)
		v = mm[p]
	}
	return v
}

// market is a marketplace with a seller that lists two demo agents (one
// per protocol version) and a buyer subscribed to both.
type market struct {
	m             *started
	api           client
	seller, buyer string // admin keys
	buyerOrg      string
	a03, a10      *demoagent.Agent
	id03, id10    string
	ep03, ep10    string
	subs          map[string]string // listing → subscription id
}

func agentServer(t *testing.T, a *demoagent.Agent) *httptest.Server {
	srv := httptest.NewServer(a)
	a.SetBaseURL(srv.URL + "/")
	t.Cleanup(srv.Close)
	return srv
}

func newMarket(t *testing.T, env map[string]string) *market {
	return newMarketWith(t, env, func(*demoagent.Config) {})
}

// newMarketWith lets a test adjust the two agents' configurations.
func newMarketWith(t *testing.T, env map[string]string, adjust func(c *demoagent.Config)) *market {
	t.Helper()
	mk := &market{subs: map[string]string{}}
	c03 := demoagent.Config{Version: "0.3", ReportUsage: true, StepDelay: 60 * time.Millisecond, RequireAuth: "seller-token-03", Name: "Summarizer 03"}
	c10 := demoagent.Config{Version: "1.0", ReportUsage: false, StepDelay: 60 * time.Millisecond, RequireAuth: "seller-token-10", Name: "Translator 10", Behavior: demoagent.Translate}
	adjust(&c03)
	adjust(&c10)
	mk.a03 = demoagent.New(c03)
	mk.a10 = demoagent.New(c10)
	s03, s10 := agentServer(t, mk.a03), agentServer(t, mk.a10)
	mk.m = startMarketplace(t, env)
	mk.api = client{t: t, base: mk.m.URL}
	_, mk.seller = signup(t, mk.api, "Acme Agents", "owner@acme.example")
	mk.buyerOrg, mk.buyer = signup(t, mk.api, "Globex", "it@globex.example")
	for _, l := range []struct {
		url, token string
		id, ep     *string
	}{{s03.URL, "seller-token-03", &mk.id03, &mk.ep03}, {s10.URL, "seller-token-10", &mk.id10, &mk.ep10}} {
		r := mk.api.with(mk.seller).do("POST", "/api/v1/listings", map[string]any{"card_url": l.url, "pricing": pricing,
			"upstream_auth": map[string]string{"header": "Authorization", "value": "Bearer " + l.token}})
		if r.Status != 201 {
			t.Fatalf("list: %d %s", r.Status, r.Body)
		}
		*l.id = r.str("id")
		r = mk.api.with(mk.buyer).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": *l.id})
		if r.Status != 201 {
			t.Fatalf("subscribe: %d %s", r.Status, r.Body)
		}
		*l.ep = r.str("endpoint")
		mk.subs[*l.id] = r.str("id")
	}
	return mk
}

// TestMeterEndToEnd: both protocol versions through the meter, streaming,
// input-required and cancel; the buyer gets what the agent sent, events
// arrive one by one, and the usage rows hold the right tasks, tokens,
// compute and cost.
func TestMeterEndToEnd(t *testing.T) {
	meterEnvs(t, func(t *testing.T, e meterEnv) {
		mk := newMarket(t, e.env)
		b03 := rpc{t: t, url: mk.ep03, key: mk.buyer}
		b10 := rpc{t: t, url: mk.ep10, key: mk.buyer, version: "1.0"}
		const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
		b03.header = http.Header{"Traceparent": {"00-" + trace + "-00f067aa0ba902b7-01"}}

		// The proxied card points at the meter and asks for the marketplace key.
		r := mk.api.do("GET", "/a2a/"+mk.id03+"/.well-known/agent-card.json", nil)
		if r.Status != 200 || r.str("url") != mk.ep03 || get(r.JSON, "securitySchemes", a2aproxy.SecuritySchemeName) == nil || r.str("name") != "Summarizer 03" {
			t.Fatalf("proxied card: %d %s", r.Status, r.Body)
		}

		// 0.3 stream: every event relayed, one by one.
		evs := b03.stream("message/stream", msg03("Quarterly revenue grew in every region while costs fell", nil))
		var kinds []string
		for _, ev := range evs {
			kinds = append(kinds, fmt.Sprint(get(ev.data, "result", "kind")))
		}
		if want := "task status-update artifact-update artifact-update artifact-update status-update"; strings.Join(kinds, " ") != want {
			t.Fatalf("0.3 stream kinds = %v, want %s", kinds, want)
		}
		if get(evs[3].data, "result", "append") != true || get(evs[5].data, "result", "final") != true {
			t.Errorf("append/final flags not relayed: %v / %v", evs[3].data, evs[5].data)
		}
		spread := 0
		for i := 1; i < len(evs); i++ {
			if evs[i].at.Sub(evs[i-1].at) >= 30*time.Millisecond {
				spread++
			}
		}
		// Timing on a shared machine: a relay that buffers delivers them in one
		// burst (no gap); a loaded reader can bunch two. The check by cause is
		// a2aproxy's TestCoreStreamIsNotBuffered.
		if spread < 2 {
			t.Errorf("events arrived together (only %d gaps ≥ 30ms): the relay buffers", spread)
		}
		id03 := fmt.Sprint(get(evs[0].data, "result", "id"))
		task03 := mk.id03 + "/" + id03
		if h := mk.a03.LastHeaders(); h.Get("Authorization") != "Bearer seller-token-03" || !strings.Contains(h.Get("Traceparent"), trace) ||
			!strings.Contains(h.Get("X-A2A-Extensions"), demoagent.UsageExtensionURI) {
			t.Errorf("agent got headers %v: want the seller's token, the caller's trace and the usage extension activated", h)
		}

		// 1.0 blocking send.
		res, rerr := b10.call("SendMessage", msg10("hello metered world", nil))
		if rerr != nil || get(res, "task", "status", "state") != "TASK_STATE_COMPLETED" {
			t.Fatalf("1.0 send: %v %v", res, rerr)
		}
		task10 := mk.id10 + "/" + fmt.Sprint(get(res, "task", "id"))

		// input-required, then resumed with the same task id.
		res, rerr = b03.call("message/send", msg03("please clarify the scope", nil))
		if rerr != nil || get(res, "status", "state") != "input-required" {
			t.Fatalf("input-required: %v %v", res, rerr)
		}
		idIR := fmt.Sprint(get(res, "id"))
		taskIR := mk.id03 + "/" + idIR
		res, rerr = b03.call("message/send", msg03("the scope is the EU market", map[string]any{"taskId": idIR, "contextId": get(res, "contextId")}))
		if rerr != nil || get(res, "status", "state") != "completed" {
			t.Fatalf("resume: %v %v", res, rerr)
		}

		// cancel of a running task.
		res, rerr = b10.call("SendMessage", map[string]any{"message": msg10("slow job please", nil)["message"], "configuration": map[string]any{"returnImmediately": true}})
		if rerr != nil {
			t.Fatalf("slow send: %v", rerr)
		}
		idSlow := fmt.Sprint(get(res, "task", "id"))
		taskSlow := mk.id10 + "/" + idSlow
		res, rerr = b10.call("CancelTask", map[string]any{"id": idSlow})
		if rerr != nil || get(res, "status", "state") != "TASK_STATE_CANCELED" {
			t.Fatalf("cancel: %v %v", res, rerr)
		}

		// 1.0 stream from the agent that reports nothing: relayed one by one.
		evs = b10.stream("SendStreamingMessage", msg10("stream me through the meter please", nil))
		kinds = nil
		for _, ev := range evs {
			r, _ := ev.data["result"].(map[string]any)
			for k := range r {
				kinds = append(kinds, k)
			}
		}
		if want := "task statusUpdate artifactUpdate artifactUpdate artifactUpdate statusUpdate"; strings.Join(kinds, " ") != want {
			t.Fatalf("1.0 stream = %v, want %s", kinds, want)
		}
		spread = 0
		for i := 1; i < len(evs); i++ {
			if evs[i].at.Sub(evs[i-1].at) >= 30*time.Millisecond {
				spread++
			}
		}
		// Timing on a shared machine: a relay that buffers delivers them in one
		// burst (no gap); a loaded reader can bunch two. The check by cause is
		// a2aproxy's TestCoreStreamIsNotBuffered.
		if spread < 2 {
			t.Errorf("1.0 events arrived together (only %d gaps ≥ 30ms)", spread)
		}
		task10s := mk.id10 + "/" + fmt.Sprint(get(evs[0].data, "result", "task", "id"))

		// A 1.0 buyer calling the 0.3 agent: the meter translates both ways.
		x := rpc{t: t, url: mk.ep03, key: mk.buyer, version: "1.0"}
		res, rerr = x.call("SendMessage", msg10("a cross version call", nil))
		if rerr != nil || get(res, "task", "status", "state") != "TASK_STATE_COMPLETED" || get(res, "task", "kind") != nil {
			t.Fatalf("1.0 buyer to 0.3 agent: %v %v", res, rerr)
		}
		taskX := mk.id03 + "/" + fmt.Sprint(get(res, "task", "id"))

		// Usage: stream + send + 2 sends + send + cancel + stream + send = 8 calls.
		rows := usageRows(t, mk.m, e, 8)
		// Task ids are the agents' own: key them by listing too.
		byTask := map[string][]metering.Usage{}
		for _, u := range rows {
			byTask[u.ListingID+"/"+u.TaskID] = append(byTask[u.ListingID+"/"+u.TaskID], u)
			if u.BuyerOrgID != mk.buyerOrg || u.ContractID == "" || u.APIKeyID == "" || u.CardHash == "" || u.Currency != "usd" {
				t.Errorf("row lacks attribution: %+v", u)
			}
		}
		sum := func(task string) (in, out, comp, tasks, cost int64, est bool) {
			for _, u := range byTask[task] {
				in += u.InputTokens
				out += u.OutputTokens
				comp += u.ComputeMs
				tasks += u.Tasks
				cost += u.CostMicros
				est = est || u.Estimated
			}
			return
		}
		plan := listings.Plan{InputTokensPerMillionMicros: 3_000_000, OutputTokensPerMillionMicros: 15_000_000, ComputePerHourMicros: 360_000, PerTaskMicros: 1_000}
		for _, task := range []string{task03, taskIR, taskX} {
			snap, _ := mk.a03.Task(strings.TrimPrefix(task, mk.id03+"/"))
			in, out, comp, tasks, cost, est := sum(task)
			if est || in != snap.Usage.InputTokens || out != snap.Usage.OutputTokens || comp != snap.Usage.ComputeMs || tasks != 1 {
				t.Errorf("task %s: billed in=%d out=%d compute=%d tasks=%d estimated=%v; the agent reported %+v", task, in, out, comp, tasks, est, snap.Usage)
			}
			var want int64
			for _, u := range byTask[task] {
				want += a2aproxy.Rate(plan, metering.Counters{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, ComputeMs: u.ComputeMs}, u.Tasks)
			}
			if cost != want || cost == 0 {
				t.Errorf("task %s cost %d, want %d", task, cost, want)
			}
		}
		if rows := byTask[task03]; len(rows) != 1 || rows[0].TraceID != trace || rows[0].Method != "message/stream" || rows[0].State != "completed" || rows[0].Model == "" {
			t.Errorf("stream row: %+v", rows)
		}
		in, out, comp, tasks, _, est := sum(task10)
		if !est || in == 0 || out == 0 || comp < 0 || tasks != 1 {
			t.Errorf("1.0 task %s (no report): in=%d out=%d compute=%d tasks=%d estimated=%v, want estimated tokens", task10, in, out, comp, tasks, est)
		}
		if in, out, _, tasks, _, est := sum(task10s); !est || in == 0 || out == 0 || tasks != 1 {
			t.Errorf("1.0 streamed task: in=%d out=%d tasks=%d estimated=%v", in, out, tasks, est)
		}
		if rows := byTask[taskX]; len(rows) != 1 || rows[0].ProtocolVersion != "1.0" || rows[0].Method != "SendMessage" {
			t.Errorf("cross-version row: %+v", rows)
		}
		if _, _, _, tasks, _, _ := sum(taskSlow); tasks != 1 || len(byTask[taskSlow]) != 2 {
			t.Errorf("canceled task: %d rows, %d tasks", len(byTask[taskSlow]), tasks)
		}
		var states []string
		for _, u := range byTask[taskSlow] {
			states = append(states, u.State)
		}
		sort.Strings(states)
		if fmt.Sprint(states) != "[canceled working]" {
			t.Errorf("canceled task states %v", states)
		}

		// The usage API answers from the same rows.
		r = mk.api.with(mk.buyer).do("GET", "/api/v1/usage?group_by=listing", nil)
		if r.Status != 200 || len(r.JSON["items"].([]any)) != 2 {
			t.Fatalf("usage API: %d %s", r.Status, r.Body)
		}
		var calls float64
		for _, it := range r.JSON["items"].([]any) {
			calls += it.(map[string]any)["calls"].(float64)
		}
		if calls != 8 {
			t.Errorf("usage API counts %v calls, want 8", calls)
		}
		// Rows carry display names, and rows by task the task's fields.
		names := map[string]string{}
		for _, it := range r.JSON["items"].([]any) {
			row := it.(map[string]any)
			names[fmt.Sprint(row["key"])] = fmt.Sprint(row["name"])
		}
		if names[mk.id03] != "Summarizer 03" || names[mk.id10] != "Translator 10" {
			t.Errorf("usage by listing, the names: %v", names)
		}
		if r := mk.api.with(mk.buyer).do("GET", "/api/v1/usage?group_by=seller", nil); len(r.JSON["items"].([]any)) != 1 ||
			r.JSON["items"].([]any)[0].(map[string]any)["name"] != "Acme Agents" {
			t.Errorf("usage by seller: %s", r.Body)
		}
		r = mk.api.with(mk.buyer).do("GET", "/api/v1/usage?group_by=task", nil)
		var task10Row map[string]any
		for _, it := range r.JSON["items"].([]any) {
			if row := it.(map[string]any); row["key"] == task10 {
				task10Row = row
			}
		}
		if task10Row == nil || task10Row["listing_id"] != mk.id10 || mk.id10+"/"+fmt.Sprint(task10Row["task_id"]) != task10 ||
			task10Row["context_id"] == nil || task10Row["context_id"] == "" || task10Row["name"] != "Translator 10" {
			t.Errorf("usage by task, task %s: %v", task10, task10Row)
		}
		req, _ := http.NewRequest("GET", mk.m.URL+"/api/v1/usage?group_by=task", nil)
		req.Header.Set("Authorization", "Bearer "+mk.buyer)
		req.Header.Set("Accept", "text/csv")
		csvRes, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		csvBody, _ := io.ReadAll(csvRes.Body)
		csvRes.Body.Close()
		if !strings.HasPrefix(string(csvBody), "task,calls,tasks,input_tokens") || !strings.Contains(string(csvBody), strings.TrimPrefix(task10, mk.id10+"/")) {
			t.Errorf("CSV usage: %s", csvBody)
		}
	})
}

// TestMeterRefusals: bad keys, other orgs, and not-subscribed buyers are
// refused with the documented codes; another org's task does not exist
// for it, also after a restart.
func TestMeterRefusals(t *testing.T) {
	meterEnvs(t, func(t *testing.T, e meterEnv) {
		e.env["AGENTMARKET_DATA_DIR"] = t.TempDir()
		mk := newMarket(t, e.env)
		a := rpc{t: t, url: mk.ep03, key: mk.buyer}
		res, rerr := a.call("message/send", msg03("ownership check", nil))
		if rerr != nil {
			t.Fatal(rerr)
		}
		taskA := fmt.Sprint(get(res, "id"))

		orgB, keyB := signup(t, mk.api, "Initech", "it@initech.example")
		_ = orgB
		b := rpc{t: t, url: mk.ep03, key: keyB}
		if _, rerr := b.call("tasks/get", map[string]any{"id": taskA}); rerr == nil || rerr["code"] != float64(a2aproxy.CodeNotEntitled) {
			t.Fatalf("unsubscribed org: %v", rerr)
		}
		if r := mk.api.with(keyB).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": mk.id03}); r.Status != 201 {
			t.Fatalf("B subscribes: %d %s", r.Status, r.Body)
		}
		check := func(stage string) {
			for _, call := range []struct {
				method string
				params any
			}{
				{"tasks/get", map[string]any{"id": taskA}},
				{"tasks/cancel", map[string]any{"id": taskA}},
				{"tasks/resubscribe", map[string]any{"id": taskA}},
				{"message/send", msg03("hijack", map[string]any{"taskId": taskA})},
			} {
				res, err := b.post(call.method, call.params)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if !strings.Contains(string(body), `"code":-32001`) {
					t.Errorf("%s: org B %s on org A's task: %s, want TaskNotFound", stage, call.method, body)
				}
			}
			if res, rerr := a.call("tasks/get", map[string]any{"id": taskA}); rerr != nil || get(res, "id") != taskA {
				t.Errorf("%s: owner cannot get its task: %v", stage, rerr)
			}
		}
		check("before restart")

		mk.m.stop(t)
		m2 := startMarketplace(t, e.env)
		a.url = strings.Replace(mk.ep03, mk.m.URL, m2.URL, 1)
		b.url = a.url
		check("after restart")

		bad := rpc{t: t, url: a.url, key: "amk_notarealkey000000000000000000"}
		res2, err := bad.post("message/send", msg03("x", nil))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res2.Body)
		res2.Body.Close()
		if res2.StatusCode != 401 || !strings.Contains(string(body), fmt.Sprintf(`"code":%d`, a2aproxy.CodeUnauthorized)) {
			t.Errorf("bad key: %d %s", res2.StatusCode, body)
		}
		if _, rerr := a.call("no/such/method", map[string]any{}); rerr == nil || rerr["code"] != float64(-32601) {
			t.Errorf("unknown method: %v", rerr)
		}
		// Without A2A-Version the method name says the version; a header
		// that contradicts it is refused.
		noVersion := rpc{t: t, url: a.url, key: mk.buyer}
		if res, rerr := noVersion.call("SendMessage", msg10("x", nil)); rerr != nil || get(res, "task", "id") == nil {
			t.Errorf("1.0 method without A2A-Version: %v %v, want the task", res, rerr)
		}
		if status, res, _ := restCall(t, mk.buyer, "POST", strings.Replace(mk.ep10, mk.m.URL, m2.URL, 1)+"/message:send", "", msg10("x", nil)); status != 200 || get(res, "task", "id") == nil {
			t.Errorf("1.0 REST send without A2A-Version: %d %v, want the task", status, res)
		}
		wrongVersion := rpc{t: t, url: a.url, key: mk.buyer, header: http.Header{"A2a-Version": {"0.3"}}}
		if _, rerr := wrongVersion.call("SendMessage", msg10("x", nil)); rerr == nil || rerr["code"] != float64(-32600) {
			t.Errorf("1.0 method with A2A-Version 0.3: %v, want invalid request", rerr)
		}
	})
}

// TestRevocationReachesEveryMeter: cancelling a subscription or revoking
// a key stops calls within 5 s on every meter instance.
func TestRevocationReachesEveryMeter(t *testing.T) {
	dsn := relationaltest.PostgresDSN(t)
	env := map[string]string{
		"AGENTMARKET_DATABASE_URL": dsn,
		"AGENTMARKET_SECRET_KEY":   "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
		"AGENTMARKET_AUTO_APPROVE": "true",
	}
	mk := newMarket(t, env)
	second := startMarketplace(t, env) // a second instance, its own meter and caches
	ep := func(listing string) string { return second.URL + "/a2a/" + listing }

	r := mk.api.with(mk.buyer).do("POST", "/api/v1/api-keys", map[string]any{"name": "orchestrator", "role": "buyer"})
	key, keyID := r.str("key"), r.str("id")
	c03 := rpc{t: t, url: ep(mk.id03), key: key}
	c10 := rpc{t: t, url: ep(mk.id10), key: key, version: "1.0"}
	if _, rerr := c03.call("message/send", msg03("warm up", nil)); rerr != nil {
		t.Fatal(rerr)
	}
	if _, rerr := c10.call("SendMessage", msg10("warm up", nil)); rerr != nil {
		t.Fatal(rerr)
	}
	waitRefused := func(what string, c rpc, send func(c rpc) map[string]any, code int) {
		t.Helper()
		start := time.Now()
		for time.Since(start) < 5*time.Second {
			if rerr := send(c); rerr != nil && rerr["code"] == float64(code) {
				t.Logf("%s refused on the second meter after %s", what, time.Since(start).Round(time.Millisecond))
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("%s: calls still accepted on the second meter after 5s", what)
	}
	send03 := func(c rpc) map[string]any { _, e := c.call("message/send", msg03("still there?", nil)); return e }
	send10 := func(c rpc) map[string]any { _, e := c.call("SendMessage", msg10("still there?", nil)); return e }

	if r := mk.api.with(mk.buyer).do("DELETE", "/api/v1/subscriptions/"+mk.subs[mk.id03], nil); r.Status != 200 || r.str("status") != "canceled" {
		t.Fatalf("cancel subscription: %d %s", r.Status, r.Body)
	}
	waitRefused("canceled subscription", c03, send03, a2aproxy.CodeNotEntitled)
	if rerr := send10(c10); rerr != nil {
		t.Fatalf("the other subscription must still work: %v", rerr)
	}
	if r := mk.api.with(mk.buyer).do("DELETE", "/api/v1/api-keys/"+keyID, nil); r.Status != 200 {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	waitRefused("revoked key", c10, send10, a2aproxy.CodeUnauthorized)
}

// TestDemo: the --demo lines work from a fresh data dir and the usage
// they cause shows in /api/v1/usage, without AGENTMARKET_FETCH_ALLOW_CIDRS
// (--demo lets the meter reach its agents on 127.0.0.1).
func TestDemo(t *testing.T) {
	m := startMarketplace(t, map[string]string{"AGENTMARKET_FETCH_ALLOW_CIDRS": ""}, "--demo")
	out := waitOutput(t, m, "the operator ")
	// The web sign-ins of the demo's parties, each one that works.
	for _, want := range []string{"Sign in to the web UI at " + m.URL + "/signin as",
		"the seller    e-mail " + demoSellerEmail + "  password " + demoPassword,
		"the buyer     e-mail " + demoBuyerEmail + "  password " + demoPassword,
		`the operator  "Sign in with an API key": the key in ` + filepath.Join(m.DataDir, "operator.key")} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %s:\n%s", want, out)
		}
	}
	for _, email := range []string{demoSellerEmail, demoBuyerEmail} {
		if !webSignin(t, m.URL, "/signin", url.Values{"email": {email}, "password": {demoPassword}}) {
			t.Errorf("%s cannot sign in with the printed password", email)
		}
	}
	if !webSignin(t, m.URL, "/signin/key", url.Values{"api_key": {operatorKey(t, m)}}) {
		t.Error("the operator cannot sign in with the key in operator.key")
	}
	// Three agents, each asked something of its own kind.
	for _, want := range []string{"Summarizer ", "Translator ", "Invoice extractor ", `"text":"Summarize the quarterly report for the board"`,
		`"text":"Translate hello world"`, `"text":"Invoice 17: consulting 1200.00, travel 310.50, VAT 302.10"`} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %s:\n%s", want, out)
		}
	}
	var key string
	var endpoints []string
	for _, line := range strings.Split(out, "\n") {
		if k, ok := strings.CutPrefix(strings.TrimSpace(line), "export KEY="); ok {
			key = k
		}
		if i := strings.Index(line, m.URL+"/a2a/"); i >= 0 && strings.Contains(line, "A2A ") {
			endpoints = append(endpoints, strings.Fields(line[i:])[0])
		}
	}
	if key == "" || len(endpoints) < 2 || !strings.Contains(out, "curl -s") {
		t.Fatalf("demo output lacks the key, endpoints or curl lines:\n%s", out)
	}
	c := rpc{t: t, url: endpoints[0], key: key}
	if res, rerr := c.call("message/send", msg03("Summarize the quarterly report for the board", nil)); rerr != nil || get(res, "status", "state") != "completed" {
		t.Fatalf("demo call: %v %v", res, rerr)
	}
	deadline := time.Now().Add(10 * time.Second)
	buyer := client{t: t, base: m.URL, key: key}
	var usage map[string]any
	for {
		r := buyer.do("GET", "/api/v1/usage?group_by=listing", nil)
		if items, _ := r.JSON["items"].([]any); len(items) == 1 && get(items[0].(map[string]any), "calls") == float64(1) {
			usage = items[0].(map[string]any)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("demo call's usage never showed: %s", r.Body)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The invoice preview of that subscription carries the same cost.
	listing := usage["key"].(string)
	subs := buyer.do("GET", "/api/v1/subscriptions", nil)
	var subID string
	for _, it := range subs.JSON["items"].([]any) {
		if it.(map[string]any)["listing_id"] == listing {
			subID = it.(map[string]any)["id"].(string)
		}
	}
	inv := buyer.do("GET", "/api/v1/invoices/preview?subscription_id="+subID, nil)
	if inv.Status != 200 {
		t.Fatalf("invoice preview: %d %s", inv.Status, inv.Body)
	}
	var usageMicros, minor float64
	for _, l := range inv.JSON["lines"].([]any) {
		line := l.(map[string]any)
		minor += line["amount_minor"].(float64)
		if line["kind"] != "flat_fee" {
			usageMicros += line["amount_micros"].(float64)
		}
	}
	if usageMicros != usage["cost_micros"] || usageMicros == 0 {
		t.Errorf("invoice usage lines %v micros, usage API says %v", usageMicros, usage["cost_micros"])
	}
	if minor != inv.JSON["total_minor"] {
		t.Errorf("lines sum to %v minor units, total %v", minor, inv.JSON["total_minor"])
	}
}

// TestListTasksShowsOnlyOwnTasks: the agent lists every buyer's tasks (it
// only sees the marketplace's credentials); the meter keeps the caller's.
func TestListTasksShowsOnlyOwnTasks(t *testing.T) {
	mk := newMarket(t, map[string]string{})
	_, keyB := signup(t, mk.api, "Initech", "it@initech.example")
	if r := mk.api.with(keyB).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": mk.id10}); r.Status != 201 {
		t.Fatalf("B subscribes: %d %s", r.Status, r.Body)
	}
	a := rpc{t: t, url: mk.ep10, key: mk.buyer, version: "1.0"}
	b := rpc{t: t, url: mk.ep10, key: keyB, version: "1.0"}
	resA, _ := a.call("SendMessage", msg10("task of org A", nil))
	resB, _ := b.call("SendMessage", msg10("task of org B", nil))
	for _, c := range []struct {
		who  rpc
		want any
	}{{a, get(resA, "task", "id")}, {b, get(resB, "task", "id")}} {
		res, rerr := c.who.call("ListTasks", map[string]any{})
		if rerr != nil {
			t.Fatalf("ListTasks: %v", rerr)
		}
		tasks, _ := res["tasks"].([]any)
		if len(tasks) != 1 || get(tasks[0].(map[string]any), "id") != c.want || res["totalSize"] != float64(1) {
			t.Errorf("ListTasks = %v, want only task %v", res, c.want)
		}
	}
}
