package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// TestCancelCascade: a task delegated through the meter (it names its
// parent in metadata) is canceled when its parent is canceled through the
// meter; who and why are recorded for both, and the child's cancel carries
// the parent cancel's trace id.
func TestCancelCascade(t *testing.T) {
	parentAgent, childAgent := startLongAgent(t, "Orchestrating agent"), startLongAgent(t, "Specialist agent")
	lm := newLongMarket(t, map[string]string{})
	pl, pep := lm.list(t, parentAgent.URL, nil, nil)
	cl, cep := lm.list(t, childAgent.URL, nil, nil)
	send := func(ep, text string, meta map[string]any) string {
		params := msg10(text, map[string]any{"metadata": meta})
		params["configuration"] = map[string]any{"returnImmediately": true}
		res, e := (rpc{t: t, url: ep, key: lm.buyer, version: "1.0"}).call("SendMessage", params)
		if e != nil {
			t.Fatalf("send: %v", e)
		}
		id, _ := get(res, "task", "id").(string)
		return id
	}
	parent := send(pep, "wait", nil)
	child := send(cep, "wait", map[string]any{wire.ParentTaskKey: parent})
	grandchild := send(pep, "wait", map[string]any{wire.ParentTaskKey: child})
	if r := lm.taskRecord(t, lm.buyer, cl, child); r.str("parent_task_id") != parent || r.str("parent_listing_id") != pl {
		t.Fatalf("child's record: %s", r.Body)
	}

	trace := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	b := rpc{t: t, url: pep, key: lm.buyer, version: "1.0", header: http.Header{"Traceparent": {trace}}}
	if _, e := b.call("CancelTask", map[string]any{"id": parent, "metadata": map[string]any{wire.CancelReasonKey: "the user gave up"}}); e != nil {
		t.Fatalf("cancel: %v", e)
	}
	waitFor(t, "the delegated tasks to be canceled at their agents", 10*time.Second, func() bool {
		return childAgent.Exec.wasCanceled(child) && parentAgent.Exec.wasCanceled(grandchild)
	})
	kinds, evs := events(lm.taskRecord(t, lm.buyer, pl, parent))
	if len(kinds) != 1 || !strings.HasPrefix(kinds[0], "canceled:key:") || evs[0]["reason"] != "the user gave up" {
		t.Errorf("parent's events: %v %v", kinds, evs)
	}
	// The seller sees that the buyer canceled, not with which key or why.
	if kinds, evs := events(lm.taskRecord(t, lm.seller, pl, parent)); len(kinds) != 1 || kinds[0] != "canceled:buyer" || evs[0]["reason"] != nil {
		t.Errorf("parent's events as the seller sees them: %v %v", kinds, evs)
	}
	for _, c := range []struct{ listing, task, parent string }{{cl, child, parent}, {pl, grandchild, child}} {
		kinds, evs := events(lm.endedRecord(t, lm.buyer, c.listing, c.task))
		if len(kinds) != 1 || kinds[0] != "canceled:cascade" || !strings.Contains(fmt.Sprint(evs[0]["reason"]), c.parent) {
			t.Errorf("task %s's events: %v %v", c.task, kinds, evs)
		}
		if evs[0]["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("task %s canceled under trace %v, want the parent cancel's", c.task, evs[0]["trace_id"])
		}
	}
	// The agents got the meter's cancel with the reason, once per task.
	for _, x := range childAgent.calls("CancelTask") {
		if !strings.Contains(x.ReqBody, parent) {
			t.Errorf("the child's agent got %s", x.ReqBody)
		}
	}
	time.Sleep(300 * time.Millisecond) // room for a duplicate cascade to show
	for ag, tasks := range map[*longAgent][]string{childAgent: {child}, parentAgent: {parent, grandchild}} {
		for _, task := range tasks {
			n := 0
			for _, x := range ag.calls("CancelTask") {
				if strings.Contains(x.ReqBody, `"id":"`+task+`"`) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("task %s: its agent got %d cancels, want 1", task, n)
			}
		}
	}
}

// TestCancelCascadeEarlyDelegation: an orchestrator delegates while its
// own task is still running inside a blocking call, before the meter has
// bound it: the child is recorded with its parent unresolved, and
// canceling the parent still cancels it. Another org's task naming the
// same parent id is no child of it and is left alone.
func TestCancelCascadeEarlyDelegation(t *testing.T) {
	parentAgent, childAgent := startLongAgent(t, "Orchestrating agent"), startLongAgent(t, "Specialist agent")
	lm := newLongMarket(t, map[string]string{})
	pl, pep := lm.list(t, parentAgent.URL, nil, nil)
	cl, cep := lm.list(t, childAgent.URL, nil, nil)
	_, other := signup(t, lm.api, "Initech", "it@initech.example")
	lm.api.with(other).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": cl})

	answered := make(chan map[string]any, 1)
	go func() {
		res, _ := (rpc{t: t, url: pep, key: lm.buyer, version: "1.0"}).call("SendMessage", msg10("ask later", nil))
		answered <- res
	}()
	var parent string
	select {
	case parent = <-parentAgent.Exec.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the parent task did not start")
	}
	send := func(key string) string {
		params := msg10("wait", map[string]any{"metadata": map[string]any{wire.ParentTaskKey: parent}})
		params["configuration"] = map[string]any{"returnImmediately": true}
		res, e := (rpc{t: t, url: cep, key: key, version: "1.0"}).call("SendMessage", params)
		if e != nil {
			t.Fatalf("send: %v", e)
		}
		id, _ := get(res, "task", "id").(string)
		return id
	}
	child, foreign := send(lm.buyer), send(other)
	if r := lm.taskRecord(t, lm.buyer, cl, child); r.str("parent_task_id") != parent || r.str("parent_listing_id") != "" {
		t.Errorf("early child's record: %s", r.Body)
	}
	parentAgent.Exec.step(parent)
	if res := <-answered; get(res, "task", "status", "state") != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("parent: %v", res)
	}
	// a2a-go v2.3.1 refuses a cancel that arrives while the execution that
	// just answered input-required is still being torn down (its
	// local_manager.go names the race in a TODO): the agent, not the meter,
	// answers TASK_NOT_CANCELABLE then. Try again until the agent takes it.
	var cancelErr map[string]any
	waitFor(t, "the agent to take the parent's cancel", 10*time.Second, func() bool {
		_, cancelErr = (rpc{t: t, url: pep, key: lm.buyer, version: "1.0"}).call("CancelTask", map[string]any{"id": parent})
		if cancelErr != nil && cancelErr["code"] != float64(-32002) {
			t.Fatalf("cancel: %v", cancelErr)
		}
		return cancelErr == nil
	})
	waitFor(t, "the early child canceled", 10*time.Second, func() bool { return childAgent.Exec.wasCanceled(child) })
	kinds, _ := events(lm.endedRecord(t, lm.buyer, cl, child))
	if len(kinds) != 1 || kinds[0] != "canceled:cascade" {
		t.Errorf("early child's events: %v", kinds)
	}
	time.Sleep(300 * time.Millisecond)
	if childAgent.Exec.wasCanceled(foreign) {
		t.Errorf("another org's task naming the same parent id was canceled")
	}
	if n := len(childAgent.calls("CancelTask")); n != 1 {
		t.Errorf("the child's agent got %d cancels, want 1", n)
	}
	_ = pl
}

// TestCascadeSurvivesAFailedCancel: when a delegated task's agent cannot
// take the cascaded cancel, the cancel stays requested, and the sweeper
// carries it out once the agent is back, with the reason and the trace of
// the parent's cancel.
func TestCascadeSurvivesAFailedCancel(t *testing.T) {
	parentAgent, childAgent := startLongAgent(t, "Orchestrating agent"), startLongAgent(t, "Specialist agent")
	lm := newLongMarket(t, map[string]string{"AGENTMARKET_METER_TASK_SWEEP": "100ms", "AGENTMARKET_METER_REQUEST_TIMEOUT": "1s"})
	_, pep := lm.list(t, parentAgent.URL, nil, nil)
	cl, cep := lm.list(t, childAgent.URL, nil, nil)
	send := func(ep string, meta map[string]any) string {
		params := msg10("wait", map[string]any{"metadata": meta})
		params["configuration"] = map[string]any{"returnImmediately": true}
		res, e := (rpc{t: t, url: ep, key: lm.buyer, version: "1.0"}).call("SendMessage", params)
		if e != nil {
			t.Fatalf("send: %v", e)
		}
		id, _ := get(res, "task", "id").(string)
		return id
	}
	parent := send(pep, nil)
	child := send(cep, map[string]any{wire.ParentTaskKey: parent})
	childAgent.down.Store(true)
	trace := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	if _, e := (rpc{t: t, url: pep, key: lm.buyer, version: "1.0", header: http.Header{"Traceparent": {trace}}}).call("CancelTask", map[string]any{"id": parent}); e != nil {
		t.Fatalf("cancel: %v", e)
	}
	waitFor(t, "the cascaded cancel to be refused", 5*time.Second, func() bool { return len(childAgent.calls("CancelTask")) >= 1 })
	time.Sleep(500 * time.Millisecond)
	if childAgent.Exec.wasCanceled(child) {
		t.Fatal("the child was canceled while its agent was down")
	}
	childAgent.down.Store(false)
	waitFor(t, "the sweeper to cancel the child", 15*time.Second, func() bool { return childAgent.Exec.wasCanceled(child) })
	kinds, evs := events(lm.endedRecord(t, lm.buyer, cl, child))
	if len(kinds) != 1 || kinds[0] != "canceled:cascade" || !strings.Contains(fmt.Sprint(evs[0]["reason"]), parent) ||
		evs[0]["trace_id"] != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("child's events: %v %v", kinds, evs)
	}
}
