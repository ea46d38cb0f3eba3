package a2aproxy_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/agentcard"
	"github.com/agentmarket/agentmarket/listings/httpfetch"
	"github.com/agentmarket/agentmarket/metering"
)

// The proxy core's own tests: a whole meter built from the package's
// interfaces with in-memory parts (no cmd, no database), in front of an
// agent on loopback that records what reaches it. They check what a buyer
// and a seller would see: the bytes on both wires and the usage row.

// coreAgent is a canned JSON-RPC agent: every send creates a task and
// reports usage; GetTask answers the task; SendStreamingMessage answers two
// events. It keeps every request it got.
type coreAgent struct {
	*httptest.Server
	version string // "0.3" or "1.0"
	reuse   string // when set, the id of every task it creates (an agent that reuses ids)
	state   string // the 1.0 state of its tasks; "" is TASK_STATE_COMPLETED
	mu      sync.Mutex
	got     []*agentRequest
	n       int
}

type agentRequest struct {
	header http.Header
	method string
	body   []byte
}

func startCoreAgent(t testing.TB, version string) *coreAgent {
	t.Helper()
	a := &coreAgent{version: version}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.Close)
	return a
}

func (a *coreAgent) requests() []*agentRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*agentRequest(nil), a.got...)
}

// answer is the canned result of a method, in the agent's version.
func (a *coreAgent) answer(method string, params json.RawMessage) (result string, task string) {
	usage := fmt.Sprintf(`{%q:{"inputTokens":12,"outputTokens":34,"computeMs":56,"model":"core-1"}}`, wire.UsageExtensionURI)
	var p struct {
		ID      string `json:"id"`
		Message struct {
			TaskID string `json:"taskId"`
		} `json:"message"`
	}
	_ = json.Unmarshal(params, &p)
	if p.ID == "" {
		p.ID = p.Message.TaskID
	}
	a.mu.Lock()
	a.n++
	task = fmt.Sprintf("task-%d", a.n)
	a.mu.Unlock()
	if p.ID != "" {
		task = p.ID
	} else if a.reuse != "" {
		task = a.reuse
	}
	if a.version == "0.3" {
		return fmt.Sprintf(`{"kind":"task","id":%q,"contextId":"ctx-1","status":{"state":"completed"},"metadata":%s}`, task, usage), task
	}
	state := a.state
	if state == "" {
		state = "TASK_STATE_COMPLETED"
	}
	t := fmt.Sprintf(`{"id":%q,"contextId":"ctx-1","status":{"state":%q},"metadata":%s}`, task, state, usage)
	if method == "GetTask" {
		return t, task
	}
	return `{"task":` + t + `}`, task
}

func (a *coreAgent) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var env struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(body, &env)
	a.mu.Lock()
	a.got = append(a.got, &agentRequest{header: r.Header.Clone(), method: env.Method, body: body})
	a.mu.Unlock()
	if env.Method == "SendStreamingMessage" || env.Method == "message/stream" {
		w.Header().Set("Content-Type", "text/event-stream")
		working := `{"statusUpdate":{"taskId":"task-s","contextId":"ctx-1","status":{"state":"TASK_STATE_WORKING"}}}`
		done := fmt.Sprintf(`{"statusUpdate":{"taskId":"task-s","contextId":"ctx-1","status":{"state":"TASK_STATE_COMPLETED"},"metadata":{%q:{"inputTokens":3,"outputTokens":4}}}}`, wire.UsageExtensionURI)
		for _, ev := range []string{working, done} {
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n\n", env.ID, ev)
			w.(http.Flusher).Flush()
		}
		return
	}
	result, _ := a.answer(env.Method, env.Params)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, env.ID, result)
}

// coreMarket is everything the meter asks about: two buyer orgs with a key
// each, one listing whose agent is a coreAgent, contracts for both orgs.
type coreMarket struct {
	proxy   *a2aproxy.Proxy
	listing *a2aproxy.Target
	mu      sync.Mutex
	owners  map[string]contracts.TaskBinding
	rows    []metering.Usage
	// markDown fails MarkTaskReused (and incidents) while set; reused
	// holds the marks, incidents the listings marked.
	markDown  error
	reused    map[string]bool
	incidents []string
	push      *corePush // set before startCore: the meter relays push notifications
	life      *coreLife // set before startCore: the meter records task life
	// others are listings beside listing, each with its own contract;
	// fallbacks are those of the contracts to listing.
	others    map[string]*a2aproxy.Target
	fallbacks []string
}

func (m *coreMarket) Authenticate(_ context.Context, secret string) (agentmarket.Actor, error) {
	switch secret {
	case "amk_acme":
		return agentmarket.Actor{OrgID: "org_acme", KeyID: "key_acme", Role: agentmarket.RoleBuyer}, nil
	case "amk_initech":
		return agentmarket.Actor{OrgID: "org_initech", KeyID: "key_initech", Role: agentmarket.RoleAdmin}, nil
	case "amk_budgeted": // a budget no call reaches, so that every call reserves and settles
		budget := agentmarket.MaxBudgetMicros
		return agentmarket.Actor{OrgID: "org_acme", KeyID: "key_budgeted", Role: agentmarket.RoleBuyer, KeyBudgetMicros: &budget}, nil
	case "amk_limited": // every rate limit, none reached: every call takes and gives back (ratelimit.go)
		return agentmarket.Actor{OrgID: "org_acme", KeyID: "key_limited", Role: agentmarket.RoleBuyer, KeyRateLimits: agentmarket.RateLimits{
			RequestsPerSecond: agentmarket.MaxRequestsPerSecond, RequestsPerMinute: agentmarket.MaxRequestsPerMinute,
			TokensPerMinute: agentmarket.MaxTokensPerMinute, MaxInFlight: agentmarket.MaxInFlight}}, nil
	}
	return agentmarket.Actor{}, agentmarket.Errorf(agentmarket.Unauthorized, "bad_key", "unknown key")
}

// Spent implements a2aproxy.Spend: nothing was spent before.
func (m *coreMarket) Spent(context.Context, string, string, time.Time) (int64, error) { return 0, nil }

func (m *coreMarket) Resolve(_ context.Context, id string) (*a2aproxy.Target, error) {
	if t := m.others[id]; t != nil {
		return t, nil
	}
	if id != m.listing.ListingID {
		return nil, agentmarket.Errorf(agentmarket.NotFound, "not_found", "no listing")
	}
	return m.listing, nil
}

func (m *coreMarket) Plan(context.Context, string, int) (*listings.Plan, error) {
	return &listings.Plan{Version: 1, Currency: "usd", InputTokensPerMillionMicros: 1_000_000, OutputTokensPerMillionMicros: 2_000_000}, nil
}

func (m *coreMarket) OpenContract(_ context.Context, org, listing string) (*contracts.Contract, error) {
	if m.others[listing] != nil {
		return &contracts.Contract{ID: "ctr_" + org + "_" + listing, BuyerOrgID: org, ListingID: listing, PlanVersion: 1, Status: contracts.ContractActive}, nil
	}
	return &contracts.Contract{ID: "ctr_" + org, BuyerOrgID: org, ListingID: listing, PlanVersion: 1, Status: contracts.ContractActive,
		Fallbacks: m.fallbacks}, nil
}

func (m *coreMarket) Allowed(string, string, string, string) (bool, error) { return true, nil }

func (m *coreMarket) BindTask(_ context.Context, b contracts.TaskBinding) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := b.ListingID + "|" + b.TaskID
	if got, ok := m.owners[k]; ok {
		return got.OrgID, nil
	}
	m.owners[k] = b
	return b.OrgID, nil
}

func (m *coreMarket) TaskOwner(_ context.Context, listing, task string) (*contracts.TaskBinding, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.owners[listing+"|"+task]; ok {
		return &b, nil
	}
	return nil, agentmarket.Errorf(agentmarket.NotFound, "not_found", "no task")
}

func (m *coreMarket) MarkTaskReused(_ context.Context, listing, task string, _ time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.markDown != nil {
		return m.markDown
	}
	if _, ok := m.owners[listing+"|"+task]; !ok {
		return agentmarket.Errorf(agentmarket.NotFound, "not_found", "no task")
	}
	if m.reused == nil {
		m.reused = map[string]bool{}
	}
	m.reused[listing+"|"+task] = true
	return nil
}

func (m *coreMarket) RecordIncident(_ context.Context, listing, _ string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.markDown != nil {
		return m.markDown
	}
	m.incidents = append(m.incidents, listing)
	return nil
}

func (m *coreMarket) RecordLostTask(context.Context, string) error { return nil }

func (m *coreMarket) Record(_ context.Context, u metering.Usage) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rows = append(m.rows, u)
	return nil
}

func (m *coreMarket) Err() error { return nil }

func (m *coreMarket) usage() []metering.Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]metering.Usage(nil), m.rows...)
}

// startCore builds a meter in front of agent and serves it on a Fiber app.
func startCore(t testing.TB, agent *coreAgent) (*fiber.App, *coreMarket) {
	return startCoreWith(t, agent, nil)
}

func startCoreWith(t testing.TB, agent *coreAgent, push *corePush, life ...*coreLife) (*fiber.App, *coreMarket) {
	t.Helper()
	p, m := newCoreProxy(t, agent, push, life...)
	return mountCore(p, m)
}

// newCoreProxy is startCoreWith's meter before Init, for a test to set
// more of it.
func newCoreProxy(t testing.TB, agent *coreAgent, push *corePush, life ...*coreLife) (*a2aproxy.Proxy, *coreMarket) {
	t.Helper()
	card := &agentcard.Card{Name: "Core agent",
		Interfaces:   []agentcard.Interface{{URL: agent.URL, Binding: agentcard.BindingJSONRPC, ProtocolVersion: agent.version}},
		Capabilities: agentcard.Capabilities{Streaming: true, Extensions: []agentcard.Extension{{URI: wire.UsageExtensionURI}}}}
	m := &coreMarket{push: push, life: append(life, nil)[0], owners: map[string]contracts.TaskBinding{}, listing: &a2aproxy.Target{ListingID: "lst_core", SellerOrgID: "org_seller",
		Published: true, Card: card, CardJSON: []byte(`{}`), UpstreamAuth: &listings.UpstreamAuth{Header: "X-Seller-Key", Value: "seller-secret"}}}
	allow, err := httpfetch.ParseCIDRs("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	p := &a2aproxy.Proxy{PublicURL: "http://meter.test", Auth: m, Resolver: m, Plans: m, Contracts: m, Entitlements: m, Owners: m,
		Recorder: m, Incidents: m, Spend: m, Guard: httpfetch.Guard{Allow: allow}, Clock: agentmarket.SystemClock{}, Logger: slog.New(slog.DiscardHandler)}
	if m.life != nil {
		p.Tasks = m.life
	}
	if m.push != nil {
		p.Push = &a2aproxy.Push{Store: m.push, Guard: httpfetch.Guard{Allow: allow}}
	}
	return p, m
}

// mountCore starts p and serves it on a Fiber app.
func mountCore(p *a2aproxy.Proxy, m *coreMarket) (*fiber.App, *coreMarket) {
	p.Init()
	m.proxy = p
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	p.Mount(app)
	return app, m
}

// do sends a buyer's request to the meter and returns the answer.
func do(t *testing.T, app *fiber.App, method, path, key, version, body string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	if version != "" {
		req.Header.Set("A2A-Version", version)
	}
	req.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	res, err := app.Test(req, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

const send10 = `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"hello there"}]}}}`

// TestCoreSendPassesThrough: a 1.0 send to a 1.0 agent reaches the agent
// with the seller's credentials (never the buyer's key), the usage
// extension activated and the trace carried on; the buyer gets the agent's
// bytes; one usage row names the buyer, the key, the task and what the
// agent reported, with the task's binding and a bill pending on it.
func TestCoreSendPassesThrough(t *testing.T) {
	agent := startCoreAgent(t, "1.0")
	app, m := startCore(t, agent)
	res, body := do(t, app, "POST", "/a2a/lst_core", "amk_acme", "1.0", send10)
	want := `{"jsonrpc":"2.0","id":7,"result":{"task":{"id":"task-1","contextId":"ctx-1","status":{"state":"TASK_STATE_COMPLETED"},"metadata":{"` +
		wire.UsageExtensionURI + `":{"inputTokens":12,"outputTokens":34,"computeMs":56,"model":"core-1"}}}}}`
	if res.StatusCode != 200 || body != want {
		t.Fatalf("answer: %d %s\nwant the agent's bytes: %s", res.StatusCode, body, want)
	}
	got := agent.requests()
	if len(got) != 1 {
		t.Fatalf("the agent got %d requests", len(got))
	}
	h := got[0].header
	if h.Get("Authorization") != "" || h.Get("X-Seller-Key") != "seller-secret" || h.Get("A2A-Version") != "1.0" ||
		h.Get("A2A-Extensions") != wire.UsageExtensionURI || !strings.HasPrefix(h.Get("traceparent"), "00-0af7651916cd43dd8448eb211c80319c-") {
		t.Errorf("headers at the agent: %v", h)
	}
	if string(got[0].body) != send10 {
		t.Errorf("body at the agent: %s", got[0].body)
	}
	rows := m.usage()
	if len(rows) != 1 {
		t.Fatalf("%d usage rows", len(rows))
	}
	u := rows[0]
	if u.ListingID != "lst_core" || u.BuyerOrgID != "org_acme" || u.APIKeyID != "key_acme" || u.ContractID != "ctr_org_acme" ||
		u.TaskID != "task-1" || u.Method != "SendMessage" || u.ProtocolVersion != "1.0" || u.State != "completed" || u.Estimated ||
		u.Model != "core-1" || u.TraceID != "0af7651916cd43dd8448eb211c80319c" || u.Binds == nil {
		t.Errorf("usage row: %+v", u)
	}
	if pb := u.Pending; pb == nil || pb.Key != "task-1" || pb.Cum != (metering.Counters{InputTokens: 12, OutputTokens: 34, ComputeMs: 56}) ||
		pb.Rates.InputTokensPerMillion != 1_000_000 {
		t.Errorf("pending bill: %+v", u.Pending)
	}
}

// TestCoreOtherOrgsTask: another org's GetTask of a task is TaskNotFound,
// as for a task that does not exist, and never reaches the agent; the
// owner's own reaches it.
func TestCoreOtherOrgsTask(t *testing.T) {
	agent := startCoreAgent(t, "1.0")
	app, _ := startCore(t, agent)
	do(t, app, "POST", "/a2a/lst_core", "amk_acme", "1.0", send10)
	get := `{"jsonrpc":"2.0","id":8,"method":"GetTask","params":{"id":"task-1"}}`
	if _, body := do(t, app, "POST", "/a2a/lst_core", "amk_initech", "1.0", get); !strings.Contains(body, `"code":-32001`) {
		t.Errorf("another org's GetTask: %s", body)
	}
	if n := len(agent.requests()); n != 1 {
		t.Errorf("the agent got %d requests, want 1 (the send)", n)
	}
	if _, body := do(t, app, "POST", "/a2a/lst_core", "amk_acme", "1.0", get); !strings.Contains(body, `"id":"task-1"`) {
		t.Errorf("the owner's GetTask: %s", body)
	}
}

// TestCoreTranslatesVersions: a 0.3 buyer's message/send to an agent that
// speaks only 1.0 reaches it as SendMessage; the buyer gets a 0.3 task.
func TestCoreTranslatesVersions(t *testing.T) {
	agent := startCoreAgent(t, "1.0")
	app, m := startCore(t, agent)
	send03 := `{"jsonrpc":"2.0","id":"a","method":"message/send","params":{"message":{"kind":"message","messageId":"m-3","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`
	_, body := do(t, app, "POST", "/a2a/lst_core", "amk_acme", "", send03)
	var got struct {
		ID     string `json:"id"`
		Result struct {
			Kind   string `json:"kind"`
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil || got.ID != "a" || got.Result.Kind != "task" || got.Result.ID != "task-1" ||
		got.Result.Status.State != "completed" {
		t.Errorf("0.3 answer: %s", body)
	}
	if r := agent.requests(); len(r) != 1 || r[0].method != "SendMessage" || r[0].header.Get("A2A-Version") != "1.0" {
		t.Errorf("at the agent: %+v", r)
	}
	if rows := m.usage(); len(rows) != 1 || rows[0].ProtocolVersion != "0.3" || rows[0].Method != "message/send" {
		t.Errorf("usage rows: %+v", rows)
	}
}

// TestCoreRESTBuyer: an HTTP+JSON buyer's send goes to the JSON-RPC agent
// as the JSON-RPC request and gets the REST answer: the task itself.
func TestCoreRESTBuyer(t *testing.T) {
	agent := startCoreAgent(t, "1.0")
	app, _ := startCore(t, agent)
	res, body := do(t, app, "POST", "/a2a/lst_core/message:send", "amk_acme", "1.0",
		`{"message":{"messageId":"m-r","role":"ROLE_USER","parts":[{"text":"hi"}]}}`)
	if res.StatusCode != 200 || !strings.HasPrefix(body, `{"task":{"id":"task-1"`) {
		t.Errorf("REST answer: %d %s", res.StatusCode, body)
	}
	if r := agent.requests(); len(r) != 1 || r[0].method != "SendMessage" {
		t.Errorf("at the agent: %+v", r)
	}
}

// TestCoreStreamRelaysEvents: a stream's events reach the buyer one by one
// as SSE, and the call's usage row is recorded once the stream ended, with
// the agent's final report.
func TestCoreStreamRelaysEvents(t *testing.T) {
	agent := startCoreAgent(t, "1.0")
	app, m := startCore(t, agent)
	res, body := do(t, app, "POST", "/a2a/lst_core", "amk_acme", "1.0", strings.Replace(send10, "SendMessage", "SendStreamingMessage", 1))
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q: %s", ct, body)
	}
	var states []string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var ev struct {
				Result struct {
					StatusUpdate struct {
						Status struct {
							State string `json:"state"`
						} `json:"status"`
					} `json:"statusUpdate"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(d), &ev); err != nil {
				t.Fatalf("event %s: %v", d, err)
			}
			states = append(states, ev.Result.StatusUpdate.Status.State)
		}
	}
	if strings.Join(states, ",") != "TASK_STATE_WORKING,TASK_STATE_COMPLETED" {
		t.Errorf("events: %v\n%s", states, body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(m.usage()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	rows := m.usage()
	if len(rows) != 1 || rows[0].TaskID != "task-s" || rows[0].State != "completed" || rows[0].Pending == nil ||
		rows[0].Pending.Cum.OutputTokens != 4 {
		t.Errorf("usage rows: %+v", rows)
	}
}

// TestCoreStreamIsNotBuffered: the meter relays each event of a stream
// as it comes. The agent sends its second event only once the buyer has
// read the first through the meter, so a relay that held events back
// would keep the buyer waiting for good: the test decides by cause, not
// by timing.
func TestCoreStreamIsNotBuffered(t *testing.T) {
	read := make(chan struct{})
	agent := startCoreAgent(t, "1.0")
	agent.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var env struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&env)
		w.Header().Set("Content-Type", "text/event-stream")
		ev := func(state string) {
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"statusUpdate\":{\"taskId\":\"task-b\",\"contextId\":\"ctx-1\",\"status\":{\"state\":%q}}}}\n\n", env.ID, state)
			w.(http.Flusher).Flush()
		}
		ev("TASK_STATE_WORKING")
		select {
		case <-read:
		case <-time.After(10 * time.Second):
		}
		ev("TASK_STATE_COMPLETED")
	})
	app, _ := startCore(t, agent)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go app.Listener(ln)
	t.Cleanup(func() { app.Shutdown() })
	req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/a2a/lst_core", strings.NewReader(strings.Replace(send10, "SendMessage", "SendStreamingMessage", 1)))
	req.Header.Set("Authorization", "Bearer amk_acme")
	req.Header.Set("A2A-Version", "1.0")
	// The answer's headers come with the first event: the request is
	// read on its own goroutine so that a relay holding the first event
	// back is seen by the timeout below too.
	lines := make(chan string)
	go func() {
		defer close(lines)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				lines <- sc.Text()
			}
		}
	}()
	for i, want := range []string{"TASK_STATE_WORKING", "TASK_STATE_COMPLETED"} {
		select {
		case l := <-lines:
			if !strings.Contains(l, want) {
				t.Fatalf("event %d: %s, want %s", i, l, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d (%s) did not reach the buyer while the agent waited for the buyer to read it: the relay holds events back", i, want)
		}
		if i == 0 {
			close(read)
		}
	}
}

// TestCoreReusedTaskMarkedLater: an agent that answers a second org with
// the first org's task id: the answer is withheld (-32056), and when the
// store cannot take the reuse mark and the listing's incident then, the
// task sweeper writes them later, so other meters stop relaying the task
// too and the listing is marked.
func TestCoreReusedTaskMarkedLater(t *testing.T) {
	agent := startCoreAgent(t, "1.0")
	agent.reuse = "task-same"
	app, m := startCore(t, agent)
	if _, body := do(t, app, "POST", "/a2a/lst_core", "amk_acme", "1.0", send10); !strings.Contains(body, `"id":"task-same"`) {
		t.Fatalf("first send: %s", body)
	}
	m.mu.Lock()
	m.markDown = errors.New("database is locked")
	m.mu.Unlock()
	_, body := do(t, app, "POST", "/a2a/lst_core", "amk_initech", "1.0", strings.Replace(send10, "m-1", "m-2", 1))
	if !strings.Contains(body, `"code":-32056`) || strings.Contains(body, "task-same") {
		t.Fatalf("second org's send: %s", body)
	}
	m.proxy.RetryReuseMarks(context.Background())
	if m.reused["lst_core|task-same"] {
		t.Fatal("marked while the store was down")
	}
	m.mu.Lock()
	m.markDown = nil
	m.mu.Unlock()
	m.proxy.RetryReuseMarks(context.Background())
	m.proxy.WriteLater(context.Background())
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.reused["lst_core|task-same"] {
		t.Error("the sweeper did not mark the reused task once the store was back")
	}
	if len(m.incidents) != 1 || m.incidents[0] != "lst_core" {
		t.Errorf("the listing's incidents once the store was back: %v, want one", m.incidents)
	}
}

// corePush is the push store of one callback, whose outbox can fail.
type corePush struct {
	contracts.PushStore
	cfg         contracts.PushConfig
	mu          sync.Mutex
	enqueueDown error
	enqueued    []string
}

func (f *corePush) PushCallback(_ context.Context, id string) (*contracts.PushConfig, error) {
	if id != f.cfg.CallbackID {
		return nil, agentmarket.Errorf(agentmarket.NotFound, "not_found", "no callback")
	}
	c := f.cfg
	return &c, nil
}

func (f *corePush) Enqueue(_ context.Context, d contracts.Delivery) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.enqueueDown != nil {
		return false, f.enqueueDown
	}
	f.enqueued = append(f.enqueued, d.ID)
	return true, nil
}

// TestCoreNotificationMeteredOnce: an agent's notification whose delivery
// could not be stored is refused (503) and sent again by the agent; both
// times its usage row has the same id, so the store and the ledger (which
// take a row once by its id) bill it once.
func TestCoreNotificationMeteredOnce(t *testing.T) {
	agent := startCoreAgent(t, "1.0")
	sum := sha256.Sum256([]byte("agent-secret"))
	push := &corePush{cfg: contracts.PushConfig{ListingID: "lst_core", TaskID: "task-1", ConfigID: "cfg-1", OrgID: "org_acme", APIKeyID: "key_acme",
		Version: "1.0", URL: "https://hooks.example/x", CallbackID: "cb_1", SecretHash: hex.EncodeToString(sum[:])}}
	app, m := startCoreWith(t, agent, push)
	do(t, app, "POST", "/a2a/lst_core", "amk_acme", "1.0", send10)
	note := fmt.Sprintf(`{"statusUpdate":{"taskId":"task-1","contextId":"ctx-1","status":{"state":"TASK_STATE_WORKING"},"metadata":{%q:{"inputTokens":12,"outputTokens":50}}}}`, wire.UsageExtensionURI)
	post := func() int {
		req := httptest.NewRequest("POST", a2aproxy.CallbackPath+"cb_1", strings.NewReader(note))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Notification-Token", "agent-secret")
		res, err := app.Test(req, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode
	}
	push.enqueueDown = errors.New("database is locked")
	if status := post(); status != http.StatusServiceUnavailable {
		t.Fatalf("with the outbox down: %d, want 503", status)
	}
	push.enqueueDown = nil
	if status := post(); status != http.StatusOK {
		t.Fatalf("the agent's retry: %d, want 200", status)
	}
	var ids []string
	for _, u := range m.usage() {
		if u.Method == "push" {
			ids = append(ids, u.ID)
		}
	}
	if len(ids) != 2 || ids[0] != ids[1] || !strings.HasPrefix(ids[0], "use_push_") {
		t.Errorf("the notification's usage rows: %v, want two of one id", ids)
	}
	if len(push.enqueued) != 1 {
		t.Errorf("deliveries enqueued: %v", push.enqueued)
	}
}

// coreLife records the life events written, and can be down.
type coreLife struct {
	contracts.TaskLife
	mu     sync.Mutex
	down   error
	events []string
}

func (l *coreLife) write(e contracts.TaskEvent) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down != nil {
		return false, l.down
	}
	l.events = append(l.events, e.TaskID+":"+string(e.Kind))
	return true, nil
}

func (l *coreLife) TaskPaused(_ context.Context, e contracts.TaskEvent, _ *time.Time) (bool, error) {
	return l.write(e)
}
func (l *coreLife) TaskResumed(_ context.Context, e contracts.TaskEvent) (bool, error) {
	return l.write(e)
}
func (l *coreLife) TaskEnded(_ context.Context, e contracts.TaskEvent) (bool, error) {
	return l.write(e)
}

// TestCoreLifeRetriedInOrder: a pause the store did not take is written by
// the task sweeper later, and the resume that came meanwhile after it,
// never before.
func TestCoreLifeRetriedInOrder(t *testing.T) {
	agent := startCoreAgent(t, "1.0")
	life := &coreLife{}
	app, m := startCoreWith(t, agent, nil, life)
	agent.state = "TASK_STATE_INPUT_REQUIRED"
	life.down = errors.New("database is locked")
	if _, body := do(t, app, "POST", "/a2a/lst_core", "amk_acme", "1.0", send10); !strings.Contains(body, "INPUT_REQUIRED") {
		t.Fatalf("send: %s", body)
	}
	life.mu.Lock()
	life.down = nil
	life.mu.Unlock()
	agent.state = "TASK_STATE_WORKING"
	answer := `{"jsonrpc":"2.0","id":9,"method":"SendMessage","params":{"message":{"messageId":"m-9","taskId":"task-1","role":"ROLE_USER","parts":[{"text":"Q3"}]}}}`
	if _, body := do(t, app, "POST", "/a2a/lst_core", "amk_acme", "1.0", answer); !strings.Contains(body, "WORKING") {
		t.Fatalf("the buyer's answer: %s", body)
	}
	if len(life.events) != 0 {
		t.Fatalf("the resume was written before its pause: %v", life.events)
	}
	m.proxy.RetryLife(context.Background())
	if got := strings.Join(life.events, " "); got != "task-1:paused task-1:resumed" {
		t.Errorf("life written by the sweeper: %q, want the pause then the resume", got)
	}
}
