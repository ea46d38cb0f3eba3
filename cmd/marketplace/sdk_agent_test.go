package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
)

// sdkExecutor is the agent logic behind the official SDK's server: it
// streams one artifact in chunks (the first chunk echoes the message, the
// others are appended), then completes. A message containing "wait" makes
// a task that works until it is canceled; one containing "slow" streams
// its chunks three times slower, so that a client can re-attach to it;
// one containing "answer with a message" is answered with a message, no
// task; one containing "fail first" fails, before any task, the first time
// its text is sent; one containing "hold" works silently until the test
// releases it (Release), then sends one artifact and waits until canceled.
type sdkExecutor struct {
	delay time.Duration
	sdkWaiters
	failed sync.Map // texts of "fail first" messages that failed once
	holds  sync.Map // task id → chan struct{}, closed by Release
	// traceparents holds the traceparent each message's execution got
	// (the SDK's ServiceParams, from the request's headers), by its text.
	traceparents sync.Map
}

func (e *sdkExecutor) hold(id a2a.TaskID) chan struct{} {
	ch, _ := e.holds.LoadOrStore(id, make(chan struct{}))
	return ch.(chan struct{})
}

// Release lets a "hold" task go on.
func (e *sdkExecutor) Release(id a2a.TaskID) { close(e.hold(id)) }

// sdkWaiters are the tasks of a test executor that work until they are
// canceled: wait holds one until Cancel (or the test's end) releases it.
type sdkWaiters struct {
	stop chan struct{} // closed when the test ends, to release waiting tasks

	wmu      sync.Mutex
	waiting  map[a2a.TaskID]chan struct{}
	canceled map[a2a.TaskID]bool
}

func newSDKWaiters() sdkWaiters {
	return sdkWaiters{stop: make(chan struct{}), waiting: map[a2a.TaskID]chan struct{}{}, canceled: map[a2a.TaskID]bool{}}
}

// wait holds the task until it is canceled, ctx ends or the test ends.
func (w *sdkWaiters) wait(ctx context.Context, id a2a.TaskID) {
	w.wmu.Lock()
	ch := make(chan struct{})
	w.waiting[id] = ch
	w.wmu.Unlock()
	select {
	case <-ch: // Cancel has emitted the canceled state
	case <-ctx.Done():
	case <-w.stop:
	}
}

// Cancel releases a waiting task and emits its canceled state.
func (w *sdkWaiters) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		w.wmu.Lock()
		w.canceled[ec.TaskID] = true
		ch := w.waiting[ec.TaskID]
		delete(w.waiting, ec.TaskID)
		w.wmu.Unlock()
		if ch != nil {
			defer close(ch)
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

func (w *sdkWaiters) wasCanceled(id string) bool {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	return w.canceled[a2a.TaskID(id)]
}

var sdkChunks = []string{" alpha", " beta", " gamma"}

// sdkArtifactText is the artifact the executor produces for a message.
func sdkArtifactText(msg string) string {
	return "You said: " + msg + "." + strings.Join(sdkChunks, "")
}

func newSDKExecutor(delay time.Duration) *sdkExecutor {
	return &sdkExecutor{delay: delay, sdkWaiters: newSDKWaiters()}
}

func sdkMessageText(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range m.Parts {
		b.WriteString(p.Text())
	}
	return b.String()
}

func (e *sdkExecutor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if tp, ok := ec.ServiceParams.Get("traceparent"); ok && len(tp) > 0 {
			e.traceparents.Store(sdkMessageText(ec.Message), tp[0])
		}
		if text := sdkMessageText(ec.Message); strings.Contains(text, "fail first") {
			if _, again := e.failed.LoadOrStore(text, true); !again {
				yield(nil, errors.New("a temporary failure, before any task"))
				return
			}
		} else if strings.Contains(text, "answer with a message") {
			// No task: the agent answers with a message of its own.
			yield(a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("A message for: "+text)), nil)
			return
		}
		if ec.StoredTask == nil {
			if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		text := sdkMessageText(ec.Message)
		if strings.Contains(text, "hold") {
			select {
			case <-e.hold(ec.TaskID):
			case <-ctx.Done():
				return
			case <-e.stop:
				return
			}
			if !yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart("released: "+text)), nil) {
				return
			}
			e.wait(ctx, ec.TaskID)
			return
		}
		if strings.Contains(text, "wait") {
			e.wait(ctx, ec.TaskID)
			return
		}
		delay := e.delay
		if strings.Contains(text, "slow") {
			delay *= 3
		}
		chunks := append([]string{"You said: " + text + "."}, sdkChunks...)
		var artifact a2a.ArtifactID
		for i, c := range chunks {
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return
			case <-e.stop:
				return
			}
			var ev *a2a.TaskArtifactUpdateEvent
			if artifact == "" {
				ev = a2a.NewArtifactEvent(ec, a2a.NewTextPart(c))
				artifact = ev.Artifact.ID
			} else {
				ev = a2a.NewArtifactUpdateEvent(ec, artifact, a2a.NewTextPart(c))
			}
			ev.LastChunk = i == len(chunks)-1
			if !yield(ev, nil) {
				return
			}
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

// sdkWireLog records HTTP exchanges (one side of the meter), so a test can
// tell which binding was used and print the exact exchange on failure.
type sdkWireLog struct {
	mu    sync.Mutex
	lines []sdkExchange
}

type sdkExchange struct {
	Method, Path, Version, RPC, ContentType string
	Status                                  int
	RespContentType                         string
	ReqBody, RespBody                       string // bodies of non-streaming exchanges, clipped
}

func (x sdkExchange) String() string {
	s := fmt.Sprintf("%s %s A2A-Version=%q", x.Method, x.Path, x.Version)
	if x.RPC != "" {
		s += " rpc=" + x.RPC
	}
	if x.ReqBody != "" {
		s += " body=" + x.ReqBody
	}
	s += fmt.Sprintf(" → %d %s", x.Status, x.RespContentType)
	if x.RespBody != "" {
		s += " " + x.RespBody
	}
	return s
}

func sdkClip(b []byte) string {
	const n = 600
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

func sdkRPCMethod(body []byte) string {
	var m struct {
		Method string `json:"method"`
	}
	json.Unmarshal(body, &m)
	return m.Method
}

func (l *sdkWireLog) add(x sdkExchange) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, x)
}

func (l *sdkWireLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// since returns the exchanges after a mark.
func (l *sdkWireLog) since(i int) []sdkExchange {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]sdkExchange(nil), l.lines[i:]...)
}

func (l *sdkWireLog) dump(i int) string {
	var b strings.Builder
	for _, x := range l.since(i) {
		b.WriteString("\n\t\t" + x.String())
	}
	return b.String()
}

// sdkRecordingTransport is the buyer's HTTP client transport, logging each
// exchange it carries.
type sdkRecordingTransport struct {
	base http.RoundTripper
	log  *sdkWireLog
	// contentType, when set, replaces the Content-Type of every request
	// with a body (the SDK itself always sends application/json).
	contentType string
}

func (rt sdkRecordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if rt.contentType != "" && req.Body != nil {
		req = req.Clone(req.Context())
		req.Header.Set("Content-Type", rt.contentType)
	}
	x := sdkExchange{Method: req.Method, Path: req.URL.RequestURI(), Version: req.Header.Get("A2A-Version"), ContentType: req.Header.Get("Content-Type")}
	if req.Body != nil {
		b, _ := io.ReadAll(req.Body)
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(b))
		x.RPC = sdkRPCMethod(b)
		x.ReqBody = sdkClip(b)
	}
	res, err := rt.base.RoundTrip(req)
	if err != nil {
		x.RespBody = "transport error: " + err.Error()
		rt.log.add(x)
		return nil, err
	}
	x.Status, x.RespContentType = res.StatusCode, res.Header.Get("Content-Type")
	if !strings.HasPrefix(x.RespContentType, "text/event-stream") {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		res.Body = io.NopCloser(bytes.NewReader(b))
		x.RespBody = sdkClip(b)
	}
	rt.log.add(x)
	return res, nil
}

// sdkStatusRecorder keeps the status an agent answered.
type sdkStatusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *sdkStatusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *sdkStatusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *sdkStatusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// sdkAgent is an official-SDK agent on an httptest server that serves one
// binding in one protocol version, and declares exactly that in its card.
type sdkAgent struct {
	URL     string
	Version string // "1.0" or "0.3"
	Binding a2a.TransportProtocol
	Exec    *sdkExecutor
	Wire    *sdkWireLog // what the meter sent the agent

	handler atomic.Pointer[http.Handler]
	restart func()
	srv     *httptest.Server
}

// Restart replaces the agent's SDK handler with a new one on the same URL:
// an agent restarted with an in-memory task store, which has forgotten
// every task.
func (a *sdkAgent) Restart() { a.restart() }

func ptrTo[T any](v T) *T { return &v }

// sdkWithPush makes the agent offer push notifications (the SDK's own
// config store and HTTP sender).
const sdkWithPush = "push"

func startSDKAgent(t *testing.T, version string, binding a2a.TransportProtocol, options ...string) *sdkAgent {
	t.Helper()
	withPush := slices.Contains(options, sdkWithPush)
	a := &sdkAgent{Version: version, Binding: binding, Exec: newSDKExecutor(80 * time.Millisecond), Wire: &sdkWireLog{}}
	// The card names the server's URL, so the listener comes first.
	srv := httptest.NewUnstartedServer(nil)
	a.URL = "http://" + srv.Listener.Addr().String()

	card := &a2a.AgentCard{
		Name:                fmt.Sprintf("SDK %s %s agent", version, binding),
		Description:         "An official a2a-go agent that streams an artifact in chunks.",
		Version:             "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{{URL: a.URL, ProtocolBinding: binding, ProtocolVersion: a2a.ProtocolVersion(version)}},
		Capabilities:        a2a.AgentCapabilities{Streaming: true, PushNotifications: withPush},
		DefaultInputModes:   []string{"text/plain"},
		DefaultOutputModes:  []string{"text/plain"},
		Skills:              []a2a.AgentSkill{{ID: "echo", Name: "Echo", Description: "Echoes the message and streams a few words.", Tags: []string{"test"}}},
	}
	build := func() http.Handler {
		handlerOptions := []a2asrv.RequestHandlerOption{a2asrv.WithLogger(slog.New(slog.DiscardHandler))}
		if withPush {
			handlerOptions = append(handlerOptions, a2asrv.WithPushNotifications(push.NewInMemoryStore(), push.NewHTTPPushSender(&push.HTTPSenderConfig{Timeout: 5 * time.Second})))
		}
		reqHandler := a2asrv.NewHandler(a.Exec, handlerOptions...)
		mux := http.NewServeMux()
		var transport http.Handler
		switch {
		case version == "1.0" && binding == a2a.TransportProtocolJSONRPC:
			mux.Handle("GET "+a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
			transport = a2asrv.NewJSONRPCHandler(reqHandler)
		case version == "1.0" && binding == a2a.TransportProtocolHTTPJSON:
			mux.Handle("GET "+a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
			transport = a2asrv.NewRESTHandler(reqHandler)
		case version == "0.3" && binding == a2a.TransportProtocolJSONRPC:
			mux.Handle("GET "+a2asrv.WellKnownAgentCardPath, a2asrv.NewAgentCardHandler(a2av0.NewStaticAgentCardProducer(card)))
			transport = a2av0.NewJSONRPCHandler(reqHandler)
		case version == "0.3" && binding == a2a.TransportProtocolHTTPJSON:
			mux.Handle("GET "+a2asrv.WellKnownAgentCardPath, a2asrv.NewAgentCardHandler(a2av0.NewStaticAgentCardProducer(card)))
			transport = a2av0.NewRESTHandler(reqHandler)
		default:
			t.Fatalf("no SDK agent for %s %s", version, binding)
		}
		mux.Handle("/", transport)
		return mux
	}
	a.restart = func() { a.handler.Store(ptrTo(build())) }
	a.restart()
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x := sdkExchange{Method: r.Method, Path: r.URL.RequestURI(), Version: r.Header.Get("A2A-Version")}
		if r.Body != nil {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			x.RPC = sdkRPCMethod(b)
		}
		sr := &sdkStatusRecorder{ResponseWriter: w}
		(*a.handler.Load()).ServeHTTP(sr, r)
		x.Status = sr.status
		a.Wire.add(x)
	})
	srv.Start()
	a.srv = srv
	t.Cleanup(srv.Close)
	// Before the server closes (cleanups run last first), end the tasks a
	// failed test left waiting, so that no stream holds Close up.
	t.Cleanup(func() { close(a.Exec.stop) })
	return a
}
