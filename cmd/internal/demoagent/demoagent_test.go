package demoagent_test

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/cmd/internal/demoagent"
	"github.com/agentmarket/agentmarket/listings/agentcard"
)

func TestSend(t *testing.T) {
	versions(t, demoagent.Config{ReportUsage: true}, func(t *testing.T, v string, a *demoagent.Agent, c *client) {
		got := c.send(message(v, "The quick brown fox jumps over the lazy dog", ""), nil)

		if got.Status.State != state(v, demoagent.StateCompleted) {
			t.Fatalf("state = %q, want completed", got.Status.State)
		}
		if want := "Summary of 9 words: The quick brown fox jumps over the lazy dog"; got.text() != want {
			t.Errorf("artifact text = %q, want %q", got.text(), want)
		}
		if len(got.Artifacts) != 1 || len(got.Artifacts[0].Parts) != 3 {
			t.Errorf("artifacts = %+v, want one artifact of three parts (one per chunk)", got.Artifacts)
		}
		if len(got.History) != 1 {
			t.Errorf("history has %d messages, want the user's one", len(got.History))
		}
		if got.ID != "task-1" || got.ContextID != "ctx-1" {
			t.Errorf("ids = %s/%s, want task-1/ctx-1", got.ID, got.ContextID)
		}
		want := demoagent.Usage{InputTokens: 9, OutputTokens: 13, ComputeMs: 91, Model: "demo-summarizer-1"}
		if u := got.Metadata[demoagent.UsageExtensionURI]; u != want {
			t.Errorf("usage = %+v, want %+v", u, want)
		}

		snaps := a.Tasks()
		if len(snaps) != 1 {
			t.Fatalf("Tasks() has %d tasks, want 1", len(snaps))
		}
		s := snaps[0]
		wantStates := []demoagent.State{demoagent.StateSubmitted, demoagent.StateWorking, demoagent.StateCompleted}
		if !slices.Equal(s.States, wantStates) || s.Output != got.text() || s.Usage != want || !s.UsageReported {
			t.Errorf("snapshot = %+v", s)
		}
	})
}

func TestSendKeepsContextID(t *testing.T) {
	versions(t, demoagent.Config{}, func(t *testing.T, v string, a *demoagent.Agent, c *client) {
		m := message(v, "hello there", "")
		m["contextId"] = "conversation-7"
		if got := c.send(m, nil); got.ContextID != "conversation-7" {
			t.Errorf("contextId = %q, want the client's", got.ContextID)
		}
	})
}

func TestStream(t *testing.T) {
	const step = 50 * time.Millisecond
	versions(t, demoagent.Config{ReportUsage: true, StepDelay: step}, func(t *testing.T, v string, a *demoagent.Agent, c *client) {
		frames := c.stream(method(v, "stream"), map[string]any{"message": message(v, "alpha beta gamma delta", "")})

		kinds := make([]string, len(frames))
		for i, f := range frames {
			kinds[i] = kindOf(t, v, f.result(t))
		}
		want := []string{"task", "status-update", "artifact-update", "artifact-update", "artifact-update", "status-update"}
		if !slices.Equal(kinds, want) {
			t.Fatalf("events = %v, want %v", kinds, want)
		}
		// Each event waited one step after the one before it.
		if d := frames[len(frames)-1].at.Sub(frames[0].at); d < 4*step {
			t.Errorf("events arrived within %v, want them spread over at least %v", d, 4*step)
		}

		var text strings.Builder
		var last demoagent.Usage
		for i, f := range frames {
			r := body(t, v, f.result(t))
			st, _ := r["status"].(map[string]any)
			switch i {
			case 0:
				if st["state"] != state(v, demoagent.StateSubmitted) {
					t.Errorf("first task state = %v, want submitted", st["state"])
				}
			case 1:
				if st["state"] != state(v, demoagent.StateWorking) {
					t.Errorf("first status = %v, want working", st["state"])
				}
			case 2, 3, 4:
				if r["append"] != (i > 2) || r["lastChunk"] != (i == 4) {
					t.Errorf("chunk %d: append=%v lastChunk=%v", i-2, r["append"], r["lastChunk"])
				}
				art := r["artifact"].(map[string]any)
				for _, p := range art["parts"].([]any) {
					text.WriteString(p.(map[string]any)["text"].(string))
				}
			case 5:
				if st["state"] != state(v, demoagent.StateCompleted) {
					t.Errorf("last status = %v, want completed", st["state"])
				}
			}
			final, hasFinal := r["final"]
			switch {
			case v == "1.0" && hasFinal:
				t.Errorf("1.0 event %d has final", i)
			case v == "0.3" && kinds[i] == "status-update" && final != (i == 5):
				t.Errorf("0.3 event %d: final = %v", i, final)
			}
			u := usageOf(t, r)
			if u.InputTokens != 4 || u.OutputTokens < last.OutputTokens || u.ComputeMs != 7*u.OutputTokens {
				t.Errorf("event %d usage %+v after %+v: not cumulative", i, u, last)
			}
			last = u
		}
		if want := "Summary of 4 words: alpha beta gamma delta"; text.String() != want {
			t.Errorf("chunks join to %q, want %q", text.String(), want)
		}
		if want := (demoagent.Usage{InputTokens: 4, OutputTokens: 8, ComputeMs: 56, Model: "demo-summarizer-1"}); last != want {
			t.Errorf("final usage = %+v, want %+v", last, want)
		}
		if got := c.get("task-1"); got.Status.State != state(v, demoagent.StateCompleted) || got.text() != text.String() {
			t.Errorf("GetTask after the stream = %+v", got)
		}
	})
}

func TestInputRequired(t *testing.T) {
	versions(t, demoagent.Config{ReportUsage: true}, func(t *testing.T, v string, a *demoagent.Agent, c *client) {
		got := c.send(message(v, "Please clarify the brief", ""), nil)
		if got.Status.State != state(v, demoagent.StateInputRequired) {
			t.Fatalf("state = %q, want input-required", got.Status.State)
		}
		q := got.Status.Message
		if q == nil || q.Role != map[string]string{"0.3": "agent", "1.0": "ROLE_AGENT"}[v] || len(q.Parts) != 1 || q.Parts[0].Text == "" {
			t.Fatalf("status message = %+v, want the agent's question", q)
		}
		if len(got.Artifacts) != 0 {
			t.Errorf("artifacts before the answer: %+v", got.Artifacts)
		}

		// A message on another task id is refused; the same one resumes.
		if code := c.code(method(v, "send"), map[string]any{"message": message(v, "more", "task-99")}); code != -32001 {
			t.Errorf("follow-up to an unknown task: code %d, want -32001", code)
		}
		m := message(v, "Focus on costs", got.ID)
		m["contextId"] = "another-context"
		if code := c.code(method(v, "send"), map[string]any{"message": m}); code != -32602 {
			t.Errorf("follow-up with a foreign contextId: code %d, want -32602", code)
		}
		done := c.send(message(v, "Focus on costs", got.ID), nil)
		if done.ID != got.ID || done.Status.State != state(v, demoagent.StateCompleted) {
			t.Fatalf("after the answer: %s is %s, want %s completed", done.ID, done.Status.State, got.ID)
		}
		if want := "Summary of 7 words: Please clarify the brief Focus on costs"; done.text() != want {
			t.Errorf("artifact = %q, want %q", done.text(), want)
		}
		if len(done.History) != 3 {
			t.Errorf("history has %d messages, want user, agent, user", len(done.History))
		}
		// 7 words in; the 11-word question and the 11-word summary out.
		want := demoagent.Usage{InputTokens: 7, OutputTokens: 22, ComputeMs: 154, Model: "demo-summarizer-1"}
		if u := done.Metadata[demoagent.UsageExtensionURI]; u != want {
			t.Errorf("usage = %+v, want %+v", u, want)
		}
		if code := c.code(method(v, "send"), map[string]any{"message": message(v, "again", got.ID)}); code != -32004 {
			t.Errorf("message to a completed task: code %d, want -32004", code)
		}
		s, _ := a.Task(got.ID)
		wantStates := []demoagent.State{"submitted", "working", "input-required", "working", "completed"}
		if !slices.Equal(s.States, wantStates) || !slices.Equal(s.Input, []string{"Please clarify the brief", "Focus on costs"}) {
			t.Errorf("snapshot = %+v", s)
		}
	})
}

func TestInputRequiredStream(t *testing.T) {
	versions(t, demoagent.Config{StepDelay: 5 * time.Millisecond}, func(t *testing.T, v string, a *demoagent.Agent, c *client) {
		frames := c.stream(method(v, "stream"), map[string]any{"message": message(v, "clarify: what next?", "")})
		if len(frames) != 3 {
			t.Fatalf("got %d events, want task, working, input-required", len(frames))
		}
		r := body(t, v, frames[2].result(t))
		if st := r["status"].(map[string]any); st["state"] != state(v, demoagent.StateInputRequired) || st["message"] == nil {
			t.Errorf("last event = %v, want input-required with a question", r)
		}
		if v == "0.3" && r["final"] != true {
			t.Errorf("0.3 input-required event has final = %v, want true", r["final"])
		}

		frames = c.stream(method(v, "stream"), map[string]any{"message": message(v, "the budget", "task-1")})
		var kinds []string
		for _, f := range frames {
			kinds = append(kinds, kindOf(t, v, f.result(t)))
		}
		if want := []string{"task", "status-update", "artifact-update", "artifact-update", "artifact-update", "status-update"}; !slices.Equal(kinds, want) {
			t.Errorf("resumed stream = %v, want %v", kinds, want)
		}
		if id := body(t, v, frames[0].result(t))["id"]; id != "task-1" {
			t.Errorf("resumed stream is for task %v", id)
		}
	})
}

func TestCancelSlowTask(t *testing.T) {
	cfg := demoagent.Config{StepDelay: 10 * time.Millisecond, SlowDelay: 10 * time.Second}
	versions(t, cfg, func(t *testing.T, v string, a *demoagent.Agent, c *client) {
		nonBlocking := map[string]map[string]any{"0.3": {"blocking": false}, "1.0": {"returnImmediately": true}}[v]
		start := time.Now()
		got := c.send(message(v, "a slow job", ""), nonBlocking)
		if got.Status.State != state(v, demoagent.StateWorking) {
			t.Fatalf("non-blocking send: state %q, want working", got.Status.State)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("non-blocking send took %v", d)
		}

		var canceled json.RawMessage
		c.ok(method(v, "cancel"), map[string]any{"id": got.ID}, &canceled)
		if ct := decodeTask(t, v, canceled, false); ct.Status.State != state(v, demoagent.StateCanceled) {
			t.Errorf("cancel returned state %q", ct.Status.State)
		}
		if code := c.code(method(v, "cancel"), map[string]any{"id": got.ID}); code != -32002 {
			t.Errorf("second cancel: code %d, want -32002 TaskNotCancelable", code)
		}
		if code := c.code(method(v, "cancel"), map[string]any{"id": "task-404"}); code != -32001 {
			t.Errorf("cancel of an unknown task: code %d, want -32001", code)
		}

		time.Sleep(5 * cfg.StepDelay) // the run must not go on after the cancel
		s, _ := a.Task(got.ID)
		if !slices.Equal(s.States, []demoagent.State{"submitted", "working", "canceled"}) || s.Output != "" {
			t.Errorf("snapshot after cancel = %+v", s)
		}
		if g := c.get(got.ID); g.Status.State != state(v, demoagent.StateCanceled) || len(g.Artifacts) != 0 {
			t.Errorf("GetTask after cancel = %+v", g)
		}
	})
}

func TestCancelEndsStream(t *testing.T) {
	versions(t, demoagent.Config{SlowDelay: 10 * time.Second}, func(t *testing.T, v string, a *demoagent.Agent, c *client) {
		stream := make(chan []frame, 1)
		resp := c.post(c.request(method(v, "stream"), map[string]any{"message": message(v, "slow please", "")}))
		go func() {
			defer resp.Body.Close()
			frames, _ := readFrames(resp.Body)
			stream <- frames
		}()
		waitState(t, c, v, "task-1", demoagent.StateWorking)
		c.ok(method(v, "cancel"), map[string]any{"id": "task-1"}, nil)

		frames := <-stream
		r := body(t, v, frames[len(frames)-1].result(t))
		if st := r["status"].(map[string]any); st["state"] != state(v, demoagent.StateCanceled) {
			t.Errorf("stream ended with %v, want canceled", r)
		}
		if v == "0.3" && r["final"] != true {
			t.Errorf("0.3 canceled event: final = %v", r["final"])
		}
	})
}

func TestGetTask(t *testing.T) {
	versions(t, demoagent.Config{}, func(t *testing.T, v string, a *demoagent.Agent, c *client) {
		if code := c.code(method(v, "get"), map[string]any{"id": "task-404"}); code != -32001 {
			t.Errorf("unknown task: code %d, want -32001", code)
		}
		sent := c.send(message(v, "clarify please", ""), nil)
		c.send(message(v, "the short version", sent.ID), nil)

		got := c.get(sent.ID)
		if got.ID != sent.ID || got.Status.State != state(v, demoagent.StateCompleted) || len(got.Artifacts) != 1 || len(got.History) != 3 {
			t.Errorf("GetTask = %+v", got)
		}
		if got.Metadata != nil {
			t.Errorf("an agent that does not report usage sent metadata %v", got.Metadata)
		}
		var raw json.RawMessage
		c.ok(method(v, "get"), map[string]any{"id": sent.ID, "historyLength": 1}, &raw)
		if h := decodeTask(t, v, raw, false).History; len(h) != 1 || h[0].Role != map[string]string{"0.3": "user", "1.0": "ROLE_USER"}[v] {
			t.Errorf("historyLength 1: history %+v, want the last message", h)
		}
		c.ok(method(v, "get"), map[string]any{"id": sent.ID, "historyLength": 0}, &raw)
		if strings.Contains(string(raw), `"history"`) {
			t.Errorf("historyLength 0 still has history: %s", raw)
		}
	})
}

func TestResubscribe(t *testing.T) {
	cfg := demoagent.Config{ReportUsage: true, StepDelay: 10 * time.Millisecond, SlowDelay: time.Second}
	versions(t, cfg, func(t *testing.T, v string, a *demoagent.Agent, c *client) {
		if code := c.code(method(v, "resubscribe"), map[string]any{"id": "task-404"}); code != -32001 {
			t.Errorf("unknown task: code %d, want -32001", code)
		}
		nonBlocking := map[string]map[string]any{"0.3": {"blocking": false}, "1.0": {"returnImmediately": true}}[v]
		sent := c.send(message(v, "slow summary of five words", ""), nonBlocking)

		frames := c.stream(method(v, "resubscribe"), map[string]any{"id": sent.ID})
		var kinds []string
		for _, f := range frames {
			kinds = append(kinds, kindOf(t, v, f.result(t)))
		}
		if want := []string{"task", "artifact-update", "artifact-update", "artifact-update", "status-update"}; !slices.Equal(kinds, want) {
			t.Fatalf("resubscribed events = %v, want %v", kinds, want)
		}
		first := body(t, v, frames[0].result(t))
		if st := first["status"].(map[string]any); first["id"] != sent.ID || st["state"] != state(v, demoagent.StateWorking) {
			t.Errorf("first event = %v, want the working task", first)
		}
		if u := usageOf(t, body(t, v, frames[4].result(t))); u.OutputTokens != 9 {
			t.Errorf("final usage = %+v", u)
		}

		// Once the task is terminal: 1.0 refuses, 0.3 replays the end.
		if v == "1.0" {
			if code := c.code(method(v, "resubscribe"), map[string]any{"id": sent.ID}); code != -32004 {
				t.Errorf("terminal task: code %d, want -32004 UnsupportedOperation", code)
			}
			return
		}
		frames = c.stream(method(v, "resubscribe"), map[string]any{"id": sent.ID})
		if len(frames) != 2 || kindOf(t, v, frames[0].result(t)) != "task" {
			t.Fatalf("terminal 0.3 resubscribe = %d frames, want the task and its final status", len(frames))
		}
		if r := frames[1].result(t); r["final"] != true || r["status"].(map[string]any)["state"] != "completed" {
			t.Errorf("terminal 0.3 resubscribe ends with %v", r)
		}
	})
}

func TestResubscribeToInterruptedTask(t *testing.T) {
	versions(t, demoagent.Config{}, func(t *testing.T, v string, a *demoagent.Agent, c *client) {
		sent := c.send(message(v, "clarify", ""), nil)
		frames := c.stream(method(v, "resubscribe"), map[string]any{"id": sent.ID})
		want := map[string]int{"0.3": 2, "1.0": 1}[v] // 0.3 adds the final status
		if len(frames) != want {
			t.Fatalf("got %d frames, want %d", len(frames), want)
		}
		if st := body(t, v, frames[0].result(t))["status"].(map[string]any); st["state"] != state(v, demoagent.StateInputRequired) {
			t.Errorf("task state = %v", st["state"])
		}
	})
}

func TestUsageIsDeterministic(t *testing.T) {
	run := func() []string {
		_, srv := MustStart(t, demoagent.Config{Version: "0.3", ReportUsage: true, Now: fixedNow})
		frames := newClient(t, srv, "").stream("message/stream", map[string]any{"message": map[string]any{
			"kind": "message", "messageId": "m-1", "role": "user",
			"parts": []any{map[string]any{"kind": "text", "text": "one two three four five six"}},
		}})
		var out []string
		for _, f := range frames {
			out = append(out, string(f.data))
		}
		return out
	}
	first, second := run(), run()
	if !slices.Equal(first, second) {
		t.Errorf("two runs differ:\n%s\n%s", strings.Join(first, "\n"), strings.Join(second, "\n"))
	}
}

func TestRequireActivation(t *testing.T) {
	for _, v := range []string{"0.3", "1.0"} {
		t.Run(v, func(t *testing.T) {
			a, srv := MustStart(t, demoagent.Config{Version: v, ReportUsage: true, RequireActivation: true})
			c := newClient(t, srv, map[string]string{"0.3": "", "1.0": "1.0"}[v])
			if got := c.send(message(v, "not activated", ""), nil); got.Metadata != nil {
				t.Errorf("usage reported without activation: %v", got.Metadata)
			}
			header := map[string]string{"0.3": "X-A2A-Extensions", "1.0": "A2A-Extensions"}[v]
			c.header.Set(header, "https://example.com/other/v1, "+demoagent.UsageExtensionURI)
			resp := c.post(c.request(method(v, "send"), map[string]any{"message": message(v, "now activated", "")}))
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if got := resp.Header.Get(header); got != demoagent.UsageExtensionURI {
				t.Errorf("response %s = %q, want the activated URI", header, got)
			}
			if !strings.Contains(string(b), demoagent.UsageExtensionURI) {
				t.Errorf("activated task reports no usage: %s", b)
			}
			snaps := a.Tasks()
			if snaps[0].Activated || snaps[0].UsageReported || !snaps[1].Activated || !snaps[1].UsageReported {
				t.Errorf("snapshots = %+v", snaps)
			}
			if got := a.LastHeaders().Get(header); !strings.Contains(got, demoagent.UsageExtensionURI) {
				t.Errorf("LastHeaders %s = %q", header, got)
			}
		})
	}
}

func TestRequireAuth(t *testing.T) {
	a, srv := MustStart(t, demoagent.Config{Version: "1.0", RequireAuth: "seller-secret"})
	c := newClient(t, srv, "1.0")
	for _, auth := range []string{"", "Bearer wrong", "Basic seller-secret"} {
		c.header.Set("Authorization", auth)
		resp := c.post(c.request("GetTask", map[string]any{"id": "task-1"}))
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: HTTP %d, want 401 with a challenge", auth, resp.StatusCode)
		}
		if got := a.LastHeaders().Get("Authorization"); got != auth {
			t.Errorf("LastHeaders Authorization = %q, want %q", got, auth)
		}
	}
	c.header.Set("Authorization", "Bearer seller-secret")
	c.header.Set("X-Forwarded-For", "meter")
	if got := c.send(message("1.0", "hello", ""), nil); got.Status.State != "TASK_STATE_COMPLETED" {
		t.Errorf("authorized send: %+v", got)
	}
	if s := a.Tasks()[0]; s.Headers.Get("Authorization") != "Bearer seller-secret" || s.Headers.Get("X-Forwarded-For") != "meter" {
		t.Errorf("task headers = %v", s.Headers)
	}

	// The card stays public and declares the scheme.
	resp, err := http.Get(srv.URL + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var card map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&card); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("card: HTTP %d, %v", resp.StatusCode, err)
	}
	if card["securitySchemes"] == nil || card["securityRequirements"] == nil {
		t.Errorf("card declares no security: %v", card)
	}
}

func TestVersionRules(t *testing.T) {
	_, srv10 := MustStart(t, demoagent.Config{Version: "1.0"})
	_, srv03 := MustStart(t, demoagent.Config{Version: "0.3"})
	get := map[string]any{"id": "task-1"}
	cases := []struct {
		name   string
		srv    string
		header string
		method string
		want   int
	}{
		{"1.0 agent, no header (0.3)", srv10.URL, "", "GetTask", -32009},
		{"1.0 agent, 0.3 header", srv10.URL, "0.3", "tasks/get", -32009},
		{"1.0 agent, patch number ignored", srv10.URL, "1.0.1", "GetTask", -32001},
		{"1.0 agent, 0.3 method", srv10.URL, "1.0", "tasks/get", -32600},
		{"1.0 agent, unknown method", srv10.URL, "1.0", "GetTasks", -32601},
		{"1.0 agent, push", srv10.URL, "1.0", "CreateTaskPushNotificationConfig", -32003},
		{"1.0 agent, extended card", srv10.URL, "1.0", "GetExtendedAgentCard", -32004},
		{"0.3 agent, no header", srv03.URL, "", "tasks/get", -32001},
		{"0.3 agent, 0.3.0 header", srv03.URL, "0.3.0", "tasks/get", -32001},
		{"0.3 agent, 1.0 header", srv03.URL, "1.0", "GetTask", -32009},
		{"0.3 agent, 1.0 method", srv03.URL, "", "GetTask", -32600},
		{"0.3 agent, no ListTasks", srv03.URL, "", "tasks/list", -32601},
		{"0.3 agent, push", srv03.URL, "", "tasks/pushNotificationConfig/set", -32003},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &client{tb: t, url: tc.srv, version: tc.header, header: http.Header{}}
			if got := c.code(tc.method, get); got != tc.want {
				t.Errorf("code %d, want %d", got, tc.want)
			}
		})
	}

	t.Run("query parameter", func(t *testing.T) {
		c := &client{tb: t, url: srv10.URL + "/?A2A-Version=1.0", header: http.Header{}}
		if got := c.code("GetTask", get); got != -32001 {
			t.Errorf("code %d, want -32001", got)
		}
	})
	t.Run("1.0 errors carry ErrorInfo", func(t *testing.T) {
		c := &client{tb: t, url: srv10.URL, version: "1.0", header: http.Header{}}
		r := c.call("GetTask", get)
		var data []map[string]any
		if err := json.Unmarshal(r.Error.Data, &data); err != nil || len(data) != 1 || data[0]["reason"] != "TASK_NOT_FOUND" || data[0]["@type"] != "type.googleapis.com/google.rpc.ErrorInfo" {
			t.Errorf("error data = %s", r.Error.Data)
		}
	})
}

func TestMalformedRequests(t *testing.T) {
	_, srv := MustStart(t, demoagent.Config{Version: "1.0"})
	c := newClient(t, srv, "1.0")
	cases := []struct {
		body string
		want int
	}{
		{`{"jsonrpc":"2.0","id":1,"method":`, -32700},
		{`not json`, -32700},
		{`[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]`, -32600},
		{`{"jsonrpc":"1.0","id":1,"method":"GetTask","params":{"id":"x"}}`, -32600},
		{`{"jsonrpc":"2.0","id":{},"method":"GetTask"}`, -32600},
		{`{"jsonrpc":"2.0","id":1,"method":"GetTask"}`, -32602},
		{`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":7}}`, -32602},
		{`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"user","parts":[{"text":"hi"}]}}}`, -32602},
		{`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[]}}}`, -32602},
		{`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","parts":[{"text":"hi"}]}}}`, -32602},
		{`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"url":"https://x/y.pdf"}]}}}`, -32005},
		{`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":0}}`, -32602},
	}
	for _, tc := range cases {
		r := c.raw([]byte(tc.body))
		if r.Error == nil || r.Error.Code != tc.want {
			t.Errorf("%s: got %+v, want code %d", tc.body, r.Error, tc.want)
		}
	}
	r := c.raw([]byte(`{"jsonrpc":"2.0","id":"abc","method":"Nope"}`))
	if string(r.ID) != `"abc"` {
		t.Errorf("error id = %s, want the request's", r.ID)
	}
}

func TestListTasks(t *testing.T) {
	// Each reading of the clock is a second later, so every status change
	// has its own time.
	var mu sync.Mutex
	now := fixedNow()
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	}
	_, srv := MustStart(t, demoagent.Config{Version: "1.0", Now: clock})
	c := newClient(t, srv, "1.0")
	c.send(message("1.0", "first task", ""), nil)
	c.send(message("1.0", "clarify second", ""), nil)
	m := message("1.0", "third", "")
	m["contextId"] = "ctx-1"
	c.send(m, nil)

	type listed struct {
		Tasks []struct {
			ID        string            `json:"id"`
			Status    map[string]any    `json:"status"`
			Artifacts []json.RawMessage `json:"artifacts"`
		} `json:"tasks"`
		NextPageToken *string `json:"nextPageToken"`
		PageSize      int     `json:"pageSize"`
		TotalSize     int     `json:"totalSize"`
	}
	ids := func(l listed) []string {
		var out []string
		for _, t := range l.Tasks {
			out = append(out, t.ID)
		}
		return out
	}

	var all listed
	c.ok("ListTasks", map[string]any{}, &all)
	if got := ids(all); !slices.Equal(got, []string{"task-3", "task-2", "task-1"}) || all.TotalSize != 3 || all.PageSize != 50 || all.NextPageToken == nil || *all.NextPageToken != "" {
		t.Errorf("ListTasks = %+v", all)
	}
	if all.Tasks[0].Artifacts != nil {
		t.Errorf("artifacts listed without includeArtifacts")
	}

	var page listed
	c.ok("ListTasks", map[string]any{"pageSize": 2, "includeArtifacts": true}, &page)
	if got := ids(page); !slices.Equal(got, []string{"task-3", "task-2"}) || *page.NextPageToken == "" || page.Tasks[0].Artifacts == nil {
		t.Errorf("first page = %+v", page)
	}
	c.ok("ListTasks", map[string]any{"pageSize": 2, "pageToken": *page.NextPageToken}, &page)
	if got := ids(page); !slices.Equal(got, []string{"task-1"}) || *page.NextPageToken != "" {
		t.Errorf("second page = %+v", page)
	}

	var filtered listed
	c.ok("ListTasks", map[string]any{"contextId": "ctx-1"}, &filtered)
	if got := ids(filtered); !slices.Equal(got, []string{"task-3", "task-1"}) {
		t.Errorf("by context = %v", got)
	}
	c.ok("ListTasks", map[string]any{"status": "TASK_STATE_INPUT_REQUIRED"}, &filtered)
	if got := ids(filtered); !slices.Equal(got, []string{"task-2"}) {
		t.Errorf("by status = %v", got)
	}
}

func TestBehaviors(t *testing.T) {
	cases := []struct {
		behavior demoagent.Behavior
		in, want string
	}{
		{demoagent.Summarize, "one two three four five six seven eight nine ten eleven twelve thirteen",
			"Summary of 13 words: one two three four five six seven eight nine ten eleven twelve…"},
		{demoagent.Translate, "Good morning, world", "Demo translation: GOOD MORNING, WORLD"},
		{demoagent.ExtractInvoice, "Invoice 17: consulting 1200.00, travel $310.5, VAT 302.10. Due in 30 days",
			"Invoice extraction: 3 amounts, total 1812.60, largest 1200.00."},
	}
	for _, tc := range cases {
		t.Run(string(tc.behavior), func(t *testing.T) {
			_, srv := MustStart(t, demoagent.Config{Version: "1.0", Behavior: tc.behavior})
			if got := newClient(t, srv, "1.0").send(message("1.0", tc.in, ""), nil).text(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestInvoiceAmounts: the extractor counts what is written as money
// (cents or a currency sign), not the invoice number, quantities or days.
func TestInvoiceAmounts(t *testing.T) {
	_, srv := MustStart(t, demoagent.Config{Version: "1.0", Behavior: demoagent.ExtractInvoice})
	c := newClient(t, srv, "1.0")
	for _, tc := range []struct{ in, want string }{
		{"Invoice 9: hosting 800.00, support 150.00", "2 amounts, total 950.00, largest 800.00."},
		{"Invoice 17: consulting 1200.00, travel 310.50, VAT 302.10", "3 amounts, total 1812.60, largest 1200.00."},
		{"Invoice #2031 for 3 licences: $99, due in 30 days", "1 amount, total 99.00, largest 99.00."},
		{"Invoice 12 of 2026-05-01: servers 1,250.00 and €40.5.", "2 amounts, total 1290.50, largest 1250.00."},
		{"Invoice 5, order 778, 12 items", "0 amounts, total 0.00, largest 0.00."},
		{"bad groups 1,25.00 12,3456.00 1.234 $ .50", "0 amounts, total 0.00, largest 0.00."},
	} {
		if got := c.send(message("1.0", tc.in, ""), nil).text(); got != "Invoice extraction: "+tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, "Invoice extraction: "+tc.want)
		}
	}
}

func TestNoStreaming(t *testing.T) {
	versions(t, demoagent.Config{NoStreaming: true}, func(t *testing.T, v string, a *demoagent.Agent, c *client) {
		if code := c.code(method(v, "stream"), map[string]any{"message": message(v, "hi", "")}); code != -32004 {
			t.Errorf("stream: code %d, want -32004", code)
		}
	})
}

func TestCards(t *testing.T) {
	for _, cfg := range demoagent.Presets() {
		t.Run(cfg.Name, func(t *testing.T) {
			cfg.RequireAuth = "token"
			_, srv := MustStart(t, cfg)
			for _, path := range []string{"/.well-known/agent-card.json", "/.well-known/agent.json"} {
				resp, err := http.Get(srv.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
					t.Fatalf("GET %s: HTTP %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
				}
				checkCard(t, cfg, srv.URL, raw)
			}
		})
	}
}

// checkCard checks the members each version requires, then has the
// marketplace's own parser read the card.
func checkCard(t *testing.T, cfg demoagent.Config, url string, raw []byte) {
	t.Helper()
	var card map[string]any
	if err := json.Unmarshal(raw, &card); err != nil {
		t.Fatalf("card is not JSON: %v", err)
	}
	required := []string{"name", "description", "version", "capabilities", "defaultInputModes", "defaultOutputModes", "skills"}
	if cfg.Version == "0.3" {
		required = append(required, "url", "protocolVersion", "preferredTransport")
	} else {
		required = append(required, "supportedInterfaces")
	}
	for _, k := range required {
		if _, ok := card[k]; !ok {
			t.Errorf("card lacks %q", k)
		}
	}
	if cfg.Version == "0.3" {
		if card["protocolVersion"] != "0.3.0" || card["url"] != url || card["preferredTransport"] != "JSONRPC" {
			t.Errorf("0.3 endpoint = %v %v %v", card["protocolVersion"], card["url"], card["preferredTransport"])
		}
		if _, ok := card["supportedInterfaces"]; ok {
			t.Errorf("0.3 card has supportedInterfaces")
		}
	} else {
		want := []any{map[string]any{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}}
		if !reflect.DeepEqual(card["supportedInterfaces"], want) {
			t.Errorf("supportedInterfaces = %v, want %v", card["supportedInterfaces"], want)
		}
		for _, k := range []string{"url", "protocolVersion", "preferredTransport"} {
			if _, ok := card[k]; ok {
				t.Errorf("1.0 card has the 0.3 member %q", k)
			}
		}
	}
	skills := card["skills"].([]any)
	if len(skills) != 1 {
		t.Fatalf("skills = %v", skills)
	}
	for _, k := range []string{"id", "name", "description", "tags"} {
		if _, ok := skills[0].(map[string]any)[k]; !ok {
			t.Errorf("skill lacks %q", k)
		}
	}

	parsed, err := agentcard.Parse(raw)
	if err != nil {
		t.Fatalf("the marketplace rejects the card: %v", err)
	}
	if !parsed.Capabilities.Streaming || parsed.Capabilities.PushNotifications {
		t.Errorf("capabilities = %+v", parsed.Capabilities)
	}
	if got := parsed.HasExtension(demoagent.UsageExtensionURI); got != cfg.ReportUsage {
		t.Errorf("usage extension declared = %v, want %v", got, cfg.ReportUsage)
	}
	for _, e := range parsed.Capabilities.Extensions {
		if e.Required || e.Description == "" {
			t.Errorf("extension %+v: want required false and a description", e)
		}
	}
	if in, ok := parsed.PreferredInterface("JSONRPC"); !ok || in.URL != url || in.ProtocolVersion != cfg.Version {
		t.Errorf("preferred interface = %+v", in)
	}
	if parsed.SkillIDs()[0] != cfg.SkillID || len(parsed.Tags()) == 0 {
		t.Errorf("skills = %+v", parsed.Skills)
	}
	if parsed.SecuritySchemes["bearer"] == nil {
		t.Errorf("security schemes = %v", parsed.SecuritySchemes)
	}
}

func TestPresets(t *testing.T) {
	ps := demoagent.Presets()
	var got []string
	for _, p := range ps {
		if err := p.Validate(); err != nil {
			t.Error(err)
		}
		got = append(got, p.Name+"/"+p.Version+"/"+map[bool]string{true: "usage", false: "-"}[p.ReportUsage])
	}
	want := []string{"Summarizer/0.3/usage", "Translator/1.0/-", "Invoice extractor/1.0/usage"}
	if !slices.Equal(got, want) {
		t.Errorf("presets = %v, want %v", got, want)
	}
	if err := (demoagent.Config{Version: "2.0"}).Validate(); err == nil {
		t.Error("version 2.0 validated")
	}
}

// kindOf names a stream result: the 0.3 kind, or the 1.0 member.
func kindOf(t *testing.T, v string, r map[string]any) string {
	t.Helper()
	if v == "0.3" {
		k, _ := r["kind"].(string)
		return k
	}
	if len(r) != 1 {
		t.Fatalf("1.0 stream result %v must have exactly one member", r)
	}
	for k := range r {
		return map[string]string{"task": "task", "statusUpdate": "status-update", "artifactUpdate": "artifact-update", "message": "message"}[k]
	}
	return ""
}

// body unwraps a 1.0 stream result to the object inside.
func body(t *testing.T, v string, r map[string]any) map[string]any {
	t.Helper()
	if v == "0.3" {
		return r
	}
	for _, inner := range r {
		return inner.(map[string]any)
	}
	return nil
}

func usageOf(t *testing.T, r map[string]any) demoagent.Usage {
	t.Helper()
	md, _ := r["metadata"].(map[string]any)
	b, _ := json.Marshal(md[demoagent.UsageExtensionURI])
	var u demoagent.Usage
	if err := json.Unmarshal(b, &u); err != nil || u.Model == "" {
		t.Fatalf("no usage in %v", r)
	}
	return u
}
