package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/cmd/internal/demoagent"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// lookalikes are spellings of taskId that a case-insensitive parser (the
// official a2a-go SDK's encoding/json, the demo agent's) takes for taskId:
// other cases, and the Unicode letters encoding/json folds to ASCII.
var lookalikes = []string{"TaskId", "taskid", "TASKID", "taskID", "ta\u017fkId", "tas\u212aId", "task_id"}

// TestCrossOrgTaskBySpelling: a buyer of another org who names org A's
// task under a lookalike of taskId, or references it, is refused before
// anything reaches the agent, on every way in: JSON-RPC send and stream in
// both versions, and REST message:send in both versions.
func TestCrossOrgTaskBySpelling(t *testing.T) {
	mk := newMarket(t, map[string]string{})
	a03 := rpc{t: t, url: mk.ep03, key: mk.buyer}
	res, rerr := a03.call("message/send", msg03("org A's secret plans", nil))
	if rerr != nil {
		t.Fatal(rerr)
	}
	task03 := fmt.Sprint(get(res, "id"))
	a10 := rpc{t: t, url: mk.ep10, key: mk.buyer, version: "1.0"}
	res, rerr = a10.call("SendMessage", msg10("org A's secret plans", nil))
	if rerr != nil {
		t.Fatal(rerr)
	}
	task10 := fmt.Sprint(get(res, "task", "id"))

	_, keyB := signup(t, mk.api, "Initech", "it@initech.example")
	for _, l := range []string{mk.id03, mk.id10} {
		if r := mk.api.with(keyB).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": l}); r.Status != 201 {
			t.Fatalf("B subscribes: %d %s", r.Status, r.Body)
		}
	}
	before03, before10 := len(mk.a03.Tasks()), len(mk.a10.Tasks())
	inputs := func() [][]string {
		a, _ := mk.a03.Task(task03)
		b, _ := mk.a10.Task(task10)
		return [][]string{a.Input, b.Input}
	}
	inputsBefore := inputs()

	b03 := rpc{t: t, url: mk.ep03, key: keyB}
	b10 := rpc{t: t, url: mk.ep10, key: keyB, version: "1.0"}
	refused := func(what string, body []byte, want string) {
		t.Helper()
		if !strings.Contains(string(body), want) || strings.Contains(string(body), "secret plans") {
			t.Errorf("%s: %s, want %s and nothing of org A's task", what, body, want)
		}
	}
	post := func(r rpc, method string, params any) []byte {
		res, err := r.post(method, params)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return b
	}
	for _, k := range lookalikes {
		// The proto name task_id is taskId (ProtoJSON reads both), on
		// every binding: the meter renames it and reads it as such, so it
		// names another org's task, not found. The other spellings are
		// refused as ambiguous.
		want, code := 400, `"code":-32600`
		if k == "task_id" {
			want, code = 404, `"code":-32001`
		}
		refused("message/send "+k, post(b03, "message/send", msg03("show me", map[string]any{k: task03})), code)
		refused("message/stream "+k, post(b03, "message/stream", msg03("show me", map[string]any{k: task03})), code)
		refused("SendMessage "+k, post(b10, "SendMessage", msg10("show me", map[string]any{k: task10})), code)
		refused("SendStreamingMessage "+k, post(b10, "SendStreamingMessage", msg10("show me", map[string]any{k: task10})), code)

		status, body, _ := restCall(t, keyB, "POST", mk.ep10+"/message:send", "1.0", msg10("show me", map[string]any{k: task10}))
		if status != want || strings.Contains(fmt.Sprint(body), "secret plans") {
			t.Errorf("REST 1.0 message:send %s: %d %v, want %d", k, status, body, want)
		}
		status, body, _ = restCall(t, keyB, "POST", mk.ep03+"/v1/message:send", "", msg03("show me", map[string]any{k: task03}))
		if status != want || strings.Contains(fmt.Sprint(body), "secret plans") {
			t.Errorf("REST 0.3 message:send %s: %d %v, want %d", k, status, body, want)
		}
	}
	// A message may reference only its own org's tasks.
	refused("referenceTaskIds 0.3", post(b03, "message/send", msg03("use it", map[string]any{"referenceTaskIds": []string{task03}})), `"code":-32001`)
	refused("referenceTaskIds 1.0", post(b10, "SendMessage", msg10("use it", map[string]any{"referenceTaskIds": []string{task10}})), `"code":-32001`)
	refused("reference_task_ids 0.3", post(b03, "message/send", msg03("use it", map[string]any{"reference_task_ids": []string{task03}})), `"code":-32001`)
	refused("reference_task_ids 1.0", post(b10, "SendMessage", msg10("use it", map[string]any{"reference_task_ids": []string{task10}})), `"code":-32001`)
	status, body, _ := restCall(t, keyB, "POST", mk.ep10+"/message:send", "1.0", msg10("use it", map[string]any{"referenceTaskIds": []string{task10}}))
	if status != 404 {
		t.Errorf("REST referenceTaskIds: %d %v, want 404", status, body)
	}

	if n := len(mk.a03.Tasks()); n != before03 {
		t.Errorf("the 0.3 agent got %d new tasks from refused calls", n-before03)
	}
	if n := len(mk.a10.Tasks()); n != before10 {
		t.Errorf("the 1.0 agent got %d new tasks from refused calls", n-before10)
	}
	if after := inputs(); !slices.Equal(after[0], inputsBefore[0]) || !slices.Equal(after[1], inputsBefore[1]) {
		t.Errorf("org A's tasks got org B's messages: %q, was %q", after, inputsBefore)
	}

	// The owner still reaches its task, and may reference it.
	if _, rerr := a10.call("SendMessage", msg10("follow up", map[string]any{"referenceTaskIds": []string{task10}})); rerr != nil {
		t.Errorf("owner referencing its own task: %v", rerr)
	}
	for _, c := range []struct {
		r      rpc
		method string
		params map[string]any
	}{
		{a10, "SendMessage", msg10("follow up by proto name", map[string]any{"reference_task_ids": []string{task10}})},
		{a03, "message/send", msg03("follow up by proto name", map[string]any{"reference_task_ids": []string{task03}})},
	} {
		if _, rerr := c.r.call(c.method, c.params); rerr != nil {
			t.Errorf("owner referencing its own task by the proto name, %s: %v", c.method, rerr)
		}
	}
}

// restartableAgent serves a demo agent that a test can restart: a new
// agent behind the same URL, with its task counter back at task-1, as an
// agent that keeps its tasks in memory does after a restart.
type restartableAgent struct {
	cfg demoagent.Config
	cur atomic.Pointer[demoagent.Agent]
	url string
}

func startRestartableAgent(t *testing.T, cfg demoagent.Config) *restartableAgent {
	r := &restartableAgent{cfg: cfg}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { r.cur.Load().ServeHTTP(w, req) }))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	r.restart()
	return r
}

func (r *restartableAgent) restart() {
	a := demoagent.New(r.cfg)
	a.SetBaseURL(r.url + "/")
	r.cur.Store(a)
}

// TestAgentReusedTaskID: an agent that restarts and hands out task-1
// again answers org B with a task id the meter bound to org A. The meter
// withholds the answer (-32056 on JSON-RPC, unary and streaming; 502 on
// REST), nothing of the task reaches B (no id, no usage row), the task is
// relayed to no one from then on (A included: the agent now holds B's
// message under A's id), and the listing shows an incident until the
// seller refreshes it by hand.
func TestAgentReusedTaskID(t *testing.T) {
	for _, v := range []string{"1.0", "0.3"} {
		t.Run(v, func(t *testing.T) {
			agent := startRestartableAgent(t, demoagent.Config{Version: v, ReportUsage: true, StableIDs: true, Name: "Forgetful " + v})
			m := startMarketplace(t, map[string]string{})
			api := client{t: t, base: m.URL}
			_, seller := signup(t, api, "Acme Agents", "owner@acme.example")
			_, keyA := signup(t, api, "Globex", "it@globex.example")
			_, keyB := signup(t, api, "Initech", "it@initech.example")
			r := api.with(seller).do("POST", "/api/v1/listings", map[string]any{"card_url": agent.url, "pricing": pricing})
			if r.Status != 201 {
				t.Fatalf("list: %d %s", r.Status, r.Body)
			}
			listing := r.str("id")
			var ep string
			for _, key := range []string{keyA, keyB} {
				r := api.with(key).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": listing})
				if r.Status != 201 {
					t.Fatalf("subscribe: %d %s", r.Status, r.Body)
				}
				ep = r.str("endpoint")
			}
			send, stream, getTask, msg := "SendMessage", "SendStreamingMessage", "GetTask", msg10
			if v == "0.3" {
				send, stream, getTask, msg = "message/send", "message/stream", "tasks/get", msg03
			}
			a := rpc{t: t, url: ep, key: keyA, version: v}
			b := rpc{t: t, url: ep, key: keyB, version: v}
			for i := 1; i <= 3; i++ {
				if _, rerr := a.call(send, msg(fmt.Sprintf("org A's secret plan %d", i), nil)); rerr != nil {
					t.Fatal(rerr)
				}
			}
			agent.restart()

			withheld := func(what string, body []byte) {
				t.Helper()
				if !strings.Contains(string(body), fmt.Sprintf(`"code":%d`, a2aproxy.CodeAgentTaskConflict)) || strings.Contains(string(body), "task-") {
					t.Errorf("%s: %s, want -32056 and no task id", what, body)
				}
			}
			res, err := b.post(send, msg("org B's question", nil))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			withheld("unary", body)
			res, err = b.post(stream, msg("org B's stream", nil))
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(res.Body)
			res.Body.Close()
			withheld("stream", body)
			restPath, restVersion := ep+"/message:send", "1.0"
			if v == "0.3" {
				restPath, restVersion = ep+"/v1/message:send", ""
			}
			status, rbody, _ := restCall(t, keyB, "POST", restPath, restVersion, msg("org B over REST", nil))
			if status != 502 || !strings.Contains(fmt.Sprint(rbody), "AGENT_TASK_CONFLICT") || strings.Contains(fmt.Sprint(rbody), "task-") {
				t.Errorf("REST: %d %v, want 502 AGENT_TASK_CONFLICT", status, rbody)
			}

			// The reused ids reach no one now, their first owner included.
			for _, id := range []string{"task-1", "task-2", "task-3"} {
				if _, rerr := a.call(getTask, map[string]any{"id": id}); rerr == nil || rerr["code"] != float64(-32001) {
					t.Errorf("org A %s %s after the reuse: %v, want TaskNotFound", getTask, id, rerr)
				}
			}
			// A new task of B's, one the agent never handed out before, works.
			if res, rerr := b.call(send, msg("org B again", nil)); rerr != nil {
				t.Errorf("a fresh task for org B: %v", rerr)
			} else if id := fmt.Sprint(get(res, "id")) + fmt.Sprint(get(res, "task", "id")); !strings.Contains(id, "task-4") {
				t.Errorf("a fresh task for org B: %v", res)
			}

			// B's usage holds its calls, none with a reused task.
			u := api.with(keyB).do("GET", "/api/v1/usage?group_by=task", nil)
			if u.Status != 200 || strings.Contains(string(u.Body), `"task-1"`) || strings.Contains(string(u.Body), `"task-2"`) || strings.Contains(string(u.Body), `"task-3"`) {
				t.Errorf("org B's usage by task: %d %s", u.Status, u.Body)
			}

			// The listing is marked until the seller refreshes it by hand.
			l := api.with(seller).do("GET", "/api/v1/listings/"+listing, nil)
			if l.str("health") != "unhealthy" || l.str("incident", "detail") == "" {
				t.Errorf("listing after the reuse: %s", l.Body)
			}
			if r := api.with(seller).do("POST", "/api/v1/listings/"+listing+"/refresh", nil); r.Status != 200 {
				t.Fatalf("refresh: %d %s", r.Status, r.Body)
			}
			l = api.with(seller).do("GET", "/api/v1/listings/"+listing, nil)
			if l.str("health") != "healthy" || l.JSON["incident"] != nil {
				t.Errorf("listing after the seller's refresh: %s", l.Body)
			}
		})
	}
}

// TestOwnershipAcrossMeters: a task a message/send creates through one
// meter (bound in that meter's memory, made durable by its usage row and
// projected into PostgreSQL by its shipper) is found for its owner on a
// second meter right after it was created (the second meter waits for the
// projection), and is TaskNotFound there for another org; the same holds
// for tasks the second meter never heard of.
func TestOwnershipAcrossMeters(t *testing.T) {
	env := map[string]string{
		"AGENTMARKET_DATABASE_URL": relationaltest.PostgresDSN(t),
		"AGENTMARKET_SECRET_KEY":   "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
		"AGENTMARKET_AUTO_APPROVE": "true",
	}
	mk := newMarket(t, env)
	second := startMarketplace(t, env)
	_, keyB := signup(t, mk.api, "Initech", "it@initech.example")
	if r := mk.api.with(keyB).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": mk.id10}); r.Status != 201 {
		t.Fatalf("B subscribes: %d %s", r.Status, r.Body)
	}
	one := rpc{t: t, url: mk.ep10, key: mk.buyer, version: "1.0"}
	two := rpc{t: t, url: second.URL + "/a2a/" + mk.id10, key: mk.buyer, version: "1.0"}
	twoB := rpc{t: t, url: two.url, key: keyB, version: "1.0"}
	// B's new right reaches the second meter with its next policy reload.
	waitFor(t, "org B's subscription to reach the second meter", 10*time.Second, func() bool {
		_, rerr := twoB.call("GetTask", map[string]any{"id": "task-that-never-was"})
		return rerr != nil && rerr["code"] == float64(-32001)
	})
	for i := range 5 {
		res, rerr := one.call("SendMessage", msg10(fmt.Sprintf("task %d", i), nil))
		if rerr != nil {
			t.Fatal(rerr)
		}
		task := fmt.Sprint(get(res, "task", "id"))
		// At once, on the other meter: the owner finds it, B does not.
		if got, rerr := two.call("GetTask", map[string]any{"id": task}); rerr != nil || get(got, "id") != task {
			t.Fatalf("the owner on the second meter, right after the send: %v %v", got, rerr)
		}
		if _, rerr := twoB.call("GetTask", map[string]any{"id": task}); rerr == nil || rerr["code"] != float64(-32001) {
			t.Fatalf("another org on the second meter: %v, want TaskNotFound", rerr)
		}
	}
	if _, rerr := two.call("GetTask", map[string]any{"id": "task-that-never-was"}); rerr == nil || rerr["code"] != float64(-32001) {
		t.Fatalf("an unknown task: %v, want TaskNotFound", rerr)
	}
}
