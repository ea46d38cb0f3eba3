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

// The usage every canned answer to message/send reports: the meter bills
// exactly this per call, which is how the benchmark checks that the usage
// totals match the calls answered.
const (
	answerInputTokens  = 180
	answerOutputTokens = 160
)

// protocol is an A2A protocol version the benchmark speaks.
type protocol string

const (
	v03 protocol = "0.3"
	v10 protocol = "1.0"
)

// path is where the canned agent of version p lives, on the built-in
// agent as in nginx: one server answers both versions, each under its own
// path with its own card.
func (p protocol) path() string {
	if p == v10 {
		return "/v10/"
	}
	return "/v03/"
}

// filler is English-like text of n bytes.
func filler(n int) string {
	const words = "the quarterly revenue report shows growth in every region and the board asks for a summary "
	return strings.Repeat(words, n/len(words)+1)[:n]
}

const (
	benchMessageID = "6dbc13b5-bd57-4c2b-b503-24e381b6c8d6"
	benchContextID = "c295ea44-7543-4f78-b524-7a38915ad6e4"
	benchTrace     = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
)

// messageSeq numbers the messages the benchmark sends: every request
// carries a messageId of its own, as an orchestrator's do (the meter
// answers a send whose messageId it has seen from the same buyer with the
// first send's task instead of forwarding it: idempotent sends).
var messageSeq atomic.Uint64

// messageIDOffsets are where the last 12 hex digits of each benchMessageID
// in b start.
func messageIDOffsets(b []byte) []int {
	var at []int
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(benchMessageID))
		if j < 0 {
			return at
		}
		at = append(at, i+j+len(benchMessageID)-12)
		i += j + len(benchMessageID)
	}
}

// stampMessageID writes the next message number, as 12 hex digits, at
// each offset: a new messageId, in place, without formatting the request.
func stampMessageID(b []byte, at []int) {
	if len(at) == 0 {
		return
	}
	const hex = "0123456789abcdef"
	var digits [12]byte
	n := messageSeq.Add(1)
	for k := 11; k >= 0; k-- {
		digits[k] = hex[n&0xf]
		n >>= 4
	}
	for _, i := range at {
		copy(b[i:i+12], digits[:])
	}
}

// freshMessage is body with a messageId of its own.
func freshMessage(body []byte) []byte {
	b := bytes.Clone(body)
	stampMessageID(b, messageIDOffsets(b))
	return b
}

// sendBody is the benchmark's message/send in version v: about 1 KiB, as
// an orchestrator sends it (the same request as the wire package's
// benchmarks, but naming no parent task: a delegated call, one naming its
// parent in agentmarket/parentTaskId, binds its task in the database at
// once so that a cascade of cancels finds it; the common call binds in
// the meter's memory and through the spool), the same message in both
// versions.
func sendBody(v protocol) []byte {
	if v == v10 {
		return []byte(`{"jsonrpc":"2.0","id":"req-0001","method":"SendMessage","params":` + string(sendParams10()) + `}`)
	}
	return []byte(`{"jsonrpc":"2.0","id":"req-0001","method":"message/send","params":{"message":{"kind":"message","messageId":"` + benchMessageID + `","role":"user","contextId":"` + benchContextID + `","parts":[{"kind":"text","text":"` +
		filler(570) + `"}],"metadata":{"orchestrator/step":"summarise-q3-reports"}},"configuration":{"acceptedOutputModes":["text/plain"],"blocking":true},"metadata":{"trace":"` + benchTrace + `"}}}`)
}

// sendParams10 is the 1.0 SendMessage's params: the body of an HTTP+JSON
// POST /message:send, and the params of the JSON-RPC call.
func sendParams10() []byte {
	return []byte(`{"message":{"messageId":"` + benchMessageID + `","role":"ROLE_USER","contextId":"` + benchContextID + `","parts":[{"text":"` +
		filler(570) + `"}],"metadata":{"orchestrator/step":"summarise-q3-reports"}},"configuration":{"acceptedOutputModes":["text/plain"],"returnImmediately":false},"metadata":{"trace":"` + benchTrace + `"}}`)
}

// streamBody is a 0.3 message/stream request with the same message.
func streamBody() []byte {
	return bytes.Replace(sendBody(v03), []byte(`"method":"message/send"`), []byte(`"method":"message/stream"`), 1)
}

// sendAnswers are the canned agent's answers to message/send, by version,
// split around the task id: a completed Task with a status message, a
// 420-byte artifact and a usage report, about 1 KiB. Every answer gets a
// new task id, as a real agent's would, so the meter binds and bills a
// new task on every call.
var sendAnswers = func() map[protocol][2][]byte {
	usage := fmt.Sprintf(`"metadata":{"%s":{"inputTokens":%d,"outputTokens":%d,"computeMs":930,"model":"m-1"}}`, usageExtension, answerInputTokens, answerOutputTokens)
	const status = `"timestamp":"2026-05-01T10:00:00.000Z","message":{"messageId":"m-2",`
	artifact := `"artifactId":"9b6934dd-37e3-4eb1-8766-962efaab63a1","name":"summary","parts":[{`
	s03 := `{"jsonrpc":"2.0","id":"req-0001","result":{"kind":"task","id":"@","contextId":"` + benchContextID + `","status":{"state":"completed",` + status +
		`"kind":"message","role":"agent","parts":[{"kind":"text","text":"Here is the summary."}]}},"artifacts":[{` + artifact + `"kind":"text","text":"` +
		filler(420) + `"}]}],` + usage + `}}`
	s10 := `{"jsonrpc":"2.0","id":"req-0001","result":{"task":{"id":"@","contextId":"` + benchContextID + `","status":{"state":"TASK_STATE_COMPLETED",` + status +
		`"role":"ROLE_AGENT","parts":[{"text":"Here is the summary."}]}},"artifacts":[{` + artifact + `"text":"` +
		filler(420) + `"}]}],` + usage + `}}}`
	split := func(s string) [2][]byte {
		before, after, _ := strings.Cut(s, "@")
		return [2][]byte{[]byte(before), []byte(after)}
	}
	return map[protocol][2][]byte{v03: split(s03), v10: split(s10)}
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

// agentCard is a valid card of version v for the canned agent at url
// (ending in /): JSON-RPC, and the usage extension so the meter bills the
// agent's reports. A 1.0 card lists its interface in supportedInterfaces,
// which the SDK's forwarding proxy needs.
func agentCard(url string, v protocol, streaming bool) []byte {
	card := map[string]any{
		"name":        "Canned Bench Agent " + string(v),
		"description": "Answers every message/send at once with the same completed task.",
		"provider":    map[string]string{"organization": "AgentMarket benchmarks", "url": "https://agentmarket.dev"},
		"version":     "1.0.0",
		"capabilities": map[string]any{"streaming": streaming, "pushNotifications": false,
			"extensions": []map[string]any{{"uri": usageExtension, "description": "usage reports", "required": false}}},
		"defaultInputModes":  []string{"text/plain"},
		"defaultOutputModes": []string{"text/plain"},
		"skills": []map[string]any{{"id": "echo", "name": "Canned answer", "description": "Answers at once.",
			"tags": []string{"benchmark"}, "inputModes": []string{"text/plain"}, "outputModes": []string{"text/plain"}}},
	}
	if v == v10 {
		card["supportedInterfaces"] = []map[string]string{{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}}
	} else {
		card["protocolVersion"] = "0.3.0"
		card["url"] = url
		card["preferredTransport"] = "JSONRPC"
		card["capabilities"].(map[string]any)["stateTransitionHistory"] = false
	}
	b, _ := json.Marshal(card)
	return b
}

// streamSpec shapes the canned agent's SSE answers.
type streamSpec struct {
	events   int           // events per stream, the first (a task) and last (final status) included
	interval time.Duration // between events
}

// agent is the built-in canned agent: as fast as a Go server gets, and
// the only one that streams (the SSE and held-stream phases need it).
type agent struct {
	base   string // base URL, ending in /
	ids    taskIDs
	stream streamSpec
	app    *fiber.App
}

// url is the URL of the agent of version v.
func (a *agent) url(v protocol) string { return under(a.base, v) }

// startAgent serves the canned agent on a free loopback port until ctx
// ends: version 0.3 under /v03/ (it streams), 1.0 under /v10/, each with
// its card at its .well-known path.
func startAgent(ctx context.Context, stream streamSpec) (*agent, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &agent{base: "http://" + ln.Addr().String() + "/", stream: stream}
	a.app = fiber.New(fiber.Config{DisableStartupMessage: true, DisableDefaultDate: true, DisableHeaderNormalizing: true})
	for _, v := range []protocol{v03, v10} {
		card := agentCard(a.url(v), v, v == v03)
		a.app.Get(v.path()+".well-known/agent-card.json", func(c *fiber.Ctx) error {
			c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
			return c.Send(card)
		})
		answer := sendAnswers[v]
		a.app.Post(strings.TrimSuffix(v.path(), "/")+"*", func(c *fiber.Ctx) error { return a.rpc(c, answer) })
	}
	go pprof.Do(ctx, pprof.Labels("role", "agent"), func(context.Context) { _ = a.app.Listener(ln) })
	go func() { <-ctx.Done(); _ = a.app.ShutdownWithTimeout(2 * time.Second) }()
	return a, nil
}

func (a *agent) rpc(c *fiber.Ctx, answer [2][]byte) error {
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	if bytes.Contains(c.Body(), []byte(`"method":"message/stream"`)) {
		return a.sse(c)
	}
	res := c.Response()
	res.AppendBody(answer[0])
	var id [36]byte
	res.AppendBody(a.ids.next(id[:0]))
	res.AppendBody(answer[1])
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
	const ctxID = benchContextID
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
