package demoagent_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/cmd/internal/demoagent"
)

// fixedNow is the clock of tests that compare wire bytes.
func fixedNow() time.Time { return time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC) }

// MustStart serves an agent for cfg on a loopback port until the test ends.
func MustStart(tb testing.TB, cfg demoagent.Config) (*demoagent.Agent, *httptest.Server) {
	tb.Helper()
	cfg.StableIDs = true // the tests name task-1, ctx-1
	a := demoagent.New(cfg)
	srv := httptest.NewServer(a)
	a.SetBaseURL(srv.URL)
	tb.Cleanup(srv.Close)
	return a, srv
}

// client speaks JSON-RPC to one agent in one protocol version.
type client struct {
	tb      testing.TB
	url     string
	version string // sent as A2A-Version unless empty
	header  http.Header
	ids     atomic.Int64
}

func newClient(tb testing.TB, srv *httptest.Server, version string) *client {
	return &client{tb: tb, url: srv.URL, version: version, header: http.Header{}}
}

type rpcResp struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func (c *client) post(body []byte) *http.Response {
	c.tb.Helper()
	req, err := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		c.tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.version != "" {
		req.Header.Set("A2A-Version", c.version)
	}
	for k, vs := range c.header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.tb.Fatal(err)
	}
	return resp
}

func (c *client) request(method string, params any) []byte {
	c.tb.Helper()
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.ids.Add(1), "method": method, "params": params})
	if err != nil {
		c.tb.Fatal(err)
	}
	return b
}

// call makes one non-streaming call and returns the response.
func (c *client) call(method string, params any) rpcResp {
	c.tb.Helper()
	return c.raw(c.request(method, params))
}

func (c *client) raw(body []byte) rpcResp {
	c.tb.Helper()
	resp := c.post(body)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		c.tb.Fatalf("HTTP %d: %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		c.tb.Fatalf("Content-Type = %q, want application/json", ct)
	}
	var r rpcResp
	if err := json.Unmarshal(b, &r); err != nil {
		c.tb.Fatalf("response %s: %v", b, err)
	}
	if r.JSONRPC != "2.0" {
		c.tb.Fatalf("jsonrpc = %q in %s", r.JSONRPC, b)
	}
	return r
}

// ok makes a call that must succeed and decodes its result into v.
func (c *client) ok(method string, params, v any) {
	c.tb.Helper()
	r := c.call(method, params)
	if r.Error != nil {
		c.tb.Fatalf("%s: error %d %s", method, r.Error.Code, r.Error.Message)
	}
	if v != nil {
		if err := json.Unmarshal(r.Result, v); err != nil {
			c.tb.Fatalf("%s: result %s: %v", method, r.Result, err)
		}
	}
}

// code makes a call that must fail and returns its error code.
func (c *client) code(method string, params any) int {
	c.tb.Helper()
	r := c.call(method, params)
	if r.Error == nil {
		c.tb.Fatalf("%s: result %s, want an error", method, r.Result)
	}
	return r.Error.Code
}

// frame is one SSE event: its data line and when it arrived.
type frame struct {
	data json.RawMessage // the JSON-RPC response
	at   time.Time
}

// result returns the frame's JSON-RPC result, failing on an error.
func (f frame) result(tb testing.TB) map[string]any {
	tb.Helper()
	var r struct {
		Result map[string]any `json:"result"`
		Error  any            `json:"error"`
	}
	if err := json.Unmarshal(f.data, &r); err != nil || r.Error != nil || r.Result == nil {
		tb.Fatalf("frame %s: err %v", f.data, err)
	}
	return r.Result
}

// stream makes a streaming call and reads frames until the server closes.
func (c *client) stream(method string, params any) []frame {
	c.tb.Helper()
	resp := c.post(c.request(method, params))
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		c.tb.Fatalf("%s: Content-Type %q, body %s", method, ct, b)
	}
	frames, err := readFrames(resp.Body)
	if err != nil {
		c.tb.Fatal(err)
	}
	return frames
}

// readFrames reads SSE data lines until the server closes the stream.
func readFrames(r io.Reader) ([]frame, error) {
	var frames []frame
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			frames = append(frames, frame{data: json.RawMessage(data), at: time.Now()})
		}
	}
	return frames, sc.Err()
}

var msgSeq atomic.Int64

// message builds a user message in the client's protocol version.
func message(version, text string, taskID string) map[string]any {
	m := map[string]any{"messageId": fmt.Sprintf("m-%d", msgSeq.Add(1))}
	if version == "0.3" {
		m["kind"] = "message"
		m["role"] = "user"
		m["parts"] = []any{map[string]any{"kind": "text", "text": text}}
	} else {
		m["role"] = "ROLE_USER"
		m["parts"] = []any{map[string]any{"text": text}}
	}
	if taskID != "" {
		m["taskId"] = taskID
	}
	return m
}

// method names the operation in the given protocol version.
func method(version, op string) string {
	names := map[string][2]string{
		"send":        {"message/send", "SendMessage"},
		"stream":      {"message/stream", "SendStreamingMessage"},
		"get":         {"tasks/get", "GetTask"},
		"cancel":      {"tasks/cancel", "CancelTask"},
		"resubscribe": {"tasks/resubscribe", "SubscribeToTask"},
	}
	if version == "0.3" {
		return names[op][0]
	}
	return names[op][1]
}

// task is the part of a Task the tests read, in either version.
type task struct {
	Kind      string `json:"kind"`
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	Status    struct {
		State   string `json:"state"`
		Message *struct {
			Role  string `json:"role"`
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"message"`
		Timestamp string `json:"timestamp"`
	} `json:"status"`
	Artifacts []struct {
		ArtifactID string `json:"artifactId"`
		Parts      []struct {
			Kind string `json:"kind"`
			Text string `json:"text"`
		} `json:"parts"`
	} `json:"artifacts"`
	History []struct {
		Role string `json:"role"`
	} `json:"history"`
	Metadata map[string]demoagent.Usage `json:"metadata"`
}

// text joins the parts of the task's artifacts.
func (t task) text() string {
	var b strings.Builder
	for _, a := range t.Artifacts {
		for _, p := range a.Parts {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// send makes a send call and returns the task, unwrapping 1.0's {"task": …}.
func (c *client) send(msg map[string]any, config map[string]any) task {
	c.tb.Helper()
	params := map[string]any{"message": msg}
	if config != nil {
		params["configuration"] = config
	}
	var raw json.RawMessage
	c.ok(method(c.proto(), "send"), params, &raw)
	return decodeTask(c.tb, c.proto(), raw, true)
}

func (c *client) get(id string) task {
	c.tb.Helper()
	var raw json.RawMessage
	c.ok(method(c.proto(), "get"), map[string]any{"id": id}, &raw)
	return decodeTask(c.tb, c.proto(), raw, false)
}

// proto is the protocol the client speaks: "0.3" when it sends no header.
func (c *client) proto() string {
	if c.version == "" {
		return "0.3"
	}
	return "1.0"
}

func decodeTask(tb testing.TB, version string, raw json.RawMessage, wrapped bool) task {
	tb.Helper()
	if version == "1.0" && wrapped {
		var w struct {
			Task *json.RawMessage `json:"task"`
		}
		if err := json.Unmarshal(raw, &w); err != nil || w.Task == nil {
			tb.Fatalf("1.0 send result %s is not {\"task\": …}", raw)
		}
		raw = *w.Task
	}
	var t task
	if err := json.Unmarshal(raw, &t); err != nil {
		tb.Fatalf("task %s: %v", raw, err)
	}
	if version == "0.3" && t.Kind != "task" {
		tb.Fatalf("0.3 task kind = %q in %s", t.Kind, raw)
	}
	if version == "1.0" && bytes.Contains(raw, []byte(`"kind"`)) {
		tb.Fatalf("1.0 task carries a kind: %s", raw)
	}
	return t
}

// state spells a state in the given version.
func state(version string, s demoagent.State) string {
	if version == "0.3" {
		return string(s)
	}
	return "TASK_STATE_" + strings.ToUpper(strings.ReplaceAll(string(s), "-", "_"))
}

// versions runs f once per protocol version, with a client of that version.
func versions(t *testing.T, cfg demoagent.Config, f func(t *testing.T, v string, a *demoagent.Agent, c *client)) {
	for _, v := range []string{"0.3", "1.0"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			cfg := cfg
			cfg.Version = v
			a, srv := MustStart(t, cfg)
			header := ""
			if v == "1.0" {
				header = "1.0"
			}
			f(t, v, a, newClient(t, srv, header))
		})
	}
}

// waitState polls GetTask until the task is in want.
func waitState(t *testing.T, c *client, v, id string, want demoagent.State) task {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := c.get(id)
		if got.Status.State == state(v, want) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %s, want %s", id, got.Status.State, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
