package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/clickhouse/clickhousetest"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// longExecutor is the agent logic of a long-running agent built on the
// official SDK, with push notifications: the test releases each step of
// its work. Messages:
//   - "long N": works in N steps, each an artifact chunk reporting
//     cumulative usage (10 input tokens, 5·i output tokens, 100·i ms), then
//     completes;
//   - "ask": asks the buyer a question (input-required); the answer
//     completes the task;
//   - "wait": works until canceled.
type longExecutor struct {
	mu      sync.Mutex
	steps   map[a2a.TaskID]chan struct{}
	started chan string // every new task's id
	sdkWaiters
}

func newLongExecutor() *longExecutor {
	return &longExecutor{steps: map[a2a.TaskID]chan struct{}{}, started: make(chan string, 64), sdkWaiters: newSDKWaiters()}
}

func (e *longExecutor) stepChan(id a2a.TaskID) chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch := e.steps[id]
	if ch == nil {
		ch = make(chan struct{}, 64)
		e.steps[id] = ch
	}
	return ch
}

// step lets a task do its next step.
func (e *longExecutor) step(id string) { e.stepChan(a2a.TaskID(id)) <- struct{}{} }

// longUsage is the usage an agent reports after i steps.
func longUsage(i int) map[string]any {
	return map[string]any{wire.UsageExtensionURI: map[string]any{"inputTokens": 10, "outputTokens": 5 * i, "computeMs": 100 * i, "model": "long-1"}}
}

func (e *longExecutor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		text := sdkMessageText(ec.Message)
		if ec.StoredTask != nil && (ec.StoredTask.Status.State == a2a.TaskStateInputRequired || ec.StoredTask.Status.State == a2a.TaskStateAuthRequired) {
			// The buyer's answer to "ask".
			if yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
				yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("Noted: "+text))), nil)
			}
			return
		}
		if ec.StoredTask == nil {
			select {
			case e.started <- string(ec.TaskID):
			default:
			}
			if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		switch {
		case strings.HasPrefix(text, "long "):
			n, _ := strconv.Atoi(strings.TrimPrefix(text, "long "))
			steps := e.stepChan(ec.TaskID)
			var artifact a2a.ArtifactID
			for i := 1; i <= n; i++ {
				select {
				case <-steps:
				case <-ctx.Done():
					return
				case <-e.stop:
					return
				}
				var ev *a2a.TaskArtifactUpdateEvent
				part := a2a.NewTextPart(fmt.Sprintf("part %d;", i))
				if artifact == "" {
					ev = a2a.NewArtifactEvent(ec, part)
					artifact = ev.Artifact.ID
				} else {
					ev = a2a.NewArtifactUpdateEvent(ec, artifact, part)
				}
				ev.Artifact.Metadata = longUsage(i)
				ev.LastChunk = i == n
				if !yield(ev, nil) {
					return
				}
			}
			done := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil)
			done.Metadata = longUsage(n)
			yield(done, nil)
		case text == "sign in":
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateAuthRequired, a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("Sign in to the CRM first."))), nil)
		case text == "ask" || text == "ask later":
			if text == "ask later" {
				select {
				case <-e.stepChan(ec.TaskID):
				case <-ctx.Done():
					return
				case <-e.stop:
					return
				}
			}
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("Which quarter?"))), nil)
		default: // "wait"
			e.wait(ctx, ec.TaskID)
		}
	}
}

// longAgent is an official-SDK agent (A2A 1.0, JSON-RPC) that declares
// push notifications and the usage extension.
type longAgent struct {
	URL  string
	Exec *longExecutor
	Wire *sdkWireLog
	Log  *syncBuffer // what the SDK logged (its push sender's failures)
	// down makes the agent answer 503 to cancels, as an agent being
	// redeployed does.
	down atomic.Bool
}

func startLongAgent(t *testing.T, name string) *longAgent { return startLongAgentV(t, name, "1.0") }

// startLongAgentV starts the agent in A2A version 1.0 or 0.3 (a2av0).
func startLongAgentV(t *testing.T, name, version string) *longAgent {
	t.Helper()
	a := &longAgent{Exec: newLongExecutor(), Wire: &sdkWireLog{}, Log: &syncBuffer{}}
	srv := httptest.NewUnstartedServer(nil)
	a.URL = "http://" + srv.Listener.Addr().String()
	card := &a2a.AgentCard{
		Name: name, Description: "An official a2a-go agent doing long work in steps, with push notifications.", Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{{URL: a.URL, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.ProtocolVersion(version)}},
		Capabilities: a2a.AgentCapabilities{Streaming: true, PushNotifications: true,
			Extensions: []a2a.AgentExtension{{URI: wire.UsageExtensionURI, Description: "AgentMarket usage"}}},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: "long", Name: "Long work", Description: "Works for a long time.", Tags: []string{"test"}}},
	}
	h := a2asrv.NewHandler(a.Exec, a2asrv.WithLogger(slog.New(slog.NewTextHandler(a.Log, nil))),
		a2asrv.WithPushNotifications(push.NewInMemoryStore(), push.NewHTTPPushSender(&push.HTTPSenderConfig{Timeout: 5 * time.Second})))
	mux := http.NewServeMux()
	if version == "0.3" {
		mux.Handle("GET "+a2asrv.WellKnownAgentCardPath, a2asrv.NewAgentCardHandler(a2av0.NewStaticAgentCardProducer(card)))
		mux.Handle("/", a2av0.NewJSONRPCHandler(h))
	} else {
		mux.Handle("GET "+a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
		mux.Handle("/", a2asrv.NewJSONRPCHandler(h))
	}
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x := sdkExchange{Method: r.Method, Path: r.URL.RequestURI(), Version: r.Header.Get("A2A-Version")}
		if r.Body != nil {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(strings.NewReader(string(b)))
			x.RPC, x.ReqBody = sdkRPCMethod(b), sdkClip(b)
		}
		a.Wire.add(x)
		if a.down.Load() && strings.Contains(x.RPC, "ancel") {
			http.Error(w, "redeploying", http.StatusServiceUnavailable)
			return
		}
		mux.ServeHTTP(w, r)
	})
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(a.Exec.stop) })
	return a
}

// calls returns the JSON-RPC calls the agent got of one method.
func (a *longAgent) calls(method string) []sdkExchange {
	var out []sdkExchange
	for _, x := range a.Wire.since(0) {
		if x.RPC == method {
			out = append(out, x)
		}
	}
	return out
}

// webhook is a buyer's webhook: it records what it receives and answers
// 503 while it is "down".
type webhook struct {
	*httptest.Server
	down atomic.Bool
	mu   sync.Mutex
	got  []hookCall
}

type hookCall struct {
	Path, Auth, Token, Token03, DeliveryID, ContentType string
	Body                                                map[string]any
	// Raw is the body as received, Signature its AgentMarket-Signature.
	Raw       []byte
	Signature string
	At        time.Time // when it arrived
}

func startWebhook(t *testing.T) *webhook {
	h := &webhook{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.down.Load() || strings.HasSuffix(r.URL.Path, "/broken") {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		json.Unmarshal(raw, &body)
		h.mu.Lock()
		h.got = append(h.got, hookCall{Path: r.URL.Path, Auth: r.Header.Get("Authorization"), Token: r.Header.Get("A2A-Notification-Token"),
			Token03: r.Header.Get("X-A2A-Notification-Token"), DeliveryID: r.Header.Get("X-AgentMarket-Delivery-Id"),
			ContentType: r.Header.Get("Content-Type"), Body: body, Raw: raw, Signature: r.Header.Get("AgentMarket-Signature"), At: time.Now()})
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.Close)
	return h
}

// received returns the distinct deliveries (by delivery id) to a path, in
// the order they first arrived.
func (h *webhook) received(path string) []hookCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]bool{}
	var out []hookCall
	for _, c := range h.got {
		if c.Path == path && !seen[c.DeliveryID] {
			seen[c.DeliveryID] = true
			out = append(out, c)
		}
	}
	return out
}

// waitFor polls cond every 50ms until it holds or the time is up.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	if !eventually(limit, cond) {
		t.Fatalf("timed out after %s waiting for %s", limit, what)
	}
}

// eventually polls cond every 50ms until it holds (true) or the time is
// up (false).
func eventually(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// freeAddr is a loopback address nothing listens on, so a marketplace can
// be restarted on the address its callbacks were registered under.
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// longMarket is a marketplace with one buyer subscribed to long agents.
type longMarket struct {
	m        *started
	env      map[string]string
	api      client
	seller   string
	buyer    string
	buyerOrg string
}

func newLongMarket(t *testing.T, env map[string]string) *longMarket {
	t.Helper()
	lm := &longMarket{env: env}
	lm.m = startMarketplace(t, env)
	lm.api = client{t: t, base: lm.m.URL}
	_, lm.seller = signup(t, lm.api, "Longrun Labs", "owner@longrun.example")
	lm.buyerOrg, lm.buyer = signup(t, lm.api, "Globex", "it@globex.example")
	return lm
}

// list lists an agent and subscribes the buyer; it returns the listing id
// and the meter endpoint.
func (lm *longMarket) list(t *testing.T, agentURL string, limits, budgets map[string]any) (string, string) {
	t.Helper()
	body := map[string]any{"card_url": agentURL, "pricing": pricing}
	if limits != nil {
		body["limits"] = limits
	}
	r := lm.api.with(lm.seller).do("POST", "/api/v1/listings", body)
	if r.Status != 201 {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	id := r.str("id")
	sub := map[string]any{"listing_id": id}
	if budgets != nil {
		sub["budgets"] = budgets
	}
	r = lm.api.with(lm.buyer).do("POST", "/api/v1/subscriptions", sub)
	if r.Status != 201 {
		t.Fatalf("subscribe: %d %s", r.Status, r.Body)
	}
	return id, r.str("endpoint")
}

// taskRows are the usage rows of one task, once at least want are there.
func taskRows(t *testing.T, m *started, e meterEnv, taskID string, want int) []metering.Usage {
	t.Helper()
	var rows []metering.Usage
	waitFor(t, fmt.Sprintf("%d usage rows of task %s", want, taskID), 20*time.Second, func() bool {
		rows = rows[:0]
		for _, u := range usageRows(t, m, e, 0) {
			if u.TaskID == taskID {
				rows = append(rows, u)
			}
		}
		return len(rows) >= want
	})
	return rows
}

func sumUsage(rows []metering.Usage) (in, out, ms, tasks int64) {
	for _, u := range rows {
		in, out, ms, tasks = in+u.InputTokens, out+u.OutputTokens, ms+u.ComputeMs, tasks+u.Tasks
	}
	return
}

// taskRecord reads a task's life through the API.
func (lm *longMarket) taskRecord(t *testing.T, key, listing, task string) response {
	t.Helper()
	return lm.api.with(key).do("GET", "/api/v1/tasks/"+listing+"/"+task, nil)
}

// endedRecord reads a task's record once the meter has recorded its end
// (an agent sees a cancel before the meter records it).
func (lm *longMarket) endedRecord(t *testing.T, key, listing, task string) response {
	t.Helper()
	var rec response
	waitFor(t, "the end of task "+task+" to be recorded", 5*time.Second, func() bool {
		rec = lm.taskRecord(t, key, listing, task)
		return rec.JSON["ended_at"] != nil
	})
	return rec
}

// events are a task record's events as "kind:actor" strings, and the
// events themselves.
func events(r response) ([]string, []map[string]any) {
	var kinds []string
	var evs []map[string]any
	list, _ := r.JSON["events"].([]any)
	for _, e := range list {
		m, _ := e.(map[string]any)
		kinds = append(kinds, fmt.Sprintf("%v:%v", m["kind"], m["actor"]))
		evs = append(evs, m)
	}
	return kinds, evs
}

// TestInputRequiredPause: each pause and resume of a task is recorded with
// its time; a task left in input-required longer than the longest pause
// (here the buyer's contract sets 1s) is canceled at the agent by the
// meter, with the reason recorded.
func TestInputRequiredPause(t *testing.T) {
	meterEnvs(t, func(t *testing.T, e meterEnv) {
		ag := startLongAgent(t, "Asking agent")
		env := map[string]string{"AGENTMARKET_METER_TASK_SWEEP": "100ms"}
		for k, v := range e.env {
			env[k] = v
		}
		lm := newLongMarket(t, env)
		listing, ep := lm.list(t, ag.URL, nil, map[string]any{"max_pause_ms": 1000})
		b10 := rpc{t: t, url: ep, key: lm.buyer, version: "1.0"}

		// A question answered in time: paused, resumed, ended.
		res, rerr := b10.call("SendMessage", msg10("ask", nil))
		answered, _ := get(res, "task", "id").(string)
		if rerr != nil || get(res, "task", "status", "state") != "TASK_STATE_INPUT_REQUIRED" {
			t.Fatalf("ask: %v %v", res, rerr)
		}
		res, rerr = b10.call("SendMessage", msg10("Q1", map[string]any{"taskId": answered, "contextId": get(res, "task", "contextId")}))
		if rerr != nil || get(res, "task", "status", "state") != "TASK_STATE_COMPLETED" {
			t.Fatalf("answer: %v %v", res, rerr)
		}
		r := lm.taskRecord(t, lm.buyer, listing, answered)
		kinds, evs := events(r)
		if r.Status != 200 || len(kinds) != 3 || kinds[0] != "paused:<nil>" || !strings.HasPrefix(kinds[1], "resumed:key:") || kinds[2] != "ended:<nil>" {
			t.Errorf("answered task's events: %v (%s)", kinds, r.Body)
		} else if evs[0]["state"] != "input-required" || evs[0]["at"] == nil || evs[1]["at"] == nil {
			t.Errorf("pause event: %v", evs[0])
		}

		// A question left unanswered: canceled at the agent after 1s.
		res, _ = b10.call("SendMessage", msg10("ask", nil))
		left, _ := get(res, "task", "id").(string)
		waitFor(t, "the agent to be told to cancel the paused task", 10*time.Second, func() bool { return ag.Exec.wasCanceled(left) })
		rec := lm.endedRecord(t, lm.buyer, listing, left)
		kinds, evs = events(rec)
		if len(kinds) != 2 || kinds[0] != "paused:<nil>" || kinds[1] != "canceled:meter" {
			t.Fatalf("unanswered task's events: %v (%s)", kinds, rec.Body)
		}
		if why := fmt.Sprint(evs[1]["reason"]); !strings.Contains(why, "waited for input") || !strings.Contains(why, "longest pause") {
			t.Errorf("cancel reason: %q", why)
		}
		paused, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(evs[0]["at"]))
		canceled, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(evs[1]["at"]))
		if d := canceled.Sub(paused); d < time.Second || d > 8*time.Second {
			t.Errorf("canceled %s after the pause began, want just over the 1s longest pause", d)
		}
		res, _ = b10.call("GetTask", map[string]any{"id": left})
		if get(res, "status", "state") != "TASK_STATE_CANCELED" {
			t.Errorf("the task at the agent: %v", res)
		}
		// auth-required is a pause too.
		res, _ = b10.call("SendMessage", msg10("sign in", nil))
		signin, _ := get(res, "task", "id").(string)
		waitFor(t, "the auth-required task canceled", 10*time.Second, func() bool { return ag.Exec.wasCanceled(signin) })
		if kinds, evs := events(lm.endedRecord(t, lm.buyer, listing, signin)); len(kinds) != 2 || evs[0]["state"] != "auth-required" || kinds[1] != "canceled:meter" {
			t.Errorf("auth-required task's events: %v %v", kinds, evs)
		}
		// Another org sees no such task.
		_, other := signup(t, lm.api, "Initech", "it@initech.example")
		if r := lm.taskRecord(t, other, listing, left); r.Status != 404 {
			t.Errorf("another org's task record: %d %s", r.Status, r.Body)
		}
	})
}

// TestTaskTimeBudget: a contract's end-to-end budget cancels its task at
// the agent when it runs out, and a task delegated from it never outlives
// it, though its own contract has no budget.
func TestTaskTimeBudget(t *testing.T) {
	ag, other := startLongAgent(t, "Slow agent"), startLongAgent(t, "Helper agent")
	lm := newLongMarket(t, map[string]string{"AGENTMARKET_METER_TASK_SWEEP": "100ms"})
	listing, ep := lm.list(t, ag.URL, nil, map[string]any{"task_timeout_ms": 1500})
	hl, hep := lm.list(t, other.URL, nil, nil)
	params := msg10("wait", nil)
	params["configuration"] = map[string]any{"returnImmediately": true}
	res, e := (rpc{t: t, url: ep, key: lm.buyer, version: "1.0"}).call("SendMessage", params)
	if e != nil {
		t.Fatal(e)
	}
	task, _ := get(res, "task", "id").(string)
	params = msg10("wait", map[string]any{"metadata": map[string]any{wire.ParentTaskKey: task}})
	params["configuration"] = map[string]any{"returnImmediately": true}
	res, _ = (rpc{t: t, url: hep, key: lm.buyer, version: "1.0"}).call("SendMessage", params)
	child, _ := get(res, "task", "id").(string)
	if r := lm.taskRecord(t, lm.buyer, hl, child); r.JSON["deadline_at"] == nil || r.JSON["deadline_at"] != lm.taskRecord(t, lm.buyer, listing, task).JSON["deadline_at"] {
		t.Errorf("the delegated task's deadline: %s", r.Body)
	}
	waitFor(t, "both tasks canceled at their agents", 10*time.Second, func() bool {
		return ag.Exec.wasCanceled(task) && other.Exec.wasCanceled(child)
	})
	kinds, evs := events(lm.endedRecord(t, lm.buyer, listing, task))
	if len(kinds) != 1 || kinds[0] != "canceled:meter" || !strings.Contains(fmt.Sprint(evs[0]["reason"]), "end-to-end time budget") {
		t.Errorf("events: %v %v", kinds, evs)
	}

	// The per-hop budget of the contract, changed later: a blocking call
	// waits 300ms for the agent, not the meter's 30s.
	subs := lm.api.with(lm.buyer).do("GET", "/api/v1/subscriptions", nil)
	var subID string
	for _, it := range subs.JSON["items"].([]any) {
		if m := it.(map[string]any); m["listing_id"] == listing {
			subID, _ = m["id"].(string)
		}
	}
	r := lm.api.with(lm.buyer).do("PATCH", "/api/v1/subscriptions/"+subID, map[string]any{"budgets": map[string]any{"request_timeout_ms": 300}})
	if r.Status != 200 || get(r.JSON, "budgets", "request_timeout_ms") != float64(300) || get(r.JSON, "budgets", "task_timeout_ms") != float64(1500) {
		t.Fatalf("patch budgets: %d %s", r.Status, r.Body)
	}
	if r := lm.api.with(lm.buyer).do("PATCH", "/api/v1/subscriptions/"+subID, map[string]any{"budgets": map[string]any{"max_pause_ms": -5}}); r.Status != 422 {
		t.Errorf("a negative budget: %d %s", r.Status, r.Body)
	}
	time.Sleep(2500 * time.Millisecond) // the meters' contract cache (2s)
	start := time.Now()
	_, e = (rpc{t: t, url: ep, key: lm.buyer, version: "1.0"}).call("SendMessage", msg10("wait", nil))
	if e == nil || e["code"] != float64(-32051) || time.Since(start) > 5*time.Second {
		t.Errorf("a blocking call past the contract's per-hop budget: %v after %s, want -32051 after about 300ms", e, time.Since(start))
	}
}

// openStream starts a streaming call and returns its events as they
// arrive; close ends the connection (the buyer leaving).
func openStream(t *testing.T, r rpc, method string, params any) (events <-chan map[string]any, leave func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequestWithContext(ctx, "POST", r.url, strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+r.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", r.version)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("%s: %v", method, err)
	}
	ch := make(chan map[string]any, 64)
	go func() {
		defer close(ch)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				json.Unmarshal([]byte(d), &m)
				ch <- m
			}
		}
	}()
	return ch, cancel
}

// eventLabel names a 1.0 stream event: the artifact chunk's text or the
// state.
func eventLabel(ev map[string]any) string {
	r, _ := ev["result"].(map[string]any)
	switch {
	case r["artifactUpdate"] != nil:
		return firstText(get(r, "artifactUpdate", "artifact", "parts"))
	case r["statusUpdate"] != nil:
		return fmt.Sprint(get(r, "statusUpdate", "status", "state"))
	case r["task"] != nil:
		return "task:" + fmt.Sprint(get(r, "task", "status", "state"))
	}
	return fmt.Sprint(ev)
}

// next waits for the next event of a stream.
func next(t *testing.T, evs <-chan map[string]any) string {
	t.Helper()
	select {
	case ev, ok := <-evs:
		if !ok {
			t.Fatal("the stream ended")
		}
		return eventLabel(ev)
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return ""
}

// TestResubscribeOnAnotherMeter: two meters share PostgreSQL and
// ClickHouse. A buyer streaming a long task through the first leaves
// mid-stream, and re-attaches (SubscribeToTask) through the second: it
// gets the rest of the events, and the task's usage in ClickHouse is what
// the agent reported, though both meters followed the task.
func TestResubscribeOnAnotherMeter(t *testing.T) {
	ch := clickhousetest.DSN(t)
	e := meterEnv{name: "postgres", chDSN: ch, env: map[string]string{
		"AGENTMARKET_DATABASE_URL":     relationaltest.PostgresDSN(t),
		"AGENTMARKET_SECRET_KEY":       "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
		"AGENTMARKET_AUTO_APPROVE":     "true",
		"AGENTMARKET_CLICKHOUSE_URL":   ch,
		"AGENTMARKET_METER_TASK_SWEEP": "1s",
	}}
	ag := startLongAgent(t, "Streaming agent")
	lm := newLongMarket(t, e.env)
	listing, ep1 := lm.list(t, ag.URL, nil, nil)
	second := startMarketplace(t, e.env)
	ep2 := second.URL + "/a2a/" + listing

	evs, leave := openStream(t, rpc{t: t, url: ep1, key: lm.buyer, version: "1.0"}, "SendStreamingMessage", msg10("long 4", nil))
	var task string
	first := <-evs
	if id, _ := get(first, "result", "task", "id").(string); id != "" {
		task = id
	} else {
		t.Fatalf("first event: %v", first)
	}
	ag.Exec.step(task)
	for l := next(t, evs); l != "part 1;"; l = next(t, evs) {
	}
	leave() // the buyer's connection drops
	ag.Exec.step(task)

	evs2, stop := openStream(t, rpc{t: t, url: ep2, key: lm.buyer, version: "1.0"}, "SubscribeToTask", map[string]any{"id": task})
	defer stop()
	snapshot := next(t, evs2)
	if !strings.HasPrefix(snapshot, "task:") {
		t.Errorf("re-attached stream began with %q, want the task", snapshot)
	}
	ag.Exec.step(task)
	ag.Exec.step(task)
	var rest []string
	for l := next(t, evs2); ; l = next(t, evs2) {
		rest = append(rest, l)
		if l == "TASK_STATE_COMPLETED" {
			break
		}
	}
	if strings.Join(rest, " ") != "part 3; part 4; TASK_STATE_COMPLETED" && strings.Join(rest, " ") != "part 2; part 3; part 4; TASK_STATE_COMPLETED" {
		t.Errorf("after re-attaching: %q", rest)
	}
	// Both meters meter the task (the first settles it by polling the
	// agent); ClickHouse holds the agent's report once.
	var rows []metering.Usage
	waitFor(t, "both meters' rows", 30*time.Second, func() bool {
		rows = taskRows(t, lm.m, e, task, 2)
		_, out, _, _ := sumUsage(rows)
		return out >= 20 && len(rows) >= 2
	})
	time.Sleep(1500 * time.Millisecond) // room for a double count to show
	rows = taskRows(t, lm.m, e, task, 2)
	in, out, ms, tasks := sumUsage(rows)
	if in != 10 || out != 20 || ms != 400 || tasks != 1 {
		t.Errorf("task usage in ClickHouse: input %d output %d compute %d tasks %d; want 10, 20, 400, 1", in, out, ms, tasks)
	}
	methods := map[string]bool{}
	for _, u := range rows {
		methods[u.Method] = true
		if u.BuyerOrgID != lm.buyerOrg || u.ListingID != listing {
			t.Errorf("row attributed to %s/%s", u.BuyerOrgID, u.ListingID)
		}
	}
	if !methods["SendStreamingMessage"] || !methods["SubscribeToTask"] {
		t.Errorf("rows' methods: %v", methods)
	}
}
