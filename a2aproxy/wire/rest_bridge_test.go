package wire_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// ---- all four pairings of bindings, in every pair of versions ----

func TestRESTBridgesEveryPairing(t *testing.T) {
	type side struct {
		binding wire.Binding
		v       wire.Version
	}
	var sides []side
	for _, b := range []wire.Binding{wire.BindingJSONRPC, wire.BindingREST} {
		for _, v := range []wire.Version{wire.V03, wire.V10} {
			sides = append(sides, side{b, v})
		}
	}
	for _, buyer := range sides {
		for _, agent := range sides {
			name := buyer.binding.String() + "-" + string(buyer.v) + "_to_" + agent.binding.String() + "-" + string(agent.v)
			t.Run(name, func(t *testing.T) {
				// The buyer sends the golden send request in its binding.
				rpc, werr := wire.ParseRequest(golden(t, "send_request", buyer.v), string(buyer.v))
				if werr != nil {
					t.Fatal(werr)
				}
				r := rpc
				if buyer.binding == wire.BindingREST {
					method, u, body, err := wire.RESTUpstream(rpc, buyer.v, "https://meter.example.com/a2a/l-1", "")
					if err != nil {
						t.Fatal(err)
					}
					pu, _ := url.Parse(u)
					path, _ := strings.CutPrefix(pu.EscapedPath(), "/a2a/l-1")
					header := map[wire.Version]string{wire.V03: "", wire.V10: "1.0"}[buyer.v]
					if r, werr = wire.ParseREST(method, path, pu.Query(), wire.RESTContentType(buyer.v), body, header); werr != nil {
						t.Fatal(werr)
					}
				}
				// The meter forwards it in the agent's binding and version;
				// the agent reads the same call.
				var seen *wire.Request
				if agent.binding == wire.BindingJSONRPC {
					out, err := wire.TranslateRequest(r, agent.v)
					if err != nil {
						t.Fatal(err)
					}
					seen, werr = wire.ParseRequest(out, string(agent.v))
				} else {
					method, u, body, err := wire.RESTUpstream(r, agent.v, restAgentBase, "")
					if err != nil {
						t.Fatal(err)
					}
					pu, _ := url.Parse(u)
					path, _ := strings.CutPrefix(pu.EscapedPath(), "/a2a")
					header := map[wire.Version]string{wire.V03: "", wire.V10: "1.0"}[agent.v]
					seen, werr = wire.ParseREST(method, path, pu.Query(), wire.RESTContentType(agent.v), body, header)
				}
				if werr != nil {
					t.Fatal(werr)
				}
				if seen.Method != wire.MethodSend || seen.TaskID() != rpc.TaskID() || seen.Blocking() != rpc.Blocking() ||
					!reflect.DeepEqual(seen.MessageTexts(), rpc.MessageTexts()) || seen.ParentTaskID() != rpc.ParentTaskID() {
					t.Errorf("the agent reads another call: %v %q %v", seen.Method, seen.TaskID(), seen.Blocking())
				}

				// The agent answers the golden task in its binding; the
				// meter reads it as JSON-RPC, translates it, and answers
				// the buyer in the buyer's binding.
				answer := golden(t, "send_result_task", agent.v)
				var result json.RawMessage
				if agent.binding == wire.BindingJSONRPC {
					resp, err := wire.ParseResponse(wire.ResultResponse(json.RawMessage(`"x"`), answer))
					if err != nil {
						t.Fatal(err)
					}
					result = resp.Result
				} else {
					status, body := wire.RESTResult(agent.v, wire.MethodSend, answer)
					if result, werr = wire.FromRESTResponse(agent.v, wire.MethodSend, status, wire.RESTContentType(agent.v), body); werr != nil {
						t.Fatal(werr)
					}
				}
				obs := wire.Observe(agent.v, wire.MethodSend, result)
				if obs.Kind != wire.KindTask || obs.TaskID == "" || obs.State == "" {
					t.Errorf("the meter observes nothing: %+v", obs)
				}
				tr, err := wire.TranslateResult(agent.v, buyer.v, wire.MethodSend, result)
				if err != nil {
					t.Fatal(err)
				}
				var got []byte
				if buyer.binding == wire.BindingJSONRPC {
					resp, err := wire.ParseResponse(wire.ResultResponse(r.ID, tr))
					if err != nil {
						t.Fatal(err)
					}
					got = resp.Result
				} else {
					status, body := wire.RESTResult(buyer.v, wire.MethodSend, tr)
					if got, werr = wire.FromRESTResponse(buyer.v, wire.MethodSend, status, wire.RESTContentType(buyer.v), body); werr != nil {
						t.Fatal(werr)
					}
				}
				equalJSON(t, got, golden(t, "send_result_task", buyer.v))

				// An error goes the same way.
				agentErr := wire.TaskNotFound("task-1")
				var e *wire.Error
				if agent.binding == wire.BindingJSONRPC {
					resp, _ := wire.ParseResponse(wire.ErrorResponse(json.RawMessage(`"x"`), agentErr))
					e = resp.Error
				} else {
					status, body := wire.RESTError(agent.v, agentErr)
					_, e = wire.FromRESTResponse(agent.v, wire.MethodSend, status, wire.RESTContentType(agent.v), body)
				}
				e = wire.TranslateError(agent.v, buyer.v, e)
				if buyer.binding == wire.BindingREST {
					status, body := wire.RESTError(buyer.v, e)
					if status != http.StatusNotFound {
						t.Errorf("HTTP %d", status)
					}
					_, e = wire.FromRESTResponse(buyer.v, wire.MethodSend, status, "", body)
				}
				if e == nil || e.Code != wire.CodeTaskNotFound {
					t.Errorf("the buyer gets %+v", e)
				}
			})
		}
	}
}
