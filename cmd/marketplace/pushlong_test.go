package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPushNotifications: a long task's updates reach the buyer's webhook
// through the meter, with the buyer's authentication and token, in the
// buyer's version, in order, each once (by delivery id), also when the
// webhook is down for a while and the meter restarts mid-task; webhooks on
// private and metadata addresses are refused; a webhook that keeps failing
// shows up as failed deliveries in the API; the task's usage is what the
// agent reported, counted once.
func TestPushNotifications(t *testing.T) {
	meterEnvs(t, func(t *testing.T, e meterEnv) {
		ag := startLongAgent(t, "Long 1.0 agent")
		hook := startWebhook(t)
		env := map[string]string{"AGENTMARKET_ADDR": freeAddr(t), "AGENTMARKET_DATA_DIR": t.TempDir(),
			// Retried often and long enough to outlast a slow restart.
			"AGENTMARKET_PUSH_RETRY_BASE": "100ms", "AGENTMARKET_PUSH_RETRY_MAX": "500ms", "AGENTMARKET_PUSH_MAX_ATTEMPTS": "100"}
		for k, v := range e.env {
			env[k] = v
		}
		lm := newLongMarket(t, env)
		listing, ep := lm.list(t, ag.URL, nil, nil)

		card := lm.api.do("GET", "/a2a/"+listing+"/.well-known/agent-card.json", nil)
		if get(card.JSON, "capabilities", "pushNotifications") != true {
			t.Errorf("proxied card of a push agent: pushNotifications = %v", get(card.JSON, "capabilities", "pushNotifications"))
		}

		b10 := rpc{t: t, url: ep, key: lm.buyer, version: "1.0"}
		res, rerr := b10.call("SendMessage", map[string]any{"message": msg10("long 4", nil)["message"],
			"configuration": map[string]any{"returnImmediately": true}})
		if rerr != nil {
			t.Fatalf("send: %v", rerr)
		}
		task, _ := get(res, "task", "id").(string)

		// Webhooks on private and metadata addresses are refused, before
		// anything is dialled.
		for _, u := range []string{"http://10.0.0.1/hook", "https://169.254.169.254/latest/meta-data", "https://10.0.0.1/hook"} {
			_, e := b10.call("CreateTaskPushNotificationConfig", map[string]any{"taskId": task, "id": "bad", "url": u})
			if e == nil || e["code"] != float64(-32602) || !strings.Contains(fmt.Sprint(e["message"]), "refused") {
				t.Errorf("push config at %s: %v, want -32602 refused", u, e)
			}
		}
		// Another org cannot set a config on this task.
		_, otherKey := signup(t, lm.api, "Initech", "it@initech.example")
		lm.api.with(otherKey).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": listing})
		if _, e := (rpc{t: t, url: ep, key: otherKey, version: "1.0"}).call("CreateTaskPushNotificationConfig",
			map[string]any{"taskId": task, "url": hook.URL + "/steal"}); e == nil || e["code"] != float64(-32001) {
			t.Errorf("another org's push config: %v, want TaskNotFound", e)
		}

		cfg := map[string]any{"taskId": task, "id": "cfg-1", "url": hook.URL + "/hook", "token": "tok-123",
			"authentication": map[string]any{"scheme": "Bearer", "credentials": "buyer-secret"}}
		got, perr := b10.call("CreateTaskPushNotificationConfig", cfg)
		if perr != nil || got["url"] != hook.URL+"/hook" || got["id"] != "cfg-1" {
			t.Fatalf("push config: %v %v", got, perr)
		}
		if list, _ := b10.call("ListTaskPushNotificationConfigs", map[string]any{"taskId": task}); len(get(list, "configs").([]any)) != 1 {
			t.Errorf("list push configs: %v", list)
		}
		// The agent got the meter's callback, not the buyer's webhook.
		for _, x := range ag.calls("CreateTaskPushNotificationConfig") {
			if strings.Contains(x.ReqBody, hook.URL) || !strings.Contains(x.ReqBody, "/a2a-callbacks/") {
				t.Errorf("the agent was given %s", x.ReqBody)
			}
		}
		// A forged notification (wrong secret) is refused.
		cb := strings.SplitN(ag.calls("CreateTaskPushNotificationConfig")[0].ReqBody, `/a2a-callbacks/`, 2)[1]
		cb = cb[:strings.IndexAny(cb, `"\`)]
		forged, _ := http.NewRequest("POST", lm.m.URL+"/a2a-callbacks/"+cb, strings.NewReader(`{"statusUpdate":{"taskId":"`+task+`","status":{"state":"TASK_STATE_COMPLETED"}}}`))
		forged.Header.Set("A2A-Notification-Token", "guess")
		if r, err := http.DefaultClient.Do(forged); err != nil || r.StatusCode != 401 {
			t.Errorf("forged notification: %v %v, want 401", r, err)
		}

		// The webhook is down while the first two steps are pushed.
		hook.down.Store(true)
		ag.Exec.step(task)
		ag.Exec.step(task)
		deliveries := func(status string) []any {
			r := lm.api.with(lm.buyer).do("GET", "/api/v1/push-deliveries?task_id="+task+"&status="+status, nil)
			items, _ := r.JSON["items"].([]any)
			return items
		}
		waitFor(t, "two pending deliveries", 10*time.Second, func() bool { return len(deliveries("pending")) >= 2 })

		// The meter restarts mid-task, with those deliveries pending.
		lm.m.stop(t)
		lm.m = startMarketplace(t, env)
		hook.down.Store(false)
		ag.Exec.step(task)
		ag.Exec.step(task)

		if !eventually(20*time.Second, func() bool { return len(hook.received("/hook")) >= 5 }) {
			all := lm.api.with(lm.buyer).do("GET", "/api/v1/push-deliveries?task_id="+task, nil)
			t.Fatalf("timed out after 20s waiting for five deliveries: the webhook got %q; the deliveries: %s\nthe agent's log:\n%s\nthe meter's log:\n%s",
				pushKinds(hook.received("/hook")), all.Body, ag.Log, lm.m.Output)
		}
		calls := hook.received("/hook")
		kinds := pushKinds(calls)
		for i, c := range calls {
			if c.Auth != "Bearer buyer-secret" || c.Token != "tok-123" || c.Token03 != "tok-123" {
				t.Errorf("delivery %d: Authorization %q, token %q/%q", i, c.Auth, c.Token, c.Token03)
			}
			if c.ContentType != "application/a2a+json" || c.DeliveryID == "" {
				t.Errorf("delivery %d: content type %q, id %q", i, c.ContentType, c.DeliveryID)
			}
		}
		want := []string{"part 1;", "part 2;", "part 3;", "part 4;", "TASK_STATE_COMPLETED"}
		if strings.Join(kinds, " ") != strings.Join(want, " ") {
			t.Errorf("webhook got %q, want %q", kinds, want)
		}
		// Each is signed over the bytes sent, by a key the marketplace
		// publishes (the same before and after the restart).
		verifyDeliveries(t, lm.m.URL, lm.buyerOrg, hook.URL, calls, listing, task, "cfg-1")
		// The webhook may see the last delivery a moment before the meter
		// records its answer.
		waitFor(t, "five delivered deliveries in the API", 10*time.Second, func() bool { return len(deliveries("delivered")) == 5 })
		metrics := string(lm.api.do("GET", "/metrics", nil).Body)
		for _, series := range []string{`agentmarket_meter_push_notifications_total{listing="` + listing + `",outcome="accepted"}`,
			`agentmarket_meter_push_delivery_attempts_total{outcome="delivered"}`} {
			if !strings.Contains(metrics, series) {
				t.Errorf("/metrics has no %s", series)
			}
		}

		// Usage: what the agent reported, once.
		rows := taskRows(t, lm.m, e, task, 1)
		waitFor(t, "the task's full usage", 20*time.Second, func() bool {
			rows = taskRows(t, lm.m, e, task, 1)
			_, out, _, _ := sumUsage(rows)
			return out >= 20
		})
		in, out, ms, tasks := sumUsage(rows)
		if in != 10 || out != 20 || ms != 400 || tasks != 1 {
			t.Errorf("task usage: input %d output %d compute %d tasks %d; want 10, 20, 400, 1 (rows %+v)", in, out, ms, tasks, rows)
		}

	})
}

// firstText is the text of the first part of a parts array.
func firstText(parts any) string {
	ps, _ := parts.([]any)
	if len(ps) == 0 {
		return ""
	}
	p, _ := ps[0].(map[string]any)
	return fmt.Sprint(p["text"])
}

// TestPushNotifications03: an A2A 0.3 buyer gives its webhook inline in
// message/send to an A2A 0.3 agent: the agent never sees the buyer's
// webhook, and the buyer gets every update in 0.3 form, with its
// authentication and X-A2A-Notification-Token; a 1.0 buyer of the same
// agent gets 1.0 notifications.
func TestPushNotifications03(t *testing.T) {
	ag := startLongAgentV(t, "Long 0.3 agent", "0.3")
	hook := startWebhook(t)
	lm := newLongMarket(t, map[string]string{})
	listing, ep := lm.list(t, ag.URL, nil, nil)
	if card := lm.api.do("GET", "/a2a/"+listing+"/.well-known/agent-card.json", nil); get(card.JSON, "capabilities", "pushNotifications") != true {
		t.Errorf("proxied 0.3 card: %s", card.Body)
	}
	b03 := rpc{t: t, url: ep, key: lm.buyer}
	res, e := b03.call("message/send", map[string]any{"message": msg03("long 2", nil)["message"], "configuration": map[string]any{
		"blocking": false, "pushNotificationConfig": map[string]any{"url": hook.URL + "/hook03", "token": "tok-03",
			"authentication": map[string]any{"schemes": []string{"Bearer"}, "credentials": "secret-03"}}}})
	if e != nil {
		t.Fatalf("send: %v", e)
	}
	task, _ := res["id"].(string)
	// A refused webhook inline is refused before the agent is called.
	if _, e := b03.call("message/send", map[string]any{"message": msg03("long 1", nil)["message"], "configuration": map[string]any{
		"pushNotificationConfig": map[string]any{"url": "http://169.254.169.254/hook"}}}); e == nil || e["code"] != float64(-32602) {
		t.Errorf("inline metadata webhook: %v", e)
	}
	for _, x := range ag.Wire.since(0) {
		if strings.Contains(x.ReqBody, hook.URL) || strings.Contains(x.ReqBody, "169.254") {
			t.Errorf("the agent was given the buyer's webhook: %s", x.ReqBody)
		}
	}
	// The registration happens once the agent names the task.
	waitFor(t, "the meter's callback registered", 5*time.Second, func() bool {
		for _, x := range ag.Wire.since(0) {
			if x.RPC == "tasks/pushNotificationConfig/set" {
				return true
			}
		}
		return false
	})
	// The buyer's config reads back in 0.3 form (a bare array of
	// TaskPushNotificationConfig).
	if res, err := b03.post("tasks/pushNotificationConfig/list", map[string]any{"id": task}); err != nil {
		t.Fatal(err)
	} else {
		var out struct {
			Result []struct {
				TaskID string `json:"taskId"`
				Config struct {
					ID             string `json:"id"`
					URL            string `json:"url"`
					Authentication struct {
						Schemes []string `json:"schemes"`
					} `json:"authentication"`
				} `json:"pushNotificationConfig"`
			} `json:"result"`
		}
		json.NewDecoder(res.Body).Decode(&out)
		res.Body.Close()
		if len(out.Result) != 1 || out.Result[0].TaskID != task || out.Result[0].Config.URL != hook.URL+"/hook03" ||
			len(out.Result[0].Config.Authentication.Schemes) != 1 || out.Result[0].Config.ID != task {
			t.Errorf("0.3 push config list: %+v (a 0.3 config without an id is the task's)", out)
		}
	}
	// 0.3 reads a task's config by the task alone.
	if got, e := b03.call("tasks/pushNotificationConfig/get", map[string]any{"id": task}); e != nil || get(got, "pushNotificationConfig", "url") != hook.URL+"/hook03" {
		t.Errorf("0.3 get by task: %v %v", got, e)
	}
	ag.Exec.step(task)
	ag.Exec.step(task)
	waitFor(t, "three 0.3 deliveries", 10*time.Second, func() bool {
		got := hook.received("/hook03")
		return len(got) >= 3 && got[len(got)-1].Body["kind"] == "status-update" && get(got[len(got)-1].Body, "status", "state") == "completed"
	})
	var kinds []string
	for i, c := range hook.received("/hook03") {
		if c.Auth != "Bearer secret-03" || c.Token03 != "tok-03" || c.ContentType != "application/json" {
			t.Errorf("delivery %d: Authorization %q, X-A2A-Notification-Token %q, %s", i, c.Auth, c.Token03, c.ContentType)
		}
		if c.Body["kind"] == "status-update" && get(c.Body, "status", "state") == "working" {
			continue // pushed when the callback was registered in time for it
		}
		kinds = append(kinds, fmt.Sprint(c.Body["kind"]))
		if c.Body["taskId"] != task {
			t.Errorf("delivery %d is about %v", i, c.Body["taskId"])
		}
	}
	if strings.Join(kinds, " ") != "artifact-update artifact-update status-update" {
		t.Errorf("0.3 deliveries: %v", kinds)
	}
	// The 0.3 bodies are signed as sent, like 1.0 ones.
	verifyDeliveries(t, lm.m.URL, lm.buyerOrg, hook.URL, hook.received("/hook03"), listing, task, task)
}

// TestPushConfigsOverREST: the push-config paths of the HTTP+JSON binding
// (1.0, and 0.3 under /v1) are served by the meter as the JSON-RPC
// methods are: create, get, list, delete, a refused webhook answered 400,
// another org's task 404; and notifications then reach the webhook.
func TestPushConfigsOverREST(t *testing.T) {
	ag := startLongAgent(t, "Long REST-fronted agent")
	hook := startWebhook(t)
	lm := newLongMarket(t, map[string]string{})
	listing, ep := lm.list(t, ag.URL, nil, nil)
	_, other := signup(t, lm.api, "Initech", "it@initech.example")
	lm.api.with(other).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": listing})

	status, res, _ := restCall(t, lm.buyer, "POST", ep+"/message:send", "1.0", map[string]any{
		"message": msg10("long 1", nil)["message"], "configuration": map[string]any{"returnImmediately": true}})
	task, _ := get(res, "task", "id").(string)
	if status != 200 || task == "" {
		t.Fatalf("send: %d %v", status, res)
	}
	configs := ep + "/tasks/" + task + "/pushNotificationConfigs"
	if status, res, _ = restCall(t, lm.buyer, "POST", configs, "1.0", map[string]any{"url": "https://10.0.0.1/hook"}); status != 400 {
		t.Errorf("private webhook over REST: %d %v", status, res)
	}
	if status, res, _ = restCall(t, other, "POST", configs, "1.0", map[string]any{"url": hook.URL + "/x"}); status != 404 {
		t.Errorf("another org's task over REST: %d %v", status, res)
	}
	status, res, _ = restCall(t, lm.buyer, "POST", configs, "1.0", map[string]any{"id": "rest-1", "url": hook.URL + "/rest",
		"authentication": map[string]any{"scheme": "Bearer", "credentials": "rest-secret"}})
	if status != 200 || res["id"] != "rest-1" || res["taskId"] != task {
		t.Fatalf("create over REST: %d %v", status, res)
	}
	if status, res, _ = restCall(t, lm.buyer, "GET", configs+"/rest-1", "1.0", nil); status != 200 || res["url"] != hook.URL+"/rest" {
		t.Errorf("get over REST: %d %v", status, res)
	}
	if status, res, _ = restCall(t, lm.buyer, "GET", configs, "1.0", nil); status != 200 || len(get(res, "configs").([]any)) != 1 {
		t.Errorf("list over REST: %d %v", status, res)
	}
	// The same config through the 0.3 form of the path.
	if status, res, _ = restCall(t, lm.buyer, "GET", ep+"/v1/tasks/"+task+"/pushNotificationConfigs/rest-1", "", nil); status != 200 {
		t.Errorf("0.3 get over REST: %d %v", status, res)
	}
	ag.Exec.step(task)
	waitFor(t, "two deliveries", 10*time.Second, func() bool { return len(hook.received("/rest")) >= 2 })
	if c := hook.received("/rest")[0]; c.Auth != "Bearer rest-secret" {
		t.Errorf("REST-configured delivery: %+v", c)
	}
	// A task's configs are bounded.
	for i := range 9 {
		if status, res, _ := restCall(t, lm.buyer, "POST", configs, "1.0", map[string]any{"id": fmt.Sprintf("more-%d", i), "url": hook.URL + "/more"}); status != 200 {
			t.Fatalf("config %d: %d %v", i, status, res)
		}
	}
	if status, res, _ = restCall(t, lm.buyer, "POST", configs, "1.0", map[string]any{"id": "one-too-many", "url": hook.URL + "/more"}); status != 400 {
		t.Errorf("an 11th config: %d %v", status, res)
	}
	if status, res, _ = restCall(t, lm.buyer, "POST", configs, "1.0", map[string]any{"id": "more-0", "url": hook.URL + "/again"}); status != 200 {
		t.Errorf("replacing a config at the bound: %d %v", status, res)
	}
	if status, res, _ = restCall(t, lm.buyer, "DELETE", configs+"/rest-1", "1.0", nil); status != 200 {
		t.Errorf("delete over REST: %d %v", status, res)
	}
	if status, _, _ = restCall(t, lm.buyer, "GET", configs+"/rest-1", "1.0", nil); status != 400 && status != 404 {
		t.Errorf("get after delete: %d", status)
	}
	if len(ag.calls("DeleteTaskPushNotificationConfig")) != 1 {
		t.Errorf("the meter's callback was not removed at the agent")
	}
}

// TestPushDeliveryRechecksAddress: the webhook's address is judged again
// when a delivery dials it. A config accepted while 127.0.0.0/8 was
// allowed gets nothing once the meter restarts without that allowance:
// the delivery fails at once (no retries), saying why, and the webhook is
// never reached.
func TestPushDeliveryRechecksAddress(t *testing.T) {
	ag := startLongAgent(t, "Long agent")
	hook := startWebhook(t)
	env := map[string]string{"AGENTMARKET_ADDR": freeAddr(t), "AGENTMARKET_DATA_DIR": t.TempDir()}
	lm := newLongMarket(t, env)
	_, ep := lm.list(t, ag.URL, nil, nil)
	b10 := rpc{t: t, url: ep, key: lm.buyer, version: "1.0"}
	res, _ := b10.call("SendMessage", map[string]any{"message": msg10("long 1", nil)["message"], "configuration": map[string]any{"returnImmediately": true}})
	task, _ := get(res, "task", "id").(string)
	if _, e := b10.call("CreateTaskPushNotificationConfig", map[string]any{"taskId": task, "id": "c", "url": hook.URL + "/guarded"}); e != nil {
		t.Fatalf("push config: %v", e)
	}
	lm.m.stop(t)
	// What the agent notified while loopback was allowed may have been
	// delivered already; nothing may be after the restart.
	before := len(hook.received("/guarded"))
	env["AGENTMARKET_FETCH_ALLOW_CIDRS"] = "192.0.2.0/24" // no longer loopback
	lm.m = startMarketplace(t, env)
	ag.Exec.step(task)
	var failed []any
	waitFor(t, "the refused deliveries", 10*time.Second, func() bool {
		r := lm.api.with(lm.buyer).do("GET", "/api/v1/push-deliveries?status=failed&task_id="+task, nil)
		failed, _ = r.JSON["items"].([]any)
		return len(failed) >= 1
	})
	f := failed[len(failed)-1].(map[string]any)
	if f["attempts"] != float64(1) || !strings.Contains(fmt.Sprint(f["last_error"]), "refused") || !strings.Contains(fmt.Sprint(f["last_error"]), "127.0.0.1") {
		t.Errorf("refused delivery: %v", f)
	}
	if n := len(hook.received("/guarded")); n != before {
		t.Errorf("the webhook got %d deliveries after the restart", n-before)
	}
}

// TestPushDeliveryGivesUp: a webhook that keeps failing gets a bounded
// number of attempts; its deliveries then end failed, visible through the
// API with the reason, and can be sent again (another org cannot).
func TestPushDeliveryGivesUp(t *testing.T) {
	ag := startLongAgent(t, "Long agent")
	hook := startWebhook(t)
	lm := newLongMarket(t, map[string]string{"AGENTMARKET_PUSH_RETRY_BASE": "50ms", "AGENTMARKET_PUSH_MAX_ATTEMPTS": "3"})
	listing, ep := lm.list(t, ag.URL, nil, nil)
	_, otherKey := signup(t, lm.api, "Initech", "it@initech.example")
	lm.api.with(otherKey).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": listing})
	b10 := rpc{t: t, url: ep, key: lm.buyer, version: "1.0"}
	res, _ := b10.call("SendMessage", map[string]any{"message": msg10("long 1", nil)["message"], "configuration": map[string]any{"returnImmediately": true}})
	task2, _ := get(res, "task", "id").(string)
	if _, e := b10.call("CreateTaskPushNotificationConfig", map[string]any{"taskId": task2, "id": "cfg-b", "url": hook.URL + "/broken"}); e != nil {
		t.Fatalf("push config: %v", e)
	}
	ag.Exec.step(task2)
	var failed []any
	waitFor(t, "failed deliveries", 30*time.Second, func() bool {
		r := lm.api.with(lm.buyer).do("GET", "/api/v1/push-deliveries?status=failed&task_id="+task2, nil)
		failed, _ = r.JSON["items"].([]any)
		return len(failed) >= 2
	})
	f := failed[0].(map[string]any)
	if f["attempts"] != float64(3) || f["last_http_status"] != float64(503) || !strings.Contains(fmt.Sprint(f["last_error"]), "503") {
		t.Errorf("failed delivery: %v", f)
	}
	if r := lm.api.with(lm.buyer).do("POST", "/api/v1/push-deliveries/"+f["id"].(string)+"/retry", nil); r.Status != 202 {
		t.Errorf("retry: %d %s", r.Status, r.Body)
	}
	if r := lm.api.with(otherKey).do("POST", "/api/v1/push-deliveries/"+f["id"].(string)+"/retry", nil); r.Status != 404 {
		t.Errorf("another org's retry: %d %s", r.Status, r.Body)
	}
	if len(hook.received("/broken")) != 0 {
		t.Errorf("the broken webhook recorded deliveries")
	}
}
