package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
)

const usageExtension = "https://agentmarket.dev/a2a/extensions/usage/v1"

// filler is English-like text of n bytes.
func filler(n int) string {
	const words = "the quarterly revenue report shows growth in every region and the board asks for a summary "
	return strings.Repeat(words, n/len(words)+1)[:n]
}

// sendBody is the benchmark's message/send: about 1 KiB, as an
// orchestrator sends it (the same request as the wire package's
// benchmarks).
func sendBody() []byte {
	return []byte(`{"jsonrpc":"2.0","id":"req-0001","method":"message/send","params":{"message":{"kind":"message","messageId":"6dbc13b5-bd57-4c2b-b503-24e381b6c8d6","role":"user","contextId":"c295ea44-7543-4f78-b524-7a38915ad6e4","parts":[{"kind":"text","text":"` +
		filler(570) + `"}],"metadata":{"agentmarket/parentTaskId":"parent-task-1"}},"configuration":{"acceptedOutputModes":["text/plain"],"blocking":true},"metadata":{"trace":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}`)
}

// streamBody is a message/stream request with the same message.
func streamBody() []byte {
	return bytes.Replace(sendBody(), []byte(`"method":"message/send"`), []byte(`"method":"message/stream"`), 1)
}

// sendAnswer is the canned agent's answer to message/send, split around
// the task id: a completed 0.3 Task with a status message, an artifact and
// a usage report, about 1 KiB. Every answer gets a new task id, as a real
// agent's would, so the meter binds and bills a new task on every call.
var sendAnswer = func() [2][]byte {
	const usage = `"metadata":{"` + usageExtension + `":{"inputTokens":180,"outputTokens":160,"computeMs":930,"model":"m-1"}}`
	s := `{"jsonrpc":"2.0","id":"req-0001","result":{"kind":"task","id":"@","contextId":"c295ea44-7543-4f78-b524-7a38915ad6e4","status":{"state":"completed","timestamp":"2026-05-01T10:00:00.000Z","message":{"kind":"message","messageId":"m-2","role":"agent","parts":[{"kind":"text","text":"Here is the summary."}]}},"artifacts":[{"artifactId":"9b6934dd-37e3-4eb1-8766-962efaab63a1","name":"summary","parts":[{"kind":"text","text":"` +
		filler(420) + `"}]}],` + usage + `}}`
	before, after, _ := strings.Cut(s, "@")
	return [2][]byte{[]byte(before), []byte(after)}
}()

// taskIDs makes UUID-shaped task ids from a counter.
type taskIDs struct{ n atomic.Uint64 }

func (t *taskIDs) next(dst []byte) []byte {
	dst = append(dst, "7a1f0c3e-0000-4000-8000-"...)
	n := t.n.Add(1)
	const hex = "0123456789abcdef"
	for i := 44; i >= 0; i -= 4 {
		dst = append(dst, hex[(n>>uint(i))&0xf])
	}
	return dst
}

// agentCard is a valid A2A 0.3 card for the canned agent at base (ending
// in /): JSON-RPC, streaming, and the usage extension so the meter bills
// the agent's reports.
func agentCard(base string) []byte {
	card := map[string]any{
		"protocolVersion":    "0.3.0",
		"name":               "Canned Bench Agent",
		"description":        "Answers every message/send at once with the same completed task; streams timestamped events.",
		"url":                base,
		"preferredTransport": "JSONRPC",
		"provider":           map[string]string{"organization": "AgentMarket benchmarks", "url": "https://agentmarket.dev"},
		"version":            "1.0.0",
		"capabilities": map[string]any{"streaming": true, "pushNotifications": false, "stateTransitionHistory": false,
			"extensions": []map[string]any{{"uri": usageExtension, "description": "usage reports", "required": false}}},
		"defaultInputModes":  []string{"text/plain"},
		"defaultOutputModes": []string{"text/plain"},
		"skills": []map[string]any{{"id": "echo", "name": "Canned answer", "description": "Answers at once.",
			"tags": []string{"benchmark"}, "inputModes": []string{"text/plain"}, "outputModes": []string{"text/plain"}}},
	}
	b, _ := json.Marshal(card)
	return b
}

// streamSpec shapes the canned agent's SSE answers.
type streamSpec struct {
	events   int           // events per stream, the first (a task) and last (final status) included
	interval time.Duration // between events
}

// agent is the canned fast agent.
type agent struct {
	URL    string // base URL, ending in /
	ids    taskIDs
	stream streamSpec
	app    *fiber.App
}

// startAgent serves the canned agent on a free loopback port until ctx
// ends.
func startAgent(ctx context.Context, stream streamSpec) (*agent, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &agent{URL: "http://" + ln.Addr().String() + "/", stream: stream}
	card := agentCard(a.URL)
	a.app = fiber.New(fiber.Config{DisableStartupMessage: true, DisableDefaultDate: true, DisableHeaderNormalizing: true})
	a.app.Get("/.well-known/agent-card.json", func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Send(card)
	})
	a.app.Post("/*", a.rpc)
	go pprof.Do(ctx, pprof.Labels("role", "agent"), func(context.Context) { _ = a.app.Listener(ln) })
	go func() { <-ctx.Done(); _ = a.app.ShutdownWithTimeout(2 * time.Second) }()
	return a, nil
}

func (a *agent) rpc(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	if bytes.Contains(c.Body(), []byte(`"method":"message/stream"`)) {
		return a.sse(c)
	}
	res := c.Response()
	res.AppendBody(sendAnswer[0])
	var id [36]byte
	res.AppendBody(a.ids.next(id[:0]))
	res.AppendBody(sendAnswer[1])
	return nil
}

// sse streams a task, status and artifact updates, and a final status,
// each stamped with the time it was written (Unix ns in metadata
// "bench/sentNs") so the receiver can tell how long it took to arrive.
func (a *agent) sse(c *fiber.Ctx) error {
	var idb [36]byte
	id := string(a.ids.next(idb[:0]))
	n, every := max(a.stream.events, 2), a.stream.interval
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	const ctxID = "c295ea44-7543-4f78-b524-7a38915ad6e4"
	if bytes.Contains(c.Body(), []byte(`"bench/hold":true`)) {
		// Held open: the task, then a comment every second until the
		// client leaves (-hold-streams).
		c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"req-0001\",\"result\":{\"kind\":\"task\",\"id\":%q,\"contextId\":%q,\"status\":{\"state\":\"working\"}}}\n\n", id, ctxID)
			for w.Flush() == nil {
				time.Sleep(time.Second)
				w.WriteString(": working\n\n")
			}
		})
		return nil
	}
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		for i := 0; i < n; i++ {
			if i > 0 {
				time.Sleep(every)
			}
			var result string
			switch i {
			case 0:
				result = fmt.Sprintf(`{"kind":"task","id":%q,"contextId":%q,"status":{"state":"working"},"metadata":{"bench/sentNs":%s}}`, id, ctxID, now())
			case n - 1:
				result = fmt.Sprintf(`{"kind":"status-update","taskId":%q,"contextId":%q,"status":{"state":"completed"},"final":true,"metadata":{"bench/sentNs":%s,"%s":{"inputTokens":180,"outputTokens":%d,"computeMs":930,"model":"m-1"}}}`,
					id, ctxID, now(), usageExtension, 10*(n-2))
			default:
				result = fmt.Sprintf(`{"kind":"artifact-update","taskId":%q,"contextId":%q,"artifact":{"artifactId":"a-1","parts":[{"kind":"text","text":"chunk %d of the summary, forty bytes long."}]},"append":%t,"lastChunk":%t,"metadata":{"bench/sentNs":%s}}`,
					id, ctxID, i, i > 1, i == n-2, now())
			}
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"req-0001\",\"result\":%s}\n\n", result)
			if w.Flush() != nil {
				return
			}
		}
	})
	return nil
}

func now() string { return strconv.FormatInt(time.Now().UnixNano(), 10) }
