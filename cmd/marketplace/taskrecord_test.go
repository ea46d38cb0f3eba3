package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestEveryEndedTaskIsRecorded: a task that ends is recorded as ended
// (ended_at and an "ended" event with its state), whatever brought it
// there: a blocking send that completed it at once, a stream, a follow-up
// to a paused task, and on both storage set-ups. The record is a
// projection of the spool, written off the call path.
func TestEveryEndedTaskIsRecorded(t *testing.T) {
	meterEnvs(t, func(t *testing.T, e meterEnv) {
		mk := newMarket(t, e.env)
		lm := &longMarket{api: mk.api, buyer: mk.buyer}
		c03 := rpc{t: t, url: mk.ep03, key: mk.buyer}
		c10 := rpc{t: t, url: mk.ep10, key: mk.buyer, version: "1.0"}

		check := func(what, listing, task, state string) {
			t.Helper()
			rec := lm.endedRecord(t, mk.buyer, listing, task)
			kinds, evs := events(rec)
			if len(kinds) == 0 || !strings.HasPrefix(kinds[len(kinds)-1], "ended:") || evs[len(evs)-1]["state"] != state {
				t.Errorf("%s: events %v %v, want the last one ended, %s", what, kinds, evs, state)
			}
		}

		res, rerr := c03.call("message/send", msg03("a report to sum up", nil))
		if rerr != nil {
			t.Fatal(rerr)
		}
		check("a blocking 0.3 send", mk.id03, fmt.Sprint(get(res, "id")), "completed")

		res, rerr = c10.call("SendMessage", msg10("a text to translate", nil))
		if rerr != nil {
			t.Fatal(rerr)
		}
		check("a blocking 1.0 send", mk.id10, fmt.Sprint(get(res, "task", "id")), "completed")

		evs := c03.stream("message/stream", msg03("a streamed report", nil))
		check("a stream", mk.id03, fmt.Sprint(get(evs[0].data, "result", "id")), "completed")

		res, rerr = c03.call("message/send", msg03("please clarify the scope", nil))
		if rerr != nil || get(res, "status", "state") != "input-required" {
			t.Fatalf("a paused task: %v %v", res, rerr)
		}
		paused := fmt.Sprint(get(res, "id"))
		time.Sleep(100 * time.Millisecond)
		if rec := lm.taskRecord(t, mk.buyer, mk.id03, paused); rec.JSON["ended_at"] != nil {
			t.Errorf("a paused task is recorded ended: %s", rec.Body)
		}
		if _, rerr := c03.call("message/send", msg03("the scope is Europe", map[string]any{"taskId": paused})); rerr != nil {
			t.Fatal(rerr)
		}
		check("a paused task, answered", mk.id03, paused, "completed")
	})
}

// TestListTasksPages: ListTasks through the meter pages over the caller's
// own tasks, whatever other buyers' tasks the agent's pages hold: every
// page full (pageSize, default 50), a next token while more follow,
// totalSize the caller's own count; a token works only for whom it was
// given. JSON-RPC and HTTP+JSON alike.
func TestListTasksPages(t *testing.T) {
	mk := newMarket(t, map[string]string{})
	_, keyB := signup(t, mk.api, "Initech", "it@initech.example")
	if r := mk.api.with(keyB).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": mk.id10}); r.Status != 201 {
		t.Fatalf("B subscribes: %d %s", r.Status, r.Body)
	}
	a := rpc{t: t, url: mk.ep10, key: mk.buyer, version: "1.0"}
	b := rpc{t: t, url: mk.ep10, key: keyB, version: "1.0"}
	mine := map[string]map[string]bool{mk.buyer: {}, keyB: {}}
	for i := range 10 {
		who := a
		if i%3 == 1 { // B's tasks in between A's, in the agent's pages
			who = b
		}
		res, rerr := who.call("SendMessage", msg10(fmt.Sprintf("task %d", i), nil))
		if rerr != nil {
			t.Fatal(rerr)
		}
		mine[who.key][fmt.Sprint(get(res, "task", "id"))] = true
	}
	if len(mine[mk.buyer]) != 7 || len(mine[keyB]) != 3 {
		t.Fatalf("set-up: %d and %d tasks", len(mine[mk.buyer]), len(mine[keyB]))
	}

	pages := func(who rpc, size int) (ids []string, sizes []int, totals []float64) {
		t.Helper()
		token := ""
		for n := 0; n < 20; n++ {
			params := map[string]any{"pageSize": size}
			if token != "" {
				params["pageToken"] = token
			}
			res, rerr := who.call("ListTasks", params)
			if rerr != nil {
				t.Fatalf("ListTasks page %d: %v", n, rerr)
			}
			tasks, _ := res["tasks"].([]any)
			for _, tk := range tasks {
				ids = append(ids, fmt.Sprint(get(tk.(map[string]any), "id")))
			}
			sizes, totals = append(sizes, len(tasks)), append(totals, res["totalSize"].(float64))
			token, _ = res["nextPageToken"].(string)
			if token == "" {
				return
			}
		}
		t.Fatal("more than 20 pages")
		return
	}
	check := func(who rpc, size int, wantSizes []int) {
		t.Helper()
		ids, sizes, totals := pages(who, size)
		want := mine[who.key]
		seen := map[string]bool{}
		for _, id := range ids {
			if !want[id] || seen[id] {
				t.Errorf("page size %d: task %s is not the caller's or came twice (%v)", size, id, ids)
			}
			seen[id] = true
		}
		if len(seen) != len(want) || !slices.Equal(sizes, wantSizes) {
			t.Errorf("page size %d: pages of %v, %d tasks; want pages of %v, all %d", size, sizes, len(seen), wantSizes, len(want))
		}
		for _, tot := range totals {
			if tot != float64(len(want)) {
				t.Errorf("page size %d: totalSize %v, want %d (the caller's own)", size, totals, len(want))
				break
			}
		}
	}
	check(a, 2, []int{2, 2, 2, 1})
	check(a, 7, []int{7})
	check(b, 2, []int{2, 1})

	// The default page is 50: everything, no token.
	res, _ := a.call("ListTasks", map[string]any{})
	if tasks, _ := res["tasks"].([]any); len(tasks) != 7 || res["nextPageToken"] != "" || res["pageSize"] != float64(50) {
		t.Errorf("default page: %v", res)
	}
	// A token is the caller's only, and a forged one is refused.
	res, _ = a.call("ListTasks", map[string]any{"pageSize": 2})
	tokA, _ := res["nextPageToken"].(string)
	for what, c := range map[string]struct {
		who rpc
		tok string
	}{"A's token used by B": {b, tokA}, "a forged token": {a, "bm90LWEtdG9rZW4"}} {
		if _, rerr := c.who.call("ListTasks", map[string]any{"pageToken": c.tok}); rerr == nil || rerr["code"] != float64(-32602) {
			t.Errorf("%s: %v, want -32602", what, rerr)
		}
	}
	// HTTP+JSON: GET /tasks?pageSize=3.
	status, body, _ := restCall(t, mk.buyer, "GET", mk.ep10+"/tasks?pageSize=3", "1.0", nil)
	if tasks, _ := body["tasks"].([]any); status != 200 || len(tasks) != 3 || body["totalSize"] != float64(7) || body["nextPageToken"] == "" {
		t.Errorf("REST ListTasks: %d %v", status, body)
	}
}
