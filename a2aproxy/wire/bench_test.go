package wire_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// text is English-like filler of n bytes.
func text(n int) string {
	const words = "the quarterly revenue report shows growth in every region and the board asks for a summary "
	return strings.Repeat(words, n/len(words)+1)[:n]
}

// sendBody is a message/send request of about 1 KiB, as an orchestrator
// sends it.
func sendBody(v wire.Version) []byte {
	var s string
	if v == wire.V03 {
		s = `{"jsonrpc":"2.0","id":"req-0001","method":"message/send","params":{"message":{"kind":"message","messageId":"6dbc13b5-bd57-4c2b-b503-24e381b6c8d6","role":"user","contextId":"c295ea44-7543-4f78-b524-7a38915ad6e4","parts":[{"kind":"text","text":"` +
			text(570) + `"}],"metadata":{"agentmarket/parentTaskId":"parent-task-1"}},"configuration":{"acceptedOutputModes":["text/plain"],"blocking":true},"metadata":{"trace":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}`
	} else {
		s = `{"jsonrpc":"2.0","id":"req-0001","method":"SendMessage","params":{"message":{"messageId":"6dbc13b5-bd57-4c2b-b503-24e381b6c8d6","role":"ROLE_USER","contextId":"c295ea44-7543-4f78-b524-7a38915ad6e4","parts":[{"text":"` +
			text(586) + `"}],"metadata":{"agentmarket/parentTaskId":"parent-task-1"}},"configuration":{"acceptedOutputModes":["text/plain"],"returnImmediately":false},"metadata":{"trace":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}`
	}
	return []byte(s)
}

// sendResult is the result of a message/send of about 1 KiB: a completed
// task with a status message, an artifact and a usage report.
func sendResult(v wire.Version) []byte {
	usage := `"metadata":{"https://agentmarket.dev/a2a/extensions/usage/v1":{"inputTokens":180,"outputTokens":160,"computeMs":930,"model":"m-1"}}`
	var s string
	if v == wire.V03 {
		s = `{"kind":"task","id":"43667960-d455-4453-b0cf-1bae4955270d","contextId":"c295ea44-7543-4f78-b524-7a38915ad6e4","status":{"state":"completed","timestamp":"2026-05-01T10:00:00.000Z","message":{"kind":"message","messageId":"m-2","role":"agent","parts":[{"kind":"text","text":"Here is the summary."}]}},"artifacts":[{"artifactId":"9b6934dd-37e3-4eb1-8766-962efaab63a1","name":"summary","parts":[{"kind":"text","text":"` +
			text(473) + `"}]}],` + usage + `}`
	} else {
		s = `{"task":{"id":"43667960-d455-4453-b0cf-1bae4955270d","contextId":"c295ea44-7543-4f78-b524-7a38915ad6e4","status":{"state":"TASK_STATE_COMPLETED","timestamp":"2026-05-01T10:00:00.000Z","message":{"messageId":"m-2","role":"ROLE_AGENT","parts":[{"text":"Here is the summary."}]}},"artifacts":[{"artifactId":"9b6934dd-37e3-4eb1-8766-962efaab63a1","name":"summary","parts":[{"text":"` +
			text(507) + `"}]}],` + usage + `}}`
	}
	return []byte(s)
}

func TestBenchmarkInputs(t *testing.T) {
	for _, v := range []wire.Version{wire.V03, wire.V10} {
		body := sendBody(v)
		if n := len(body); n < 1000 || n > 1100 {
			t.Errorf("%s send body is %d bytes, want about 1 KiB", v, n)
		}
		if _, err := wire.ParseRequest(body, string(v)); err != nil {
			t.Error(err)
		}
		res := sendResult(v)
		if n := len(res); n < 1000 || n > 1100 {
			t.Errorf("%s send result is %d bytes, want about 1 KiB", v, n)
		}
		if o := wire.Observe(v, wire.MethodSend, res); o.Kind != wire.KindTask || o.Usage == nil || len(o.Artifacts) != 1 {
			t.Errorf("%s result observed as %+v", v, o)
		}
	}
}

func BenchmarkParseRequest(b *testing.B) {
	for _, v := range []wire.Version{wire.V03, wire.V10} {
		body := sendBody(v)
		b.Run(string(v), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := wire.ParseRequest(body, string(v)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkObserve(b *testing.B) {
	for _, v := range []wire.Version{wire.V03, wire.V10} {
		res := json.RawMessage(sendResult(v))
		b.Run(string(v), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(res)))
			for b.Loop() {
				if o := wire.Observe(v, wire.MethodSend, res); o.Kind != wire.KindTask {
					b.Fatal(o.Kind)
				}
			}
		})
	}
}

func BenchmarkParseResponse(b *testing.B) {
	body := wire.ResultResponse(json.RawMessage(`"req-0001"`), sendResult(wire.V10))
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := wire.ParseResponse(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSSEReader(b *testing.B) {
	var stream bytes.Buffer
	for range 100 {
		_ = wire.WriteEvent(&stream, wire.ResultResponse(json.RawMessage(`1`), sendResult(wire.V03)))
	}
	b.ReportAllocs()
	b.SetBytes(int64(stream.Len()))
	for b.Loop() {
		r := wire.NewSSEReader(bytes.NewReader(stream.Bytes()))
		for range 100 {
			if _, err := r.Next(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkTranslate(b *testing.B) {
	req, werr := wire.ParseRequest(sendBody(wire.V03), "0.3")
	if werr != nil {
		b.Fatal(werr)
	}
	b.Run("request", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := wire.TranslateRequest(req, wire.V10); err != nil {
				b.Fatal(err)
			}
		}
	})
	res := sendResult(wire.V10)
	b.Run("result", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := wire.TranslateResult(wire.V10, wire.V03, wire.MethodSend, res); err != nil {
				b.Fatal(err)
			}
		}
	})
}
