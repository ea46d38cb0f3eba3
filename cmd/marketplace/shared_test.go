package main

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
	"github.com/agentmarket/agentmarket/contracts/redis/redistest"
	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// TestSharedStateAcrossMeters: two meters share PostgreSQL and Redis
// (AGENTMARKET_REDIS_URL). While the database can take no binding at all
// (its task_owners table locked), a task created through one meter is found
// for its owner on the other, and for no other org; a send retried through
// the other meter is answered from the first, and the agent gets it once;
// no sent message is written to the database. Redis then stops: calls go
// on, through the database path (the other meter finds the task once it is
// projected, a retry there is answered from the first); Redis comes back
// empty: a send made during the outage is still answered, not forwarded
// again, through either meter. Every task is billed once.
func TestSharedStateAcrossMeters(t *testing.T) {
	dsn := relationaltest.PostgresDSN(t)
	rs := redistest.Start(t)
	env := sharedEnv(dsn, rs.URL)
	ag := startSDKAgent(t, "1.0", a2a.TransportProtocolJSONRPC)
	lm := newLongMarket(t, env)
	listing, ep1 := lm.list(t, ag.URL, nil, nil)
	_, other := signup(t, lm.api, "Initech", "it@initech.example")
	if r := lm.api.with(other).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": listing}); r.Status != 201 {
		t.Fatalf("the other org's subscription: %d %s", r.Status, r.Body)
	}
	second := startMarketplace(t, env)
	ep2 := second.URL + "/a2a/" + listing
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	rowsOf := func(table, task string) int {
		t.Helper()
		var n int
		q := "SELECT count(*) FROM " + table
		args := []any{}
		if task != "" {
			q += " WHERE task_id = $1"
			args = append(args, task)
		}
		if err := db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	send := func(url, key string, p map[string]any) string {
		t.Helper()
		res, rerr := rpc{t: t, url: url, key: key, version: "1.0"}.call("SendMessage", p)
		task, _ := get(res, "task", "id").(string)
		if rerr != nil || task == "" {
			t.Fatalf("send through %s: %v %v", url, res, rerr)
		}
		return task
	}
	getTask := func(url, key, task string) (string, map[string]any) {
		t.Helper()
		res, rerr := rpc{t: t, url: url, key: key, version: "1.0"}.call("GetTask", map[string]any{"id": task})
		id, _ := res["id"].(string)
		return id, rerr
	}
	mark := ag.Wire.mark()

	// 1. The database takes no binding meanwhile: what the second meter
	// knows, it knows from Redis.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "LOCK TABLE task_owners IN EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	p1 := msg10("shared through Redis", nil)
	task1 := send(ep1, lm.buyer, p1)
	if id, rerr := getTask(ep2, lm.buyer, task1); rerr != nil || id != task1 {
		t.Errorf("the owner's GetTask through the other meter: %q %v, want the task", id, rerr)
	}
	if _, rerr := getTask(ep2, other, task1); rerr == nil || rerr["code"] != float64(wire.CodeTaskNotFound) {
		t.Errorf("another org's GetTask through the other meter: %v, want TaskNotFound", rerr)
	}
	if _, rerr := getTask(ep1, other, task1); rerr == nil || rerr["code"] != float64(wire.CodeTaskNotFound) {
		t.Errorf("another org's GetTask through the first meter: %v, want TaskNotFound", rerr)
	}
	if got := send(ep2, lm.buyer, p1); got != task1 {
		t.Errorf("the send retried through the other meter got task %s, want the first's %s", got, task1)
	}
	var held int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM task_owners WHERE task_id = $1", task1).Scan(&held); err != nil || held != 0 {
		t.Fatalf("the database held the binding while locked: %d %v", held, err)
	}
	tx.Rollback()
	waitFor(t, "the binding's projection", 15*time.Second, func() bool { return rowsOf("task_owners", task1) == 1 })
	if n := rowsOf("sent_messages", ""); n != 0 {
		t.Errorf("%d sent messages in the database, want none (they are in Redis)", n)
	}

	// 2. Redis is down: nothing is refused, the database path serves.
	rs.Stop()
	p2 := msg10("sent while Redis is down", nil)
	task2 := send(ep1, lm.buyer, p2)
	waitFor(t, "the send's record in the database", 15*time.Second, func() bool { return rowsOf("sent_messages", "") >= 1 })
	if id, rerr := getTask(ep2, lm.buyer, task2); rerr != nil || id != task2 {
		t.Errorf("the owner's GetTask through the other meter, Redis down: %q %v", id, rerr)
	}
	if _, rerr := getTask(ep2, other, task2); rerr == nil || rerr["code"] != float64(wire.CodeTaskNotFound) {
		t.Errorf("another org's GetTask, Redis down: %v, want TaskNotFound", rerr)
	}
	if got := send(ep2, lm.buyer, p2); got != task2 {
		t.Errorf("retried through the other meter, Redis down: task %s, want %s", got, task2)
	}

	// 3. Redis is back, empty: the send of the outage is still known to
	// both meters, and new tasks are shared again.
	rs.Restart()
	for _, ep := range []string{ep1, ep2} {
		if got := send(ep, lm.buyer, p2); got != task2 {
			t.Errorf("retried through %s after the outage: task %s, want %s", ep, got, task2)
		}
	}
	// A meter tries Redis again a second after it failed.
	var task3 string
	sent := 2
	waitFor(t, "a new task's binding in Redis again", 15*time.Second, func() bool {
		task3 = send(ep2, lm.buyer, msg10("after the outage", nil))
		sent++
		return rs.Has(t, "am:o:"+listing+"|"+task3)
	})
	if id, rerr := getTask(ep1, lm.buyer, task3); rerr != nil || id != task3 {
		t.Errorf("a task of after the outage through the other meter: %q %v", id, rerr)
	}

	if n := ag.sends(mark); n != sent {
		t.Errorf("the agent got %d sends of %d messages", n, sent)
	}
	billedOnceEach(t, dsn, []*started{lm.m, second}, listing, []string{task1, task2, task3})
	// The bills of the tasks created while Redis served were decided there,
	// by the sends that created them: no ledger row in the database.
	for _, task := range []string{task1, task3} {
		for _, m := range []*started{lm.m, second} {
			for _, u := range usageRows(t, m, meterEnv{}, 0) {
				if u.TaskID != task {
					continue
				}
				if (u.Tasks == 1) != (u.Method == "SendMessage") {
					t.Errorf("task %s: row %s %s bills tasks=%d; the send that created it bills the task", task, u.ID, u.Method, u.Tasks)
				}
				var n int
				if err := db.QueryRowContext(ctx, "SELECT count(*) FROM settled_bills WHERE row_id = $1", u.ID).Scan(&n); err != nil || n != 0 {
					t.Errorf("task %s: row %s settled in the database's ledger (%d %v), want decided in Redis", task, u.ID, n, err)
				}
			}
		}
	}
	if m := (client{t: t, base: second.URL}).do("GET", "/metrics", nil); !strings.Contains(string(m.Body), `agentmarket_meter_shared_state_fallbacks_total{op="lookup"}`) {
		t.Errorf("the second meter's metrics count no lookup that fell back to the database")
	}
}

// billedOnceEach checks, over every meter's usage rows, that each task was
// billed once: its rows together bill the task once (Tasks) and bill the
// tokens and compute the ledger holds for it (its one row in the
// database), and the retries' rows bill nothing.
//
// Which row bills the task is not checked: with the bills settled in the
// shared database, a read of the task through another meter (found there
// at once, from Redis) may be settled before the send that created it.
func billedOnceEach(t *testing.T, dsn string, meters []*started, listing string, tasks []string) {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, task := range tasks {
		var rows []metering.Usage
		var in, out, ms int64
		waitFor(t, "the rows of task "+task+" settled in the ledger", 15*time.Second, func() bool {
			rows = rows[:0]
			var tasksBilled, rin, rout, rms int64
			for _, m := range meters {
				for _, u := range usageRows(t, m, meterEnv{}, 0) {
					if u.TaskID == task && u.ListingID == listing {
						rows = append(rows, u)
						tasksBilled += u.Tasks
						rin, rout, rms = rin+u.InputTokens, rout+u.OutputTokens, rms+u.ComputeMs
					}
				}
			}
			if err := db.QueryRow(`SELECT billed_input_tokens, billed_output_tokens, billed_compute_ms FROM task_owners WHERE listing_id = $1 AND task_id = $2`,
				listing, task).Scan(&in, &out, &ms); err != nil {
				return false
			}
			return tasksBilled == 1 && rin == in && rout == out && rms == ms && ms > 0
		})
		for _, u := range rows {
			if strings.HasPrefix(u.Method, "replay:") && (u.Tasks != 0 || u.CostMicros != 0 || u.InputTokens != 0 || u.OutputTokens != 0 || u.ComputeMs != 0) {
				t.Errorf("task %s: a retry's row bills: %+v", task, u)
			}
		}
	}
}
