package main

import (
	"bufio"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/cmd/internal/demoagent"
	"github.com/agentmarket/agentmarket/metering"
)

// TestMeterLimits: every limit breach is answered with its documented
// JSON-RPC code and metered.
func TestMeterLimits(t *testing.T) {
	env := map[string]string{
		"AGENTMARKET_METER_MAX_REQUEST_BYTES":   "2048",
		"AGENTMARKET_METER_MAX_RESULT_BYTES":    "1500",
		"AGENTMARKET_METER_REQUEST_TIMEOUT":     "400ms",
		"AGENTMARKET_METER_STREAM_IDLE_TIMEOUT": "250ms",
	}
	mk := newMarketWith(t, env, func(c *demoagent.Config) {
		if c.Version == "1.0" {
			c.StepDelay = 500 * time.Millisecond // slower than the stream idle timeout
		}
		c.SlowDelay = 2 * time.Second
	})
	b03 := rpc{t: t, url: mk.ep03, key: mk.buyer}
	b10 := rpc{t: t, url: mk.ep10, key: mk.buyer, version: "1.0"}
	code := func(e map[string]any) any { return e["code"] }

	if _, e := b03.call("message/send", msg03(strings.Repeat("word ", 600), nil)); code(e) != float64(a2aproxy.CodeRequestTooLarge) {
		t.Errorf("oversize request: %v", e)
	}
	// The summary echoes the input, so a long input makes a long result.
	if _, e := b03.call("message/send", msg03(strings.Repeat("long ", 300), nil)); code(e) != float64(a2aproxy.CodeResultTooLarge) {
		t.Errorf("oversize result: %v", e)
	}
	if _, e := b03.call("message/send", msg03("slow job", nil)); code(e) != float64(a2aproxy.CodeUpstreamTimeout) {
		t.Errorf("timeout: %v", e)
	}
	evs := b10.stream("SendStreamingMessage", msg10("idle stream please", nil))
	if len(evs) == 0 || get(evs[len(evs)-1].data, "error", "code") != float64(a2aproxy.CodeStreamIdle) {
		t.Errorf("idle stream: last event %v", evs)
	}

	// A listing's own limit overrides the platform's: the long answer the
	// platform limit refused goes through once the seller raises it.
	if r := mk.api.with(mk.seller).do("PATCH", "/api/v1/listings/"+mk.id03, map[string]any{"limits": map[string]any{"max_result_bytes": 1 << 20}}); r.Status != 200 ||
		get(r.JSON, "limits", "max_result_bytes") != float64(1<<20) {
		t.Fatalf("set listing limits: %d %s", r.Status, r.Body)
	}
	deadline := time.Now().Add(5 * time.Second) // the meter's listing cache
	for {
		_, e := b03.call("message/send", msg03(strings.Repeat("long ", 300), nil))
		if e == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listing limit not applied: %v", e)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if r := mk.api.with(mk.seller).do("PATCH", "/api/v1/listings/"+mk.id03, map[string]any{"limits": map[string]any{"max_result_bytes": -1}}); r.Status != 422 {
		t.Errorf("negative limit: %d %s", r.Status, r.Body)
	}

	rows := usageRows(t, mk.m, meterEnv{}, 5)
	var codes []int
	for _, u := range rows {
		codes = append(codes, u.ErrorCode)
	}
	for _, want := range []int{a2aproxy.CodeRequestTooLarge, a2aproxy.CodeResultTooLarge, a2aproxy.CodeUpstreamTimeout, a2aproxy.CodeStreamIdle} {
		found := false
		for _, c := range codes {
			found = found || c == want
		}
		if !found {
			t.Errorf("breach %d not metered (rows carry %v)", want, codes)
		}
	}
}

// TestBudgets: a key whose budget cannot take a call's reservation is
// refused from its first call; one that can is refused once its budget is
// spent.
func TestBudgets(t *testing.T) {
	mk := newMarket(t, map[string]string{})
	r := mk.api.with(mk.buyer).do("POST", "/api/v1/api-keys", map[string]any{"name": "capped", "role": "buyer", "monthly_budget_micros": 1})
	if r.Status != 201 {
		t.Fatalf("key: %d %s", r.Status, r.Body)
	}
	// The plan's per-task price and the default per-call ceiling: 1,000 +
	// 24,000 + 60,000 + 6,000 micros.
	if _, e := (rpc{t: t, url: mk.ep03, key: r.str("key")}).call("message/send", msg03("a call the budget cannot take", nil)); e == nil ||
		e["code"] != float64(a2aproxy.CodeBudgetExhausted) || !strings.Contains(fmt.Sprint(e["message"]), "the call reserves 91000") {
		t.Fatalf("first call of a key with 1 micro: %v, want -32042 naming the reservation", e)
	}
	r = mk.api.with(mk.buyer).do("POST", "/api/v1/api-keys", map[string]any{"name": "capped 2", "role": "buyer", "monthly_budget_micros": 100_000})
	capped := rpc{t: t, url: mk.ep03, key: r.str("key")}
	if _, e := capped.call("message/send", msg03("first call is within budget", nil)); e != nil {
		t.Fatalf("first call: %v", e)
	}
	untilBudgetSpent(t, capped, 10*time.Second)
	// Other keys of the org are not capped.
	if _, e := (rpc{t: t, url: mk.ep03, key: mk.buyer}).call("message/send", msg03("uncapped", nil)); e != nil {
		t.Fatalf("uncapped key refused: %v", e)
	}
}

// untilBudgetSpent calls through r until the meter refuses the call for a
// spent budget (one that cannot take another call's reservation), and
// fails the test if that takes longer than limit.
func untilBudgetSpent(t *testing.T, r rpc, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		_, e := r.call("message/send", msg03("more", nil))
		if e != nil && e["code"] == float64(a2aproxy.CodeBudgetExhausted) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("budget never enforced: %v", e)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestBuyerLeavesMidStream: the buyer disconnects after the first event;
// the meter stops relaying, settles the task by polling the agent, and
// the task's usage is still recorded in full, once.
func TestBuyerLeavesMidStream(t *testing.T) {
	mk := newMarketWith(t, map[string]string{}, func(c *demoagent.Config) { c.StepDelay = 150 * time.Millisecond })
	b03 := rpc{t: t, url: mk.ep03, key: mk.buyer}
	res, err := b03.post("message/stream", msg03("leave after the first event of this stream", nil))
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	res.Body.Close()
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first event: %q %v", line, err)
	}
	var taskID string
	deadline := time.Now().Add(15 * time.Second)
	var rows []metering.Usage
	for time.Now().Before(deadline) {
		rows = usageRows(t, mk.m, meterEnv{}, 1)
		if len(rows) == 1 && rows[0].State == "completed" {
			taskID = rows[0].TaskID
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if taskID == "" {
		t.Fatalf("no settled usage row: %+v", rows)
	}
	snap, _ := mk.a03.Task(taskID)
	u := rows[0]
	if u.InputTokens != snap.Usage.InputTokens || u.OutputTokens != snap.Usage.OutputTokens || u.Tasks != 1 || u.Estimated {
		t.Errorf("settled row %+v, the agent reported %+v", u, snap.Usage)
	}
	if fmt.Sprint(snap.State) != "completed" {
		t.Errorf("agent task state %s", snap.State)
	}
}

// TestPushNeedsAgentSupport: push-config methods for an agent whose card
// offers no push notifications are refused (PushNotificationNotSupported),
// and its proxied card says so.
func TestPushNeedsAgentSupport(t *testing.T) {
	mk := newMarket(t, map[string]string{})
	b10 := rpc{t: t, url: mk.ep10, key: mk.buyer, version: "1.0"}
	res, _ := b10.call("SendMessage", msg10("a task to watch", nil))
	id := get(res, "task", "id")
	_, e := b10.call("CreateTaskPushNotificationConfig", map[string]any{"taskId": id, "url": "https://hooks.example.com/a2a"})
	if e == nil || e["code"] != float64(-32003) {
		t.Fatalf("push config: %v, want PushNotificationNotSupported", e)
	}
	card := mk.api.do("GET", "/a2a/"+mk.id10+"/.well-known/agent-card.json", nil)
	if get(card.JSON, "capabilities", "pushNotifications") != false {
		t.Errorf("proxied card advertises push: %s", card.Body)
	}
}

// TestReconciliationAPI: the reconciliation of the current month answers
// with its drifts (none when nothing was reported or invoiced yet), and a
// malformed period is refused.
func TestReconciliationAPI(t *testing.T) {
	mk := newMarket(t, map[string]string{})
	if _, e := (rpc{t: t, url: mk.ep03, key: mk.buyer}).call("message/send", msg03("reconcile me", nil)); e != nil {
		t.Fatal(e)
	}
	r := mk.api.with(mk.buyer).do("GET", "/api/v1/reconciliation", nil)
	if r.Status != 200 || r.JSON["drifts"] == nil {
		t.Fatalf("reconciliation: %d %s", r.Status, r.Body)
	}
	if r := mk.api.with(mk.buyer).do("GET", "/api/v1/reconciliation?period=November", nil); r.Status != 422 {
		t.Errorf("bad period: %d %s", r.Status, r.Body)
	}
	// The own ledger's issued invoices: none yet this month (it closes a
	// month once it is over).
	if r := mk.api.with(mk.buyer).do("GET", "/api/v1/invoices", nil); r.Status != 200 || r.JSON["items"] == nil || len(r.JSON["items"].([]any)) != 0 {
		t.Errorf("issued invoices: %d %s", r.Status, r.Body)
	}
	if r := mk.api.with(mk.buyer).do("GET", "/api/v1/invoices?period=2026-13", nil); r.Status != 422 {
		t.Errorf("bad invoices period: %d %s", r.Status, r.Body)
	}
}
