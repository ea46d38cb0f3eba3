package main

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// Idempotent sends: a send whose messageId the same buyer org already sent
// to the same listing (within the window) is answered with what the first
// send created, and not forwarded or billed again.

// sends counts the sends (of any method, in any binding) the agent got
// since a mark.
func (a *sdkAgent) sends(mark int) int {
	n := 0
	for _, x := range a.Wire.since(mark) {
		switch x.RPC {
		case "SendMessage", "SendStreamingMessage", "message/send", "message/stream":
			n++
		case "":
			if strings.Contains(x.Path, "message:send") || strings.Contains(x.Path, "message:stream") {
				n++
			}
		}
	}
	return n
}

// TestIdempotentSendsSDK runs the official A2A Go SDK on both sides of the
// meter (its agents serving one binding, its client preferring one), in
// A2A 1.0 and 0.3: a send retried with the same message gets the first
// send's task (a blocking retry, a stream retry), and the agent saw one
// message; a retry after the client gave up waiting waits for the first
// copy and gets its completed task; a message answer is replayed as it
// was; the same messageId with another message is a new send with its own
// task (and its retry gets that task);
// another org sending the same messageId gets its own task. The usage
// rows bill each task once: the retries' rows bill nothing.
func TestIdempotentSendsSDK(t *testing.T) {
	m := startMarketplace(t, nil)
	api := client{t: t, base: m.URL}
	_, seller := signup(t, api, "Acme Agents", "owner@acme.example")
	buyerOrg, buyerKey := signup(t, api, "Globex", "it@globex.example")
	_, otherKey := signup(t, api, "Initech", "it@initech.example")
	buyer, other := newSDKBuyer(buyerKey), newSDKBuyer(otherKey)

	combos := listSDKCombos(t, api, seller, buyerKey, otherKey)
	for _, c := range combos {
		t.Run(c.name(), func(t *testing.T) { runIdemCombo(t, c, buyer, other) })
	}
	t.Run("usage", func(t *testing.T) { checkIdemUsage(t, m, combos, buyerOrg) })
}

func runIdemCombo(t *testing.T, c *sdkCombo, buyer, other *sdkBuyer) {
	ctx, cancel := context.WithTimeout(buyer.ctx(context.Background()), 30*time.Second)
	defer cancel()
	start, agentStart := buyer.wire.mark(), c.ag.Wire.mark()
	defer func() {
		if t.Failed() {
			t.Logf("buyer ⇄ meter:%s", buyer.wire.dump(start))
			t.Logf("meter ⇄ agent:%s", c.ag.Wire.dump(agentStart))
		}
	}()
	cl, _, _, err := buyer.connect(ctx, c.endpoint, c.version, c.client)
	if err != nil {
		t.Fatal(err)
	}
	send := func(ctx context.Context, cl interface {
		SendMessage(context.Context, *a2a.SendMessageRequest) (a2a.SendMessageResult, error)
	}, msg *a2a.Message) (*a2a.Task, error) {
		res, err := cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
		if err != nil {
			return nil, err
		}
		task, ok := res.(*a2a.Task)
		if !ok {
			return nil, fmt.Errorf("answered %T %+v, want a task", res, res)
		}
		return task, nil
	}

	// A send and its retries: the first send's task, forwarded once.
	amark := c.ag.Wire.mark()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("an idempotent send"))
	first, err := send(ctx, cl, msg)
	if err != nil || first.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("send: %v %+v", err, first)
	}
	c.tasks[string(first.ID)] = "send"
	retry, err := send(ctx, cl, msg)
	switch {
	case err != nil:
		t.Errorf("retry: %v", err)
	case retry.ID != first.ID || retry.Status.State != a2a.TaskStateCompleted || sdkTaskText(retry) != sdkArtifactText("an idempotent send"):
		t.Errorf("retry = task %s %s %q, want the first send's task %s, completed, %q", retry.ID, retry.Status.State, sdkTaskText(retry),
			first.ID, sdkArtifactText("an idempotent send"))
	}
	// Streamed, the retry is one event: the task as it is now.
	evs, err := sdkCollect(cl.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg}))
	if err != nil || sdkDescribe(evs) != "task:TASK_STATE_COMPLETED" || evs[0].ev.TaskInfo().TaskID != first.ID {
		t.Errorf("stream retry: %s then %v; want the one event task:TASK_STATE_COMPLETED of task %s", sdkDescribe(evs), err, first.ID)
	}
	if n := c.ag.sends(amark); n != 1 {
		t.Errorf("the agent got %d sends of one message sent three times, want 1", n)
	}

	// The same messageId with another message: a new send, forwarded once,
	// with its own task; an identical retry of it gets that task, and one
	// of the first message still gets the first.
	amark = c.ag.Wire.mark()
	changed := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("another message"))
	changed.ID = msg.ID
	second, err := send(ctx, cl, changed)
	if err != nil || second.ID == first.ID || sdkTaskText(second) != sdkArtifactText("another message") {
		t.Fatalf("another message under the same messageId: %v %+v, want a task of its own", err, second)
	}
	c.tasks[string(second.ID)] = "reused"
	if again, err := send(ctx, cl, changed); err != nil || again.ID != second.ID {
		t.Errorf("a retry of the other message: %v %+v, want its task %s", err, again, second.ID)
	}
	if again, err := send(ctx, cl, msg); err != nil || again.ID != first.ID {
		t.Errorf("a retry of the first message after another under its id: %v %+v, want the first task %s", err, again, first.ID)
	}
	if n := c.ag.sends(amark); n != 1 {
		t.Errorf("the agent got %d sends of another message sent twice under a known messageId, want 1", n)
	}

	// Another org sending the same messageId (and message) gets its own
	// task: the first org's is never answered to it.
	amark = c.ag.Wire.mark()
	octx := other.ctx(ctx)
	ocl, _, _, err := other.connect(octx, c.endpoint, c.version, c.client)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := send(octx, ocl, msg)
	switch {
	case err != nil:
		t.Errorf("the other org's send: %v", err)
	case theirs.ID == first.ID:
		t.Errorf("the other org got the buyer's task %s", first.ID)
	default:
		c.tasks[string(theirs.ID)] = "other"
	}
	if n := c.ag.sends(amark); n != 1 {
		t.Errorf("the other org's send reached the agent %d times, want 1", n)
	}

	// A retry after the client gave up waiting (the orchestrator's timeout):
	// it waits for the first copy, still running, and gets its task.
	amark = c.ag.Wire.mark()
	slow := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("slow send, retried"))
	tctx, tcancel := context.WithTimeout(ctx, 250*time.Millisecond)
	if _, err := send(tctx, cl, slow); err == nil {
		t.Error("the slow send answered within 250ms: nothing to retry")
	}
	tcancel()
	began := time.Now()
	got, err := send(ctx, cl, slow)
	switch {
	case err != nil:
		t.Errorf("retry of the slow send: %v", err)
	case got.Status.State != a2a.TaskStateCompleted || sdkTaskText(got) != sdkArtifactText("slow send, retried"):
		t.Errorf("retry of the slow send = %s %q, want its completed task", got.Status.State, sdkTaskText(got))
	default:
		c.tasks[string(got.ID)] = "slow"
		t.Logf("the retry waited %s for the first copy", time.Since(began).Round(time.Millisecond))
	}
	if n := c.ag.sends(amark); n != 1 {
		t.Errorf("the agent got %d sends of the slow message, want 1", n)
	}

	// An answer that is a message, not a task: replayed as it was.
	amark = c.ag.Wire.mark()
	ask := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("please answer with a message"))
	r1, err := cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: ask})
	m1, ok := r1.(*a2a.Message)
	if err != nil || !ok {
		t.Fatalf("send answered by a message: %T %v", r1, err)
	}
	r2, err := cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: ask})
	if m2, ok := r2.(*a2a.Message); err != nil || !ok || m2.ID != m1.ID || sdkMessageText(m2) != sdkMessageText(m1) {
		t.Errorf("retry of a send answered by a message: %T %+v %v; want message %s again", r2, r2, err, m1.ID)
	}
	if n := c.ag.sends(amark); n != 1 {
		t.Errorf("the agent got %d sends of the message-answered message, want 1", n)
	}
	c.ran = true
}

// checkIdemUsage: each task is billed once, by its first send; the rows of
// the retries (method replay:…) bill nothing; a send of another message
// under a known messageId bills its own task, its row's method reused-id:….
func checkIdemUsage(t *testing.T, m *started, combos []*sdkCombo, buyerOrg string) {
	var rows []metering.Usage
	waitFor(t, "every retry's row", 15*time.Second, func() bool {
		rows = usageRows(t, m, meterEnv{}, 0)
		n := 0
		for _, u := range rows {
			if strings.HasPrefix(u.Method, "replay:") {
				n++
			}
		}
		return n >= 6*len(combos) // per pairing: three of the send, one of the slow send, one of the message answer, one of the other message
	})
	for _, c := range combos {
		if !c.ran {
			continue
		}
		reused := 0
		for _, u := range rows {
			if u.ListingID == c.listing && strings.HasPrefix(u.Method, "reused-id:") && u.BuyerOrgID == buyerOrg {
				reused++
				if u.Tasks != 1 || u.CostMicros == 0 || u.ErrorCode != 0 {
					t.Errorf("%s: the send of another message under a known messageId did not bill its task: %+v", c.name(), u)
				}
			}
		}
		sharing := 0 // the pairings on this listing (one per client binding), one such send each
		for _, d := range combos {
			if d.ran && d.listing == c.listing {
				sharing++
			}
		}
		if reused != sharing {
			t.Errorf("%s: %d rows of sends reusing a messageId on its listing, want %d", c.name(), reused, sharing)
		}
		for id, role := range c.tasks {
			var billed, replays []metering.Usage
			for _, u := range rows {
				if u.ListingID != c.listing || u.TaskID != id {
					continue
				}
				if strings.HasPrefix(u.Method, "replay:") {
					replays = append(replays, u)
				} else {
					billed = append(billed, u)
				}
			}
			wantReplays := map[string]int{"send": 3, "slow": 1, "other": 0, "reused": 1}[role]
			if len(billed) != 1 || len(replays) != wantReplays {
				t.Errorf("%s %s task: %d billed rows and %d replays, want 1 and %d", c.name(), role, len(billed), len(replays), wantReplays)
				continue
			}
			if b := billed[0]; b.Tasks != 1 || b.CostMicros == 0 || b.ErrorCode != 0 {
				t.Errorf("%s %s task: its send's row %+v, want it to bill the task", c.name(), role, b)
			}
			for _, u := range replays {
				if u.Tasks != 0 || u.CostMicros != 0 || u.InputTokens != 0 || u.OutputTokens != 0 || u.ComputeMs != 0 || u.ErrorCode != 0 ||
					u.State != "completed" {
					t.Errorf("%s %s task: a retry's row bills or fails: %+v", c.name(), role, u)
				}
				if want := "replay:" + sdkMethods[c.version]["send"]; u.Method != want && u.Method != "replay:"+sdkMethods[c.version]["stream"] {
					t.Errorf("%s: retry row method %q, want %s or its stream's", c.name(), u.Method, want)
				}
			}
		}
	}
}

// TestIdempotentSendsAcrossMeters: two meters share PostgreSQL. A send
// through one and its retry through the other (JSON-RPC and HTTP+JSON, A2A
// 1.0 and 0.3) get the same task; a retry through the second meter while
// the first copy still runs through the first waits for it; a meter that
// restarts still knows the sends made through it; the agent got every
// message once, and the ledger billed each task once.
func TestIdempotentSendsAcrossMeters(t *testing.T) {
	dsn := relationaltest.PostgresDSN(t)
	env := func(extra ...string) map[string]string {
		e := map[string]string{
			"AGENTMARKET_DATABASE_URL": dsn,
			"AGENTMARKET_SECRET_KEY":   "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
			"AGENTMARKET_AUTO_APPROVE": "true",
		}
		for i := 0; i+1 < len(extra); i += 2 {
			e[extra[i]] = extra[i+1]
		}
		return e
	}
	firstEnv := env("AGENTMARKET_DATA_DIR", t.TempDir())
	ag10 := startSDKAgent(t, "1.0", a2a.TransportProtocolJSONRPC)
	ag03 := startSDKAgent(t, "0.3", a2a.TransportProtocolHTTPJSON)
	lm := newLongMarket(t, firstEnv)
	l10, ep10 := lm.list(t, ag10.URL, nil, nil)
	l03, ep03 := lm.list(t, ag03.URL, nil, nil)
	second := startMarketplace(t, env())
	at2 := func(listing string) string { return second.URL + "/a2a/" + listing }

	// 1.0: sent through the first meter, retried through the second, over
	// JSON-RPC and HTTP+JSON.
	mark10 := ag10.Wire.mark()
	p10 := msg10("sent through one meter, retried through another", nil)
	res, rerr := rpc{t: t, url: ep10, key: lm.buyer, version: "1.0"}.call("SendMessage", p10)
	task10, _ := get(res, "task", "id").(string)
	if rerr != nil || task10 == "" {
		t.Fatalf("send: %v %v", res, rerr)
	}
	res, rerr = rpc{t: t, url: at2(l10), key: lm.buyer, version: "1.0"}.call("SendMessage", p10)
	if rerr != nil || get(res, "task", "id") != task10 || get(res, "task", "status", "state") != "TASK_STATE_COMPLETED" {
		t.Errorf("JSON-RPC retry through the second meter: %v %v, want task %s completed", res, rerr, task10)
	}
	status, body, _ := restCall(t, lm.buyer, "POST", at2(l10)+"/message:send", "1.0", p10)
	if status != 200 || get(body, "task", "id") != task10 {
		t.Errorf("HTTP+JSON retry through the second meter: %d %v, want task %s", status, body, task10)
	}
	// Another message under that messageId is a new send, through either
	// meter: its own task, which its retry through the other meter gets.
	changed := msg10("another message", map[string]any{"messageId": get(p10, "message", "messageId")})
	res, rerr = rpc{t: t, url: at2(l10), key: lm.buyer, version: "1.0"}.call("SendMessage", changed)
	other10, _ := get(res, "task", "id").(string)
	if rerr != nil || other10 == "" || other10 == task10 {
		t.Errorf("another message under the messageId, through the second meter: %v %v, want a task of its own", res, rerr)
	}
	status, body, _ = restCall(t, lm.buyer, "POST", ep10+"/message:send", "1.0", changed)
	if status != 200 || get(body, "task", "id") != other10 {
		t.Errorf("its retry over HTTP+JSON through the first meter: %d %v, want task %s", status, body, other10)
	}

	// 0.3: the first copy still runs through the first meter when the
	// orchestrator retries through the second: the retry waits for it.
	mark03 := ag03.Wire.mark()
	p03 := msg03("slow, retried through another meter", nil)
	firstDone := make(chan map[string]any, 1)
	go func() {
		res, _ := rpc{t: t, url: ep03, key: lm.buyer}.call("message/send", p03)
		firstDone <- res
	}()
	time.Sleep(300 * time.Millisecond)
	res, rerr = rpc{t: t, url: at2(l03), key: lm.buyer}.call("message/send", p03)
	task03, _ := res["id"].(string)
	if rerr != nil || task03 == "" || res["status"].(map[string]any)["state"] != "completed" {
		t.Errorf("retry through the second meter while the first copy runs: %v %v, want the completed task", res, rerr)
	}
	if first := <-firstDone; first["id"] != task03 {
		t.Errorf("the first copy's task %v, the retry's %v", first["id"], task03)
	}
	// And over HTTP+JSON (the 0.3 specification's /v1 paths).
	status, body, _ = restCall(t, lm.buyer, "POST", at2(l03)+"/v1/message:send", "", map[string]any{"message": map[string]any{
		"messageId": get(p03, "message", "messageId"), "role": "ROLE_USER", "content": []any{map[string]any{"text": "slow, retried through another meter"}}}})
	if status != 200 || get(body, "task", "id") != task03 {
		t.Errorf("0.3 HTTP+JSON retry: %d %v, want task %s", status, body, task03)
	}

	// The first meter restarts: the sends made through it are still known.
	lm.m.stop(t)
	restarted := startMarketplace(t, firstEnv)
	res, rerr = rpc{t: t, url: restarted.URL + "/a2a/" + l10, key: lm.buyer, version: "1.0"}.call("SendMessage", p10)
	if rerr != nil || get(res, "task", "id") != task10 {
		t.Errorf("retry through the restarted meter: %v %v, want task %s", res, rerr, task10)
	}
	if n := ag10.sends(mark10); n != 2 {
		t.Errorf("the 1.0 agent got %d sends of two messages (one retried twice, one once), want 2", n)
	}
	if n := ag03.sends(mark03); n != 1 {
		t.Errorf("the 0.3 agent got %d sends of one message, want 1", n)
	}
	idemBilledOnce(t, dsn, []*started{restarted, second}, map[string]string{l10: task10, l03: task03}, map[string]int{task10: 3, task03: 2})
}

// idemBilledOnce checks that each task was billed once: in the usage rows
// of every meter, one row bills the task and the retries' rows (replay:…,
// replays of them each) bill nothing; and the ledger (the database's
// projection of every meter's spool: the task's row) holds for it what that
// one row billed.
func idemBilledOnce(t *testing.T, dsn string, meters []*started, tasks map[string]string, replays map[string]int) {
	t.Helper()
	var rows []metering.Usage
	waitFor(t, "every retry's usage row", 15*time.Second, func() bool {
		rows = rows[:0]
		for _, m := range meters {
			rows = append(rows, usageRows(t, m, meterEnv{}, 0)...)
		}
		n := 0
		for _, u := range rows {
			if _, counted := replays[u.TaskID]; counted && strings.HasPrefix(u.Method, "replay:") {
				n++
			}
		}
		want := 0
		for _, r := range replays {
			want += r
		}
		return n >= want
	})
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for listing, task := range tasks {
		var billed []metering.Usage
		replayed := 0
		for _, u := range rows {
			if u.ListingID != listing || u.TaskID != task {
				continue
			}
			if strings.HasPrefix(u.Method, "replay:") {
				replayed++
				if u.Tasks != 0 || u.CostMicros != 0 || u.InputTokens != 0 || u.OutputTokens != 0 || u.ComputeMs != 0 {
					t.Errorf("task %s: a retry's row bills: %+v", task, u)
				}
				continue
			}
			billed = append(billed, u)
		}
		if len(billed) != 1 || replayed != replays[task] || billed[0].Tasks != 1 || billed[0].CostMicros == 0 {
			t.Errorf("task %s: billed rows %+v and %d retries' rows, want one row billing the task and %d", task, billed, replayed, replays[task])
			continue
		}
		var in, out, ms int64
		if err := db.QueryRow(`SELECT billed_input_tokens, billed_output_tokens, billed_compute_ms FROM task_owners WHERE listing_id = $1 AND task_id = $2`,
			listing, task).Scan(&in, &out, &ms); err != nil {
			t.Fatalf("ledger of task %s: %v", task, err)
		}
		if b := billed[0]; in != b.InputTokens || out != b.OutputTokens || ms != b.ComputeMs {
			t.Errorf("task %s: the ledger billed in=%d out=%d compute=%d, the send's row in=%d out=%d compute=%d", task, in, out, ms, b.InputTokens, b.OutputTokens, b.ComputeMs)
		}
	}
}

// TestIdempotentSendsRestartAndWindow: on the embedded default (SQLite), a
// meter that restarts still answers a retry with the task of the send made
// before; a listing's own window (limits.idempotency_window_ms) lets the
// messageId be used again once it is over; a stream retried while its
// first copy runs gets the task as it is then, in one event.
func TestIdempotentSendsRestartAndWindow(t *testing.T) {
	ag := startSDKAgent(t, "1.0", a2a.TransportProtocolJSONRPC)
	env := map[string]string{"AGENTMARKET_DATA_DIR": t.TempDir(), "AGENTMARKET_ADDR": freeAddr(t)}
	lm := newLongMarket(t, env)
	listing, ep := lm.list(t, ag.URL, map[string]any{"idempotency_window_ms": 2000}, nil)
	c := rpc{t: t, url: ep, key: lm.buyer, version: "1.0"}

	mark := ag.Wire.mark()
	p := msg10("sent before a restart", nil)
	res, rerr := c.call("SendMessage", p)
	task, _ := get(res, "task", "id").(string)
	if rerr != nil || task == "" {
		t.Fatalf("send: %v %v", res, rerr)
	}
	lm.m.stop(t)
	lm.m = startMarketplace(t, env)
	if res, rerr := c.call("SendMessage", p); rerr != nil || get(res, "task", "id") != task {
		t.Errorf("retry after the restart: %v %v, want task %s", res, rerr, task)
	}
	if n := ag.sends(mark); n != 1 {
		t.Errorf("the agent got %d sends, want 1", n)
	}

	// A stream retried while its first copy runs: one event, the task as
	// it is now (working), and the first stream goes on to its end.
	mark = ag.Wire.mark()
	sp := msg10("slow stream, retried", nil)
	evs, leave := openStream(t, c, "SendStreamingMessage", sp)
	defer leave()
	firstEv := next(t, evs)
	retried := c.stream("SendStreamingMessage", sp)
	if len(retried) != 1 {
		t.Errorf("stream retry: %d events, want 1", len(retried))
	} else if state, _ := get(retried[0].data, "result", "task", "status", "state").(string); state == "" || state == "TASK_STATE_COMPLETED" {
		t.Errorf("stream retry while the first copy runs: %v, want its task still running", retried[0].data)
	}
	var rest []string
	for l := next(t, evs); ; l = next(t, evs) {
		rest = append(rest, l)
		if l == "TASK_STATE_COMPLETED" {
			break
		}
	}
	// (The agent's log has an exchange once its handler returned.)
	waitFor(t, "the first stream's end at the agent", 5*time.Second, func() bool { return ag.sends(mark) >= 1 })
	if n := ag.sends(mark); n != 1 {
		t.Errorf("the agent got %d sends of the streamed message, want 1 (first stream: %s %v)", n, firstEv, rest)
	}

	// The listing's window is 2 s: after it, the messageId is free again.
	mark = ag.Wire.mark()
	time.Sleep(2100 * time.Millisecond)
	res, rerr = c.call("SendMessage", p)
	if again, _ := get(res, "task", "id").(string); rerr != nil || again == "" || again == task {
		t.Errorf("the messageId after the window: %v %v, want a new task", res, rerr)
	}
	if n := ag.sends(mark); n != 1 {
		t.Errorf("after the window the agent got %d sends, want 1", n)
	}
	_ = listing
}

// TestIdempotentSendsSameMessage: a retry serialized otherwise (members in
// another order, other whitespace, escapes) is the same message; a
// message with anything else changed is another one, forwarded as a new
// send; a send without a messageId is forwarded every time.
func TestIdempotentSendsSameMessage(t *testing.T) {
	ag := startSDKAgent(t, "1.0", a2a.TransportProtocolJSONRPC)
	lm := newLongMarket(t, map[string]string{})
	_, ep := lm.list(t, ag.URL, nil, nil)
	mark := ag.Wire.mark()
	post := func(body string) map[string]any {
		t.Helper()
		req := rpc{t: t, url: ep, key: lm.buyer, version: "1.0"}
		res, err := req.postRaw(body)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a := post(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"same-1","role":"ROLE_USER","parts":[{"text":"a <b> \"c\""}],"metadata":{"k":[1,2]}}}}`)
	task, _ := get(a, "result", "task", "id").(string)
	if task == "" {
		t.Fatalf("send: %v", a)
	}
	b := post("{\"id\":2, \"jsonrpc\":\"2.0\", \"method\":\"SendMessage\",\n \"params\": {\"message\": {\"metadata\": {\"k\": [1, 2]}, \"parts\": [{\"text\": \"a \\u003cb\\u003e \\\"c\\\"\"}], \"role\": \"ROLE_USER\", \"messageId\": \"same-1\"}}}")
	if get(b, "result", "task", "id") != task || get(b, "id") != float64(2) {
		t.Errorf("the same message serialized otherwise: %v, want task %s under id 2", b, task)
	}
	for _, changed := range []string{
		`{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{"message":{"messageId":"same-1","role":"ROLE_USER","parts":[{"text":"a <b> \"c\"!"}],"metadata":{"k":[1,2]}}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{"message":{"messageId":"same-1","role":"ROLE_USER","parts":[{"text":"a <b> \"c\""}],"metadata":{"k":[2,1]}}}}`,
	} {
		if r := post(changed); get(r, "result", "task", "id") == task || get(r, "result", "task", "id") == nil {
			t.Errorf("a changed message under the messageId: %v, want a task of its own", r)
		}
	}
	if n := ag.sends(mark); n != 3 {
		t.Errorf("the agent got %d sends of three messages, want 3", n)
	}
	// No messageId (the specification requires one; some clients omit
	// it): nothing to recognise a retry by, so it is forwarded.
	mark = ag.Wire.mark()
	noID := `{"jsonrpc":"2.0","id":4,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","parts":[{"text":"no id"}]}}}`
	post(noID)
	post(noID)
	if n := ag.sends(mark); n != 2 {
		t.Errorf("sends without a messageId: the agent got %d, want 2", n)
	}
}

// postRaw posts a raw JSON-RPC body and decodes the answer.
func (r rpc) postRaw(body string) (map[string]any, error) {
	req, _ := http.NewRequest("POST", r.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+r.key)
	if r.version == "1.0" {
		req.Header.Set("A2A-Version", "1.0")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// TestIdempotentSendsEdges: a first copy that failed before the agent
// named a task frees its messageId (the retry is forwarded); a blocking
// retry of a send whose task runs on waits up to the request timeout and
// gets the task as it is then; a claim left
// by a meter that stopped before the agent named a task is waited for
// until the call's own time runs out (-32051, not forwarded), and taken
// over once it is past its hold. Other meters' claims are in the shared
// database's store: the meter runs as one of several
// (AGENTMARKET_METER_STATE=database), on the embedded database.
func TestIdempotentSendsEdges(t *testing.T) {
	ag := startSDKAgent(t, "1.0", a2a.TransportProtocolJSONRPC)
	lm := newLongMarket(t, map[string]string{"AGENTMARKET_METER_STATE": "database"})
	listing, ep := lm.list(t, ag.URL, map[string]any{"request_timeout_ms": 1500}, nil)
	c := rpc{t: t, url: ep, key: lm.buyer, version: "1.0"}

	mark := ag.Wire.mark()
	p := msg10("fail first, then work", nil)
	if _, rerr := c.call("SendMessage", p); rerr == nil {
		t.Fatal("the first copy did not fail")
	}
	res, rerr := c.call("SendMessage", p)
	if rerr != nil || get(res, "task", "status", "state") != "TASK_STATE_COMPLETED" {
		t.Errorf("retry after a failed first copy: %v %v, want it forwarded and completed", res, rerr)
	}
	if n := ag.sends(mark); n != 2 {
		t.Errorf("the agent got %d sends, want 2 (the failed one and the retry)", n)
	}

	// The first copy did not wait (returnImmediately) and its task runs on;
	// a blocking retry waits for the task, up to the request timeout, then
	// gets it as it is.
	mark = ag.Wire.mark()
	w := msg10("please wait until canceled", nil)
	w["configuration"] = map[string]any{"returnImmediately": true}
	res, rerr = c.call("SendMessage", w)
	running, _ := get(res, "task", "id").(string)
	if rerr != nil || running == "" {
		t.Fatalf("non-blocking send: %v %v", res, rerr)
	}
	delete(w, "configuration")
	began := time.Now()
	res, rerr = c.call("SendMessage", w)
	waited := time.Since(began)
	if rerr != nil || get(res, "task", "id") != running || get(res, "task", "status", "state") != "TASK_STATE_WORKING" {
		t.Errorf("blocking retry of a send whose task runs on: %v %v, want task %s, working", res, rerr, running)
	}
	if waited < time.Second || waited > 5*time.Second {
		t.Errorf("the blocking retry answered after %s, want about the request timeout (1.5 s)", waited)
	}
	if n := ag.sends(mark); n != 1 {
		t.Errorf("the agent got %d sends of it, want 1", n)
	}

	// A claim of a meter that stopped (written straight into the store).
	db, err := sql.Open("sqlite", filepath.Join(lm.m.DataDir, "agentmarket.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	org := lm.buyerOrg
	claim := func(msg map[string]any, heldFor time.Duration) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": msg})
		r, werr := wire.ParseRequest(body, "1.0")
		if werr != nil {
			t.Fatal(werr)
		}
		sum := r.MessageDigest()
		now := time.Now().UTC()
		if _, err := db.Exec(`INSERT INTO sent_messages (listing_id, org_id, message_id, contract_id, digest, claim_id, stage, claimed_at, held_until, expires_at)
			VALUES (?, ?, ?, '', ?, 'snd_gone', 0, ?, ?, ?)`, listing, org, r.MessageID(), hex.EncodeToString(sum[:]), now, now.Add(heldFor), now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	mark = ag.Wire.mark()
	held := msg10("claimed by a meter that stopped", nil)
	claim(held, time.Hour)
	began = time.Now()
	if _, rerr := c.call("SendMessage", held); rerr == nil || rerr["code"] != float64(a2aproxy.CodeUpstreamTimeout) {
		t.Errorf("a send whose first copy runs elsewhere and named no task: %v, want -32051 after the request timeout", rerr)
	}
	if waited := time.Since(began); waited < time.Second {
		t.Errorf("answered after %s, want it to wait for the first copy up to the request timeout (1.5 s)", waited)
	}
	abandoned := msg10("abandoned by a meter that stopped", nil)
	claim(abandoned, -time.Second)
	if res, rerr := c.call("SendMessage", abandoned); rerr != nil || get(res, "task", "status", "state") != "TASK_STATE_COMPLETED" {
		t.Errorf("a send whose claim was abandoned: %v %v, want it forwarded", res, rerr)
	}
	if n := ag.sends(mark); n != 1 {
		t.Errorf("the agent got %d sends, want 1 (the abandoned claim's message)", n)
	}
}
