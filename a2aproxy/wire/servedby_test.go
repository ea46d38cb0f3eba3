package wire_test

import (
	"testing"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// TestSetServedBy: the listing that served lands in the usage extension's
// object of the Task or Message an answer carries, in either binding and
// version, beside the agent's own report, the agent's bytes otherwise as
// they were (members in their order, text unescaped); other answers stay
// as they are.
func TestSetServedBy(t *testing.T) {
	u := `"` + wire.UsageExtensionURI + `"`
	for _, c := range []struct{ name, in, want string }{
		{"1.0 send, a task with a report",
			`{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t1","status":{"state":"TASK_STATE_WORKING"},"metadata":{` + u + `:{"inputTokens":12345678901234567}}}}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t1","status":{"state":"TASK_STATE_WORKING"},"metadata":{` + u + `:{"inputTokens":12345678901234567,"servedBy":"lst_b"}}}}}`},
		{"1.0 send, a message", `{"jsonrpc":"2.0","id":1,"result":{"message":{"messageId":"m1","parts":[]}}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"message":{"messageId":"m1","parts":[],"metadata":{` + u + `:{"servedBy":"lst_b"}}}}}`},
		{"0.3 task", `{"jsonrpc":"2.0","id":"a","result":{"kind":"task","id":"t1","status":{"state":"working"}}}`,
			`{"jsonrpc":"2.0","id":"a","result":{"kind":"task","id":"t1","status":{"state":"working"},"metadata":{` + u + `:{"servedBy":"lst_b"}}}}`},
		{"HTTP+JSON task", `{"id":"t1","status":{"state":"TASK_STATE_COMPLETED"},"metadata":{"k":"v"}}`,
			`{"id":"t1","status":{"state":"TASK_STATE_COMPLETED"},"metadata":{"k":"v",` + u + `:{"servedBy":"lst_b"}}}`},
		{"text with <, & and an escape, kept as the agent wrote it",
			`{"jsonrpc":"2.0","id":2,"result":{"message":{"messageId":"m2","parts":[{"text":"a < b & \u00e9"}]}}}`,
			`{"jsonrpc":"2.0","id":2,"result":{"message":{"messageId":"m2","parts":[{"text":"a < b & \u00e9"}],"metadata":{` + u + `:{"servedBy":"lst_b"}}}}}`},
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
