package wire_test

import (
	"testing"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// TestSetServedBy: the listing that served lands in the usage extension's
// object of the Task or Message an answer carries, in either binding and
// version, beside the agent's own report; other answers stay as they are.
func TestSetServedBy(t *testing.T) {
	u := `"` + wire.UsageExtensionURI + `"`
	for _, c := range []struct{ name, in, want string }{
		{"1.0 send, a task with a report",
			`{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t1","status":{"state":"TASK_STATE_WORKING"},"metadata":{` + u + `:{"inputTokens":12345678901234567}}}}}`,
			`{"id":1,"jsonrpc":"2.0","result":{"task":{"id":"t1","metadata":{` + u + `:{"inputTokens":12345678901234567,"servedBy":"lst_b"}},"status":{"state":"TASK_STATE_WORKING"}}}}`},
		{"1.0 send, a message", `{"jsonrpc":"2.0","id":1,"result":{"message":{"messageId":"m1","parts":[]}}}`,
			`{"id":1,"jsonrpc":"2.0","result":{"message":{"messageId":"m1","metadata":{` + u + `:{"servedBy":"lst_b"}},"parts":[]}}}`},
		{"0.3 task", `{"jsonrpc":"2.0","id":"a","result":{"kind":"task","id":"t1","status":{"state":"working"}}}`,
			`{"id":"a","jsonrpc":"2.0","result":{"id":"t1","kind":"task","metadata":{` + u + `:{"servedBy":"lst_b"}},"status":{"state":"working"}}}`},
		{"HTTP+JSON task", `{"id":"t1","status":{"state":"TASK_STATE_COMPLETED"},"metadata":{"k":"v"}}`,
			`{"id":"t1","metadata":{` + u + `:{"servedBy":"lst_b"},"k":"v"},"status":{"state":"TASK_STATE_COMPLETED"}}`},
		{"an error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"no"}}`, ""},
		{"a task list", `{"tasks":[{"id":"t1","status":{}}]}`, ""},
		{"an event stream", "data: {}\n\n", ""},
	} {
		got, ok := wire.SetServedBy([]byte(c.in), "lst_b")
		if c.want == "" {
			if ok || string(got) != c.in {
				t.Errorf("%s: %s, %v; want it as it was", c.name, got, ok)
			}
			continue
		}
		if !ok || string(got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}
