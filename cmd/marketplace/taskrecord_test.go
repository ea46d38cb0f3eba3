package main

import (
	"fmt"
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
