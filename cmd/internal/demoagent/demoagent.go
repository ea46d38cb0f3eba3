// Package demoagent provides deterministic, model-free A2A agents that run in
// process: the sellers behind `marketplace --demo`, and the real agents
// behind the metering proxy in tests.
//
// An Agent speaks exactly one protocol version (0.3 or 1.0) over the JSON-RPC
// binding, serves its card at /.well-known/agent-card.json and JSON-RPC at
// POST /. Everything it says follows from the input text: the same messages
// give the same artifacts, the same chunks and the same usage counters.
// Task ids are a per-agent counter behind a random part that differs from
// one agent (and one run) to the next, so they never repeat across
// restarts (Config.StableIDs drops it, for tests). Only timestamps come
// from Config.Now.
//
// Words in the input steer the task, so tests can reach every path:
//   - "clarify" in a message that starts a task: the task stops in
//     input-required with a question; a message carrying the same taskId
//     resumes it.
//   - "slow": the task stays working for Config.SlowDelay before it produces
//     anything, long enough to cancel it or resubscribe to it.
//
// Versions are checked strictly, so a proxy that sends the wrong one fails
// loudly: the A2A-Version header (or query parameter; missing means 0.3)
// must name the version the agent speaks, else VersionNotSupported (-32009);
// a method of the other version is an invalid request (-32600).
package demoagent

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// UsageExtensionURI identifies AgentMarket's usage-reporting extension. An
// agent that reports usage declares it in its card and puts a Usage under
// this key in the metadata of its tasks and of every status and artifact
// event.
const UsageExtensionURI = "https://agentmarket.dev/a2a/extensions/usage/v1"

// ComputeMsPerWord is the compute time charged per output word. It is fixed,
// not measured, so that usage is the same on every machine.
const ComputeMsPerWord = 7

// Behavior is what an agent does with the text it receives.
type Behavior string

const (
	// Summarize answers "Summary of N words: " and the first 12 words.
	Summarize Behavior = "summarize"
	// Translate "translates" into Demo, which is upper-case English.
	Translate Behavior = "translate"
	// ExtractInvoice finds the amounts in the text and totals them.
	ExtractInvoice Behavior = "extract-invoice"
)

// State is a task state, named as in A2A 0.3 whatever version the agent
// speaks, so tests of both versions compare the same values.
type State string

const (
	StateSubmitted     State = "submitted"
	StateWorking       State = "working"
	StateInputRequired State = "input-required"
	StateCompleted     State = "completed"
	StateCanceled      State = "canceled"
)

// Terminal reports whether a task in state s can change no more.
func (s State) Terminal() bool { return s == StateCompleted || s == StateCanceled }

// interrupted reports whether the task waits for the client: streams end
// there, and a blocking send returns.
func (s State) interrupted() bool { return s == StateInputRequired }

// Usage is the value of the usage extension: counters for the whole task so
// far, never deltas, so a client that misses an event loses nothing.
type Usage struct {
	// InputTokens is the number of whitespace-separated words in all the
	// user text the task received.
	InputTokens int64 `json:"inputTokens"`
	// OutputTokens is the number of words the agent produced: artifact
	// chunks and the question of an input-required status.
	OutputTokens int64  `json:"outputTokens"`
	ComputeMs    int64  `json:"computeMs"` // ComputeMsPerWord × OutputTokens
	Model        string `json:"model"`
}

// Config describes one demo agent. Zero fields take defaults that depend on
// Behavior (see Presets for the demo set).
type Config struct {
	// Version is the A2A protocol the agent speaks: "0.3" or "1.0" (a patch
	// number is ignored). Empty means "1.0".
	Version string

	// ReportUsage declares the usage extension in the card and fills it.
	ReportUsage bool
	// StableIDs numbers tasks and contexts task-1, ctx-1, … (for tests
	// that compare wire bytes). Off, every agent's ids carry a random part
	// (task-3f9c21ab-1), so ids never repeat across restarts: a restarted
	// agent handing out task-1 again would answer one buyer with a task id
	// the meter bound to another.
	StableIDs bool
	// RequireActivation reports usage only for tasks whose first request
	// activated the extension through the extension header (X-A2A-Extensions
	// in 0.3, A2A-Extensions in 1.0), as a strict reading of the
	// extension model asks. Off, usage is reported to every caller.
	RequireActivation bool

	Behavior     Behavior // default Summarize
	Name         string
	Description  string
	AgentVersion string // the agent's own version in its card; default "1.0.0"

	SkillID          string
	SkillName        string
	SkillDescription string
	Tags             []string

	// Model is the model name reported in usage, e.g. "demo-summarizer-1".
	Model string

	// StepDelay is the pause between two events of a task (default 0).
	// Tests set it (50ms) to watch events arrive one by one.
	StepDelay time.Duration
	// SlowDelay is how long a task whose text says "slow" stays working
	// before it produces anything. Default: 10 × StepDelay, or 1s when
	// StepDelay is 0 so that "slow" is slow in every configuration.
	SlowDelay time.Duration
	// Chunks is the number of artifact-update events an artifact is split
	// into (default 3; fewer only when the output has fewer words).
	Chunks int

	// RequireAuth, when set, is the bearer token every JSON-RPC request
	// must carry ("Authorization: Bearer <RequireAuth>"); a request without
	// it gets HTTP 401. The card stays public and declares the scheme.
	RequireAuth string

	// NoStreaming declares streaming false in the card and refuses the
	// streaming methods with UnsupportedOperation, as the spec requires.
	NoStreaming bool

	// Now tells the time for status timestamps; default time.Now.
	Now func() time.Time
}

// Validate reports what is wrong with c after defaults are applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []string
	if c.Version != "0.3" && c.Version != "1.0" {
		errs = append(errs, fmt.Sprintf("version %q: must be 0.3 or 1.0", c.Version))
	}
	if _, ok := behaviors[c.Behavior]; !ok {
		errs = append(errs, fmt.Sprintf("behavior %q: must be %s, %s or %s", c.Behavior, Summarize, Translate, ExtractInvoice))
	}
	if c.Chunks < 1 {
		errs = append(errs, "chunks: must be at least 1")
	}
	if c.StepDelay < 0 || c.SlowDelay < 0 {
		errs = append(errs, "delays: must not be negative")
	}
	if len(errs) > 0 {
		return fmt.Errorf("demoagent: invalid config: %s", strings.Join(errs, "; "))
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Version == "" {
		c.Version = "1.0"
	}
	if mm, ok := majorMinor(c.Version); ok {
		c.Version = mm
	}
	if c.Behavior == "" {
		c.Behavior = Summarize
	}
	d, ok := behaviors[c.Behavior]
	if !ok {
		return c
	}
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.Name, d.name)
	def(&c.Description, d.description)
	def(&c.AgentVersion, "1.0.0")
	def(&c.SkillID, string(c.Behavior))
	def(&c.SkillName, d.skillName)
	def(&c.SkillDescription, d.skillDescription)
	def(&c.Model, d.model)
	if c.Tags == nil {
		c.Tags = d.tags
	}
	if c.SlowDelay == 0 {
		c.SlowDelay = 10 * c.StepDelay
		if c.SlowDelay == 0 {
			c.SlowDelay = time.Second
		}
	}
	if c.Chunks == 0 {
		c.Chunks = 3
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Presets returns the demo set, defaults filled in: a Summarizer that speaks
// 0.3 and reports usage, a Translator that speaks 1.0 and reports nothing,
// and an Invoice extractor that speaks 1.0 and reports usage. All stream,
// with a 100ms step so a person sees the events arrive.
func Presets() []Config {
	out := []Config{
		{Version: "0.3", Behavior: Summarize, ReportUsage: true},
		{Version: "1.0", Behavior: Translate},
		{Version: "1.0", Behavior: ExtractInvoice, ReportUsage: true},
	}
	for i := range out {
		out[i].StepDelay = 100 * time.Millisecond
		out[i] = out[i].withDefaults()
	}
	return out
}

// Agent is one demo agent. It is safe for concurrent use.
type Agent struct {
	cfg Config

	mu          sync.Mutex
	baseURL     string
	tasks       map[string]*task
	order       []*task // creation order
	seq         int     // last id number handed out
	idPrefix    string  // between "task-" and the number
	lastHeaders http.Header
}

// New returns an agent for cfg. It panics when cfg.Validate fails: configs
// are written in code, so a bad one is a programming error.
func New(cfg Config) *Agent {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	a := &Agent{cfg: cfg.withDefaults(), tasks: make(map[string]*task)}
	if !cfg.StableIDs {
		var b [4]byte
		_, _ = rand.Read(b[:]) // crypto/rand never fails
		a.idPrefix = hex.EncodeToString(b[:]) + "-"
	}
	return a
}

// Config returns the agent's configuration with defaults applied.
func (a *Agent) Config() Config { return a.cfg }

// SetBaseURL sets the URL the card gives as the agent's JSON-RPC endpoint,
// known only once the server listens; it is used as given. Until it is set,
// the card says "http://" + the Host of each card request + "/".
func (a *Agent) SetBaseURL(u string) {
	a.mu.Lock()
	a.baseURL = u
	a.mu.Unlock()
}

// ServeHTTP serves the card (GET /.well-known/agent-card.json, and the
// pre-0.3 name agent.json) and JSON-RPC (POST /).
func (a *Agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/.well-known/agent-card.json", "/.well-known/agent.json":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		a.serveCard(w, r)
	case "/", "":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		a.serveRPC(w, r)
	default:
		http.NotFound(w, r)
	}
}

// LastHeaders returns the headers of the last JSON-RPC request, including
// one refused for its credentials, so tests can see what a proxy forwarded.
// It returns nil before the first request.
func (a *Agent) LastHeaders() http.Header {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lastHeaders.Clone()
}

// TaskSnapshot is what a test may check about one task.
type TaskSnapshot struct {
	ID        string
	ContextID string
	State     State
	// States lists every state the task has been in, in order, starting
	// with submitted; a state repeats only after another one.
	States []State
	// Input is the text of every user message the task received, in order.
	Input []string
	// Output is the artifact text produced so far.
	Output string
	// Usage is the task's usage so far, computed whether or not it is
	// reported; UsageReported says whether it went on the wire.
	Usage         Usage
	UsageReported bool
	// Activated reports whether the request that created the task
	// activated the usage extension through the extension header.
	Activated bool
	// Headers are those of the request that created the task.
	Headers http.Header
	// Events counts the events the task emitted (its Task snapshots, status
	// and artifact updates).
	Events int
}

// Tasks returns a snapshot of every task, oldest first.
func (a *Agent) Tasks() []TaskSnapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]TaskSnapshot, 0, len(a.order))
	for _, t := range a.order {
		out = append(out, TaskSnapshot{
			ID:            t.id,
			ContextID:     t.contextID,
			State:         t.status.state,
			States:        append([]State(nil), t.states...),
			Input:         append([]string(nil), t.input...),
			Output:        strings.Join(t.outputChunks, ""),
			Usage:         t.usage(a.cfg.Model),
			UsageReported: t.reportUsage,
			Activated:     t.activated,
			Headers:       t.headers.Clone(),
			Events:        len(t.events),
		})
	}
	return out
}

// Task returns the snapshot of the task with the given id.
func (a *Agent) Task(id string) (TaskSnapshot, bool) {
	for _, t := range a.Tasks() {
		if t.ID == id {
			return t, true
		}
	}
	return TaskSnapshot{}, false
}
