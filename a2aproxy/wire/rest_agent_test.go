package wire_test

import (
	"bytes"
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

func TestFromRESTResponseSuccess(t *testing.T) {
	tests := []struct {
		name   string
		v      wire.Version
		m      wire.Method
		status int
		body   string
		want   string
	}{
		{"1.0 delete 204", wire.V10, wire.MethodPushDelete, 204, "", `{}`},
		{"0.3 delete 204 (a2a-js)", wire.V03, wire.MethodPushDelete, 204, "", `null`},
		{"0.3 delete {}", wire.V03, wire.MethodPushDelete, 200, `{}`, `null`},
		{"0.3 send 201 (a2a-js)", wire.V03, wire.MethodSend, 201, `{"message":{"messageId":"m","role":"ROLE_AGENT","content":[{"text":"hi"}]}}`,
			`{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"text","text":"hi"}]}`},
		{"0.3 proto name msg", wire.V03, wire.MethodSend, 200, `{"msg":{"messageId":"m","role":"ROLE_AGENT","content":[]}}`,
			`{"kind":"message","messageId":"m","role":"agent","parts":[]}`},
		{"0.3 cancel 202 (a2a-js)", wire.V03, wire.MethodCancelTask, 202, `{"id":"t","contextId":"c","status":{"state":"TASK_STATE_CANCELLED"}}`,
			`{"kind":"task","id":"t","contextId":"c","status":{"state":"canceled"}}`},
		{"0.3 status numbers", wire.V03, wire.MethodGetTask, 200, `{"id":"t","contextId":"c","status":{"state":6,"message":{"role":2,"content":[]}}}`,
			`{"kind":"task","id":"t","contextId":"c","status":{"state":"input-required","message":{"kind":"message","role":"agent","parts":[]}}}`},
		{"0.3 push config without id in it", wire.V03, wire.MethodPushGet, 200, `{"name":"tasks/t-1/pushNotificationConfigs/c-1","pushNotificationConfig":{"url":"https://x"}}`,
			`{"taskId":"t-1","pushNotificationConfig":{"url":"https://x","id":"c-1"}}`},
		{"0.3 push list as a bare array", wire.V03, wire.MethodPushList, 200, `[{"name":"tasks/t-1/pushNotificationConfigs/c-1","pushNotificationConfig":{"id":"c-1","url":"https://x"}}]`,
			`[{"taskId":"t-1","pushNotificationConfig":{"id":"c-1","url":"https://x"}}]`},
		{"0.3 push list without configs", wire.V03, wire.MethodPushList, 200, `{}`, `[]`},
		{"0.3 JSON-RPC shaped task kept", wire.V03, wire.MethodGetTask, 200, `{"kind":"task","id":"t","contextId":"c","status":{"state":"working"}}`,
			`{"kind":"task","id":"t","contextId":"c","status":{"state":"working"}}`},
		{"0.3 stream answered with one JSON object", wire.V03, wire.MethodStream, 200, `{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_FAILED"},"final":true}}`,
			`{"kind":"status-update","taskId":"t","contextId":"c","status":{"state":"failed"},"final":true}`},
		{"1.0 as is", wire.V10, wire.MethodSend, 200, "{\n \"task\": {\"id\": \"t\"}\n}", `{"task":{"id":"t"}}`},
		{"JSON-RPC envelope from a confused agent", wire.V10, wire.MethodGetTask, 200, `{"jsonrpc":"2.0","id":1,"result":{"id":"t"}}`, `{"id":"t"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, e := wire.FromRESTResponse(tc.v, tc.m, tc.status, wire.RESTContentType(tc.v), []byte(tc.body))
			if e != nil {
				t.Fatalf("error %v", e)
			}
			equalJSON(t, res, []byte(tc.want))
			if bytes.ContainsAny(res, "\r\n") {
				t.Errorf("result is not one line: %s", res)
			}
		})
	}
}

func TestFromRESTEventCases(t *testing.T) {
	tests := []struct {
		name string
		v    wire.Version
		data string
		want string // "" when an error is wanted
		code int
	}{
		{"1.0 status update", wire.V10, `{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`,
			`{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`, 0},
		{"0.3 final defaults to false", wire.V03, `{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`,
			`{"kind":"status-update","taskId":"t","contextId":"c","status":{"state":"working"},"final":false}`, 0},
		{"0.3 artifact", wire.V03, `{"artifactUpdate":{"taskId":"t","contextId":"c","artifact":{"artifactId":"a","parts":[{"file":{"fileWithBytes":"aGk=","mimeType":"text/plain"}}]},"lastChunk":true}}`,
			`{"kind":"artifact-update","taskId":"t","contextId":"c","artifact":{"artifactId":"a","parts":[{"kind":"file","file":{"bytes":"aGk=","mimeType":"text/plain"}}]},"lastChunk":true}`, 0},
		{"1.0 error event", wire.V10, `{"error":{"code":500,"status":"INTERNAL","message":"boom","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"INTERNAL_ERROR","domain":"a2a-protocol.org"}]}}`, "", -32603},
		{"0.3 a2a-js error event", wire.V03, `{"code":-32001,"message":"Task not found"}`, "", -32001},
		{"not JSON", wire.V10, `{`, "", -32006},
		{"empty", wire.V03, ``, "", -32006},
		{"not an object", wire.V10, `"x"`, "", -32006},
		{"0.3 of no known shape", wire.V03, `{"x":1}`, "", -32006},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, e := wire.FromRESTEvent(tc.v, wire.MethodStream, []byte(tc.data))
			if tc.want == "" {
				if e == nil || e.Code != tc.code {
					t.Fatalf("got %s, %v; want code %d", res, e, tc.code)
				}
				return
			}
			if e != nil {
				t.Fatal(e)
			}
			equalJSON(t, res, []byte(tc.want))
		})
	}
}

// ---- agent side: RESTUpstream, and the agent parsing what it gets ----

type restUpstreamCase struct {
	Method string          `json:"method"`
	URL    string          `json:"url"`
	Body   json.RawMessage `json:"body,omitempty"`
	Error  int             `json:"error,omitempty"`
}

const restAgentBase = "https://agent.example.com/a2a/"

func TestRESTUpstreamGolden(t *testing.T) {
	want := map[string]restUpstreamCase{}
	readRESTGolden(t, "upstream.json", &want)
	got := map[string]restUpstreamCase{}
	for _, name := range requestPairs {
		for _, from := range []wire.Version{wire.V03, wire.V10} {
			for _, to := range []wire.Version{wire.V03, wire.V10} {
				for _, tenant := range []string{"", "t 9"} {
					if tenant != "" && (to == wire.V03 || from != to) {
						continue
					}
					key := name + "/" + string(from) + "to" + string(to)
					if tenant != "" {
						key += "/tenant"
					}
					t.Run(key, func(t *testing.T) {
						r, werr := wire.ParseRequest(golden(t, name, from), string(from))
						if werr != nil {
							t.Fatal(werr)
						}
						method, u, body, err := wire.RESTUpstream(r, to, restAgentBase, tenant)
						if err != nil {
							t.Fatalf("RESTUpstream: %v", err)
						}
						got[key] = restUpstreamCase{Method: method, URL: u, Body: raw(body)}
						if !*updateREST {
							w := want[key]
							if method != w.Method || u != w.URL {
								t.Errorf("%s %s, want %s %s", method, u, w.Method, w.URL)
							}
							if w.Body != nil || body != nil {
								equalJSON(t, body, w.Body)
							}
						}
						if (method == "GET" || method == "DELETE") != (body == nil) {
							t.Errorf("%s with body %s", method, body)
						}
						agentParses(t, r, to, tenant, method, u, body)
					})
				}
			}
		}
	}
	// The request's own tenant is the buyer's: the agent gets its own.
	r, _ := wire.ParseRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"tenant":"buyer-side","message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}}`), "1.0")
	for _, tenant := range []string{"", "agent-side"} {
		key := "send_with_tenant/1.0to1.0/" + tenant
		method, u, body, err := wire.RESTUpstream(r, wire.V10, restAgentBase, tenant)
		if err != nil {
			t.Fatal(err)
		}
		got[key] = restUpstreamCase{Method: method, URL: u, Body: raw(body)}
		if bytes.Contains(body, []byte("buyer-side")) {
			t.Errorf("the buyer's tenant went to the agent: %s", body)
		}
		agentParses(t, r, wire.V10, tenant, method, u, body)
	}
	// ListTasks, with its query.
	r, _ = wire.ParseRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"contextId":"c 1","status":"TASK_STATE_WORKING","pageSize":10,"includeArtifacts":true,"historyLength":0}}`), "1.0")
	method, u, body, err := wire.RESTUpstream(r, wire.V10, restAgentBase, "")
	if err != nil {
		t.Fatal(err)
	}
	got["list_tasks/1.0to1.0"] = restUpstreamCase{Method: method, URL: u, Body: raw(body)}
	agentParses(t, r, wire.V10, "", method, u, body)
	if _, _, _, err := wire.RESTUpstream(r, wire.V03, restAgentBase, ""); err == nil {
		t.Error("ListTasks to a 0.3 agent: no error")
	} else if we, ok := err.(*wire.Error); !ok || we.Code != wire.CodeUnsupportedOperation {
		t.Errorf("ListTasks to a 0.3 agent: %v", err)
	}
	if !*updateREST {
		for _, key := range []string{"send_with_tenant/1.0to1.0/", "send_with_tenant/1.0to1.0/agent-side", "list_tasks/1.0to1.0"} {
			g, w := got[key], want[key]
			if g.Method != w.Method || g.URL != w.URL {
				t.Errorf("%s: %s %s, want %s %s", key, g.Method, g.URL, w.Method, w.URL)
			}
			if g.Body != nil || w.Body != nil {
				equalJSON(t, g.Body, w.Body)
			}
		}
	}
	if *updateREST {
		writeRESTGolden(t, "upstream.json", got)
	}
}

// agentParses plays a REST agent receiving RESTUpstream's request: it
// must read the same operation, task, message and params (but for what
// the target version or the REST form cannot carry).
func agentParses(t *testing.T, r *wire.Request, v wire.Version, tenant, method, rawURL string, body []byte) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("bad URL %q: %v", rawURL, err)
	}
	path, ok := strings.CutPrefix(u.EscapedPath(), "/a2a")
	if !ok {
		t.Fatalf("URL %q is not under the base", rawURL)
	}
	ct := ""
	if body != nil {
		ct = wire.RESTContentType(v)
	}
	header := ""
	if v == wire.V10 {
		header = "1.0"
	}
	ar, werr := wire.ParseREST(method, path, u.Query(), ct, body, header)
	if werr != nil {
		t.Fatalf("the agent cannot parse %s %s %s: %v", method, rawURL, body, werr)
	}
	if ar.Method != r.Method || ar.Version != v || ar.Tenant != tenant || ar.TaskID() != r.TaskID() ||
		ar.Blocking() != r.Blocking() || ar.ContextID() != r.ContextID() || ar.ParentTaskID() != r.ParentTaskID() ||
		partsOf(ar) != partsOf(r) || !reflect.DeepEqual(ar.MessageTexts(), r.MessageTexts()) {
		t.Errorf("the agent reads it differently: method %v/%v task %q/%q tenant %q/%q blocking %v/%v",
			ar.Method, r.Method, ar.TaskID(), r.TaskID(), ar.Tenant, tenant, ar.Blocking(), r.Blocking())
	}
	// The params the agent gets are the request's in its version, but
	// for what REST cannot carry.
	want := paramsIn(t, r, v)
	delete(want, "tenant")
	if tenant != "" {
		want["tenant"] = tenant
	}
	switch {
	case v == wire.V03 && r.Method == wire.MethodSend:
		cfg, _ := want["configuration"].(map[string]any)
		if cfg == nil {
			cfg = map[string]any{}
		}
		cfg["blocking"] = r.Blocking()
		want["configuration"] = cfg
		fallthrough
	case v == wire.V03 && r.Method == wire.MethodStream:
		if msg, ok := want["message"].(map[string]any); ok {
			delete(msg, "referenceTaskIds") // not in the 0.3 proto
		}
	case v == wire.V03 && r.Method == wire.MethodPushGet, v == wire.V03 && r.Method == wire.MethodPushDelete:
		if _, ok := want["pushNotificationConfigId"]; !ok {
			want["pushNotificationConfigId"] = want["id"]
		}
		delete(want, "metadata")
	case r.Method != wire.MethodSend && r.Method != wire.MethodStream && !(v == wire.V10 && r.Method == wire.MethodCancelTask):
		delete(want, "metadata") // only a POST body carries objects
	}
	wantJSON, _ := json.Marshal(want)
	if len(want) == 0 && ar.Params == nil {
		return
	}
	equalJSON(t, ar.Params, wantJSON)
}

// partsOf counts a request's parts but for DataBytes, the length of the
// data parts' JSON as sent, which re-encoding compacts.
func partsOf(r *wire.Request) wire.PartStats {
	p := r.MessageParts()
	p.DataBytes = 0
	return p
}

// paramsIn is r's params in version v, as a map.
func paramsIn(t *testing.T, r *wire.Request, v wire.Version) map[string]any {
	t.Helper()
	body := r.Raw
	if r.Version != v {
		var err error
		if body, err = wire.TranslateRequest(r, v); err != nil {
			t.Fatal(err)
		}
	}
	var env struct {
		Params map[string]any `json:"params"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	if env.Params == nil {
		env.Params = map[string]any{}
	}
	return env.Params
}

func TestRESTUpstreamErrors(t *testing.T) {
	if _, _, _, err := wire.RESTUpstream(nil, wire.V10, restAgentBase, ""); err == nil {
		t.Error("nil request: no error")
	}
	r, _ := wire.ParseRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"GetTaskPushNotificationConfig","params":{"taskId":"t"}}`), "1.0")
	if _, _, _, err := wire.RESTUpstream(r, wire.V10, restAgentBase, ""); err == nil {
		t.Error("1.0 push config get without a config id: no error")
	}
	if _, _, _, err := wire.RESTUpstream(r, "2.0", restAgentBase, ""); err == nil {
		t.Error("unknown version: no error")
	}
	// Ids with every awkward character survive the path.
	r, _ = wire.ParseRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"a/b:cancel?x#y %z"}}`), "1.0")
	method, u, body, err := wire.RESTUpstream(r, wire.V10, "https://agent.example.com/a2a", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(u, "/tasks/a%2Fb%3Acancel%3Fx%23y%20%25z:cancel") {
		t.Errorf("URL %s", u)
	}
	agentParses(t, r, wire.V10, "", method, u, body)
}

// FuzzFromREST feeds arbitrary agent answers to the REST readers: they
// never panic, a result is always one line of JSON that the proxy can
// relay and observe, and an error always renders.
func FuzzFromREST(f *testing.F) {
	for _, s := range []string{
		`{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`,
		`{"message":{"role":"ROLE_AGENT","content":[{"text":"x"},{"file":{"fileWithUri":"u"}},{"data":{"data":{}}}]}}`,
		`{"statusUpdate":{"taskId":"t","status":{"state":5,"message":{"role":2}}}}`,
		`{"artifactUpdate":{"artifact":{"parts":[{"file":{"fileWithBytes":"aGk="}}]}}}`,
		`{"name":"tasks/a/pushNotificationConfigs/b","pushNotificationConfig":{}}`,
		`{"configs":[{"name":"tasks/a/pushNotificationConfigs/b"}]}`,
		`{"error":{"code":404,"message":"x","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"UNKNOWN_ERROR","domain":"agentmarket.dev","metadata":{"code":"-32077"}}]}}`,
		`{"code":-32001,"message":"x","data":null}`,
		`{"jsonrpc":"2.0","id":1,"result":[]}`,
		`[]`, `null`, `"x"`, ``, `{`,
	} {
		f.Add(200, s, uint8(0))
		f.Add(404, s, uint8(5))
	}
	f.Fuzz(func(t *testing.T, status int, body string, sel uint8) {
		v := []wire.Version{wire.V03, wire.V10}[sel%2]
		m := wire.Method(int(sel/2)%11 + 1)
		check := func(res json.RawMessage, e *wire.Error) {
			if e != nil {
				if res != nil {
					t.Fatalf("both a result and an error")
				}
				if out := wire.ErrorResponse(json.RawMessage(`1`), e); !json.Valid(out) {
					t.Fatalf("error does not render: %s", out)
				}
				if _, out := wire.RESTError(v, e); !json.Valid(out) {
					t.Fatalf("REST error does not render: %s", out)
				}
				return
			}
			if !json.Valid(res) || bytes.ContainsAny(res, "\r\n") {
				t.Fatalf("result is not one line of JSON: %q", res)
			}
			wire.Observe(v, m, res)
			_, out := wire.RESTResult(v, m, res)
			if !json.Valid(out) {
				t.Fatalf("RESTResult is not JSON: %s", out)
			}
			if ev := wire.RESTEvent(v, m, res); !json.Valid(ev) {
				t.Fatalf("RESTEvent is not JSON: %s", ev)
			}
		}
		check(wire.FromRESTResponse(v, m, status, wire.RESTContentType(v), []byte(body)))
		check(wire.FromRESTEvent(v, m, []byte(body)))
	})
}

// ---- speed ----

func BenchmarkFromRESTEvent03(b *testing.B) {
	data := []byte(`{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING","message":{"role":"ROLE_AGENT","content":[{"text":"Reading sources"}]}}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.FromRESTEvent(wire.V03, wire.MethodStream, data); err != nil {
			b.Fatal(err)
		}
	}
}
