package wire_test

import (
	"math"
	"reflect"
	"testing"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

func TestObserve(t *testing.T) {
	usage := func(in, out, ms int64, model string) *wire.Reported {
		return &wire.Reported{InputTokens: in, OutputTokens: out, ComputeMs: ms, Model: model}
	}
	tests := []struct {
		name   string
		v      wire.Version
		m      wire.Method
		result string
		want   wire.Observation
	}{
		{
			name: "0.3 task with artifacts and history", v: wire.V03, m: wire.MethodGetTask, result: string(goldenBody("task", wire.V03)),
			want: wire.Observation{
				Kind: wire.KindTask, TaskID: "task-1", ContextID: "ctx-1", State: "completed", Terminal: true,
				Usage: usage(120, 512, 830, "m-1"),
				Artifacts: []wire.ArtifactChunk{
					{ArtifactID: "art-1", Text: "Revenue grew 12%.", LastChunk: true},
					{ArtifactID: "art-2", LastChunk: true},
				},
				AgentTexts: []string{"Done.", "Working on it."},
			},
		},
		{
			name: "1.0 send result task, input required", v: wire.V10, m: wire.MethodSend, result: string(goldenBody("send_result_task", wire.V10)),
			want: wire.Observation{
				Kind: wire.KindTask, TaskID: "task-2", ContextID: "ctx-2", State: "input-required", Interrupted: true,
				AgentTexts: []string{"Where would you like to fly from and to?"},
			},
		},
		{
			name: "1.0 send result message", v: wire.V10, m: wire.MethodSend, result: string(goldenBody("send_result_message", wire.V10)),
			want: wire.Observation{
				Kind: wire.KindMessage, ContextID: "ctx-3", Usage: usage(7, 8, 15, "m-2"),
				AgentTexts: []string{"Paris is the capital of France."},
			},
		},
		{
			name: "0.3 status update, final", v: wire.V03, m: wire.MethodStream, result: string(goldenBody("event_status_completed", wire.V03)),
			want: wire.Observation{Kind: wire.KindStatusUpdate, TaskID: "task-3", ContextID: "ctx-4", State: "completed", Terminal: true, Final: true},
		},
		{
			name: "1.0 status update with message and usage", v: wire.V10, m: wire.MethodSubscribe, result: string(goldenBody("event_status_working", wire.V10)),
			want: wire.Observation{
				Kind: wire.KindStatusUpdate, TaskID: "task-3", ContextID: "ctx-4", State: "working",
				Usage: usage(50, 3, 100, ""), AgentTexts: []string{"Reading sources"},
			},
		},
		{
			name: "0.3 artifact chunk", v: wire.V03, m: wire.MethodStream, result: string(goldenBody("event_artifact", wire.V03)),
			want: wire.Observation{
				Kind: wire.KindArtifactUpdate, TaskID: "task-3", ContextID: "ctx-4", Usage: usage(50, 40, 300, ""),
				Artifacts: []wire.ArtifactChunk{{ArtifactID: "art-9", Text: "<section 2...>", Append: true}},
			},
		},
		{
			name: "1.0 bare task from cancel", v: wire.V10, m: wire.MethodCancelTask,
			result: `{"id":"t","contextId":"c","status":{"state":"TASK_STATE_CANCELED"}}`,
			want:   wire.Observation{Kind: wire.KindTask, TaskID: "t", ContextID: "c", State: "canceled", Terminal: true},
		},
		{
			name: "1.0 enum numbers", v: wire.V10, m: wire.MethodGetTask,
			result: `{"id":"t","status":{"state":7,"message":{"role":2,"parts":[{"text":"no"}]}}}`,
			want:   wire.Observation{Kind: wire.KindTask, TaskID: "t", State: "rejected", Terminal: true, AgentTexts: []string{"no"}},
		},
		{
			name: "the largest report wins, whatever its place", v: wire.V03, m: wire.MethodGetTask,
			result: `{"kind":"task","id":"t","status":{"state":"working","message":{"role":"agent","parts":[],
				"metadata":{"https://agentmarket.dev/a2a/extensions/usage/v1":{"inputTokens":10,"outputTokens":90,"computeMs":5,"model":"big"}}}},
				"history":[{"role":"agent","parts":[],"metadata":{"https://agentmarket.dev/a2a/extensions/usage/v1":{"inputTokens":10,"outputTokens":10}}}],
				"metadata":{"https://agentmarket.dev/a2a/extensions/usage/v1":{"inputTokens":10,"outputTokens":20,"computeMs":"7"}}}`,
			want: wire.Observation{Kind: wire.KindTask, TaskID: "t", State: "working", Usage: usage(10, 90, 5, "big")},
		},
		{
			name: "lenient counters: strings, floats, negatives, junk", v: wire.V10, m: wire.MethodStream,
			result: `{"statusUpdate":{"taskId":"t","status":{"state":"TASK_STATE_WORKING"},
				"metadata":{"https://agentmarket.dev/a2a/extensions/usage/v1":{"inputTokens":"12","outputTokens":3.9,"computeMs":-4,"model":7}}}}`,
			want: wire.Observation{Kind: wire.KindStatusUpdate, TaskID: "t", State: "working", Usage: usage(12, 3, 0, "")},
		},
		{
			name: "counters past int64 read as its largest value, not as 0", v: wire.V03, m: wire.MethodStream,
			result: `{"kind":"status-update","taskId":"t","status":{"state":"working"},
				"metadata":{"https://agentmarket.dev/a2a/extensions/usage/v1":{"inputTokens":99999999999999999999,"outputTokens":"1e300","computeMs":-1e300}}}`,
			want: wire.Observation{Kind: wire.KindStatusUpdate, TaskID: "t", State: "working", Usage: usage(math.MaxInt64, math.MaxInt64, 0, "")},
		},
		{
			name: "the largest report wins when its counters sum past int64", v: wire.V03, m: wire.MethodGetTask,
			result: `{"kind":"task","id":"t","status":{"state":"working","message":{"role":"agent","parts":[],
				"metadata":{"https://agentmarket.dev/a2a/extensions/usage/v1":{"inputTokens":9223372036854775807,"outputTokens":9223372036854775807}}}},
				"metadata":{"https://agentmarket.dev/a2a/extensions/usage/v1":{"inputTokens":10,"outputTokens":20}}}`,
			want: wire.Observation{Kind: wire.KindTask, TaskID: "t", State: "working", Usage: usage(math.MaxInt64, math.MaxInt64, 0, "")},
		},
		{
			name: "members of the wrong type are skipped", v: wire.V03, m: wire.MethodStream,
			result: `{"kind":"status-update","taskId":"t","contextId":5,"final":"yes","status":{"state":"failed"},"metadata":"x"}`,
			want:   wire.Observation{Kind: wire.KindStatusUpdate, TaskID: "t", State: "failed", Terminal: true},
		},
		{
			name: "user messages are not agent text", v: wire.V03, m: wire.MethodSend,
			result: `{"kind":"message","role":"user","messageId":"m","parts":[{"kind":"text","text":"echo"}]}`,
			want:   wire.Observation{Kind: wire.KindMessage},
		},
		{
			name: "push config results are not observed", v: wire.V10, m: wire.MethodPushGet,
			result: string(goldenBody("push_config", wire.V10)), want: wire.Observation{},
		},
		{
			name: "not JSON", v: wire.V10, m: wire.MethodGetTask, result: `{"id":`, want: wire.Observation{},
		},
		{
			name: "an unknown object", v: wire.V10, m: wire.MethodStream, result: `{"hello":"world"}`, want: wire.Observation{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := wire.Observe(tc.v, tc.m, []byte(tc.result))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v (usage %+v)\nwant %+v (usage %+v)", got, got.Usage, tc.want, tc.want.Usage)
			}
		})
	}
}

func TestNormalizeState(t *testing.T) {
	tests := map[string]string{
		"TASK_STATE_SUBMITTED":      "submitted",
		"TASK_STATE_WORKING":        "working",
		"TASK_STATE_COMPLETED":      "completed",
		"TASK_STATE_FAILED":         "failed",
		"TASK_STATE_CANCELED":       "canceled",
		"TASK_STATE_INPUT_REQUIRED": "input-required",
		"TASK_STATE_REJECTED":       "rejected",
		"TASK_STATE_AUTH_REQUIRED":  "auth-required",
		"TASK_STATE_UNSPECIFIED":    "unknown",
		"input-required":            "input-required",
		"paused":                    "paused",
	}
	for in, want := range tests {
		if got := wire.NormalizeState(in); got != want {
			t.Errorf("NormalizeState(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEstimateTokens(t *testing.T) {
	tests := []struct {
		text string
		want int64
	}{
		{"", 0},
		{"a", 1},
		{"abcd", 1},
		{"abcde", 2},
		{"日本語のテキスト", 2}, // 8 code points, not 24 bytes
		{"Revenue grew 12%.", 5},
	}
	for _, tc := range tests {
		if got := wire.EstimateTokens(tc.text); got != tc.want {
			t.Errorf("EstimateTokens(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
}

func TestUsageExtensionURIMatchesDecoder(t *testing.T) {
	// The decoder's struct tag spells the URI out; this pins them together.
	res := `{"kind":"message","role":"agent","parts":[],"metadata":{"` + wire.UsageExtensionURI + `":{"inputTokens":1}}}`
	if o := wire.Observe(wire.V03, wire.MethodSend, []byte(res)); o.Usage == nil || o.Usage.InputTokens != 1 {
		t.Fatalf("usage under UsageExtensionURI not read: %+v", o)
	}
}
