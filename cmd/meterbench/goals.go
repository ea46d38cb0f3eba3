package main

import (
	"fmt"
	"math"
)

// The targets' names: the load generator's targets, as reported.
const (
	direct10     = "direct/1.0"
	nginx10      = "nginx/1.0"
	sdkProxy10   = "sdk-proxy/1.0"
	direct03     = "direct/0.3"
	nginx03      = "nginx/0.3"
	goProxy03    = "go-proxy/0.3"
	lean10       = "lean/1.0" // the lean peer (issue 22): A2A 1.0 only
	meter10      = "meter/1.0"
	meter03      = "meter/0.3"
	meterREST    = "meter/rest"
	meterBridged = "meter/bridged"
)

// Ratio is one comparison. With a goal it is one of the product's
// performance targets (shared/product.md, issues 12 and 22); without, it
// is shown for reading the others.
type Ratio struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"` // "x" (a ratio), "ms", "s", "KiB", "µs"
	// Range is the lowest and highest of the value taken round by round,
	// when there were several rounds.
	Range []float64 `json:"range,omitempty"`
	Goal  string    `json:"goal,omitempty"`
	Met   *bool     `json:"met,omitempty"`
	// Reached is the value against its goal, 1 or more where the goal is
	// met: value/goal for an "at least" goal, goal/value for an "at most"
	// one (0 or less: met whatever the goal).
	Reached     float64 `json:"reached,omitempty"`
	NotMeasured string  `json:"not_measured,omitempty"`
	Note        string  `json:"note,omitempty"`
}

// goal is a bound a Ratio is held to.
type goal struct {
	bound   float64
	atMost  bool   // else at least
	exactly bool   // = bound
	unit    string // of bound
}

func (g goal) String() string {
	switch {
	case g.exactly:
		return fmt.Sprintf("= %g%s", g.bound, g.unit)
	case g.atMost && g.unit == "x":
		return fmt.Sprintf("<= %g%s", g.bound, g.unit)
	case g.atMost:
		return fmt.Sprintf("<= %g %s", g.bound, g.unit)
	}
	return fmt.Sprintf(">= %g%s", g.bound, g.unit)
}

// judge sets x's goal, verdict and Reached.
func (g goal) judge(x Ratio) Ratio {
	x.Goal = g.String()
	if x.NotMeasured != "" {
		return x
	}
	var met bool
	switch {
	case g.exactly:
		met = x.Value == g.bound
	case g.atMost:
		met = x.Value <= g.bound
		if x.Value > 0 {
			x.Reached = g.bound / x.Value
		}
	default:
		met = x.Value >= g.bound
		x.Reached = x.Value / g.bound
	}
	x.Met = &met
	return x
}

// roundsOf is name's measured results, round by round.
func roundsOf(rs []Result, name string) map[int]Result {
	out := map[int]Result{}
	for _, x := range rs {
		if x.Target == name && x.Unavailable == "" && x.OK > 0 {
			out[x.Round] = x
		}
	}
	return out
}

// whyMissing says why name has no figure: the reason it was unavailable,
// or that it did not run.
func whyMissing(rs []Result, name string) string {
	for _, x := range rs {
		if x.Target == name && x.Unavailable != "" {
			return name + ": " + x.Unavailable
		}
		if x.Target == name && x.OK == 0 {
			return name + " answered no call"
		}
	}
	return name + " was not measured"
}

// perRound combines two targets' results round by round: the value over
// the rounds both ran (f of their means) and its range (f round by round).
func perRound(rs []Result, a, b string, f func(x, y Result) float64) (v float64, rng []float64, why string) {
	ra, rb := roundsOf(rs, a), roundsOf(rs, b)
	switch {
	case len(ra) == 0:
		return 0, nil, whyMissing(rs, a)
	case len(rb) == 0:
		return 0, nil, whyMissing(rs, b)
	}
	var ma, mb Result
	lo, hi, n := math.Inf(1), math.Inf(-1), 0
	for round, x := range ra {
		y, ok := rb[round]
		if !ok {
			continue
		}
		ma.addFigures(x)
		mb.addFigures(y)
		v := f(x, y)
		lo, hi, n = min(lo, v), max(hi, v), n+1
	}
	if n == 0 {
		return 0, nil, a + " and " + b + " never ran in the same round"
	}
	ma.divFigures(n)
	mb.divFigures(n)
	if n > 1 {
		rng = []float64{lo, hi}
	}
	return f(ma, mb), rng, ""
}

// addFigures adds x's figures that perRound takes the mean of to r's.
func (r *Result) addFigures(x Result) {
	r.RPS += x.RPS
	r.CPUPerCall += x.CPUPerCall
	r.ServerCPUPerCall += x.ServerCPUPerCall
	r.P99 += x.P99
	r.Max += x.Max
}

func (r *Result) divFigures(n int) {
	d := float64(n)
	r.RPS, r.CPUPerCall, r.ServerCPUPerCall, r.P99, r.Max = r.RPS/d, r.CPUPerCall/d, r.ServerCPUPerCall/d, r.P99/d, r.Max/d
}

// worst is perRound's value in the worst round: the top of its range
// (with one round, the value itself).
func worst(v float64, rng []float64) float64 {
	if len(rng) == 2 {
		return rng[1]
	}
	return v
}

func throughput(x, y Result) float64 { return x.RPS / y.RPS }

func cpuDiff(x, y Result) float64 { return x.CPUPerCall - y.CPUPerCall }

func p99Ratio(x, y Result) float64 { return x.P99 / y.P99 }

func serverCPURatio(x, y Result) float64 { return x.ServerCPUPerCall / y.ServerCPUPerCall }

func ownCPU(x, _ Result) float64 { return x.ServerCPUPerCall }

// noServerCPU says why name has no CPU time of its own process in some
// round it ran: not run, or not read (another process's CPU is read
// from Linux's /proc).
func noServerCPU(rs []Result, name string) string {
	rounds := roundsOf(rs, name)
	if len(rounds) == 0 {
		return whyMissing(rs, name)
	}
	for _, x := range rounds {
		if x.ServerCPUPerCall <= 0 {
			return name + ": its process's CPU time was not read (/proc/PID/stat, Linux only)"
		}
	}
	return ""
}

// leanNote says what the durability mode (-lean-sync) means for the lean
// peer and for the meter, which runs in the same mode (meterSync).
func leanNote(sync string) string {
	switch sync {
	case "wait":
		return "both answer after the group-committed fdatasync covering the call's usage record"
	case "off":
		return "the lean peer answers after write(2) and never fdatasyncs; the meter after write(2), fdatasync every 5 ms"
	}
	return "both answer after write(2) and fdatasync every 5 ms in the background"
}

// compare computes the targets and the other comparisons from the
// results. Every target gets a row, measured or not.
func (r *Report) compare(extra []namedTarget) {
	var out []Ratio
	ratio := func(name, a, b string, g *goal) {
		v, rng, why := perRound(r.Max, a, b, throughput)
		x := Ratio{Name: name, Value: v, Unit: "x", Range: rng, NotMeasured: why}
		if g != nil {
			x = g.judge(x)
		}
		out = append(out, x)
	}
	atLeast := func(b float64) *goal { return &goal{bound: b, unit: "x"} }
	// 0.9x on the embedded default, 0.8x on PostgreSQL + ClickHouse.
	nginxGoal, store := 0.9, r.Settings.Store
	if store != "" && store != storeEmbedded {
		nginxGoal = 0.8
	}
	ratio("message/send 1.0 ("+store+"): meter ÷ nginx proxy_pass", meter10, nginx10, atLeast(nginxGoal))
	ratio("message/send 0.3 ("+store+"): meter ÷ nginx proxy_pass", meter03, nginx03, atLeast(nginxGoal))
	// Issue 22: the lean peer, the minimum a metering proxy in Go costs.
	sync := r.Settings.LeanSync
	ratio("message/send 1.0: meter ÷ lean peer (-sync "+sync+")", meter10, lean10, atLeast(0.9))
	out[len(out)-1].Note = leanNote(sync)
	ratio("message/send 0.3: meter ÷ lean peer (1.0, -sync "+sync+")", meter03, lean10, atLeast(0.9))
	out[len(out)-1].Note = "the lean peer speaks only A2A 1.0: meter/0.3 against lean/1.0"
	ratio("message/send 1.0: meter ÷ the SDK's serve --proxy", meter10, sdkProxy10, atLeast(3))
	ratio("message/send 1.0 (issue 12): meter ÷ the SDK's serve --proxy", meter10, sdkProxy10, atLeast(5))
	ratio("HTTP+JSON (REST buyer, 1.0 JSON-RPC agent): meter ÷ nginx 1.0", meterREST, nginx10, atLeast(0.7))
	ratio("bridged (0.3 buyer, 1.0 agent): meter ÷ nginx 1.0", meterBridged, nginx10, atLeast(0.7))
	ratio("HTTP+JSON: meter/rest ÷ meter/1.0", meterREST, meter10, atLeast(0.8))
	ratio("bridged: meter/bridged ÷ meter/1.0", meterBridged, meter10, atLeast(0.8))

	added := goal{bound: 1, atMost: true, unit: "ms"}
	for _, v := range []struct{ meter, direct string }{{meter10, direct10}, {meter03, direct03}} {
		of := r.Settings.HalfLoadOf
		if of == "" {
			of = halfOfNginx
		}
		x := Ratio{Name: fmt.Sprintf("open loop at %s: %s p99 − %s p99", of, v.meter, v.direct), Unit: "ms"}
		hm, hd := find(r.Half, v.meter), find(r.Half, v.direct)
		switch {
		case len(r.Half) == 0:
			x.NotMeasured = "no half-load phase (-half-load=false)"
		case hm == nil:
			x.NotMeasured = whyMissing(r.Half, v.meter)
		case hd == nil:
			x.NotMeasured = whyMissing(r.Half, v.direct)
		default:
			x.Value = hm.P99 - hd.P99
		}
		out = append(out, added.judge(x))
	}
	p99Goal := goal{bound: 5, atMost: true, unit: "ms"}
	for _, name := range []string{meter10, meter03} {
		x := Ratio{Name: fmt.Sprintf("closed loop, %d connections: %s p99 (worst round)", r.Settings.Connections, name), Unit: "ms"}
		rounds := roundsOf(r.Max, name)
		for _, res := range rounds {
			x.Value = max(x.Value, res.P99)
		}
		if len(rounds) == 0 {
			x.NotMeasured = whyMissing(r.Max, name)
		}
		out = append(out, p99Goal.judge(x))
	}
	v, rng, why := perRound(r.Max, meter10, lean10, p99Ratio)
	out = append(out, goal{bound: 2, atMost: true, unit: "x"}.judge(Ratio{Name: "closed loop p99: meter/1.0 ÷ lean/1.0 (worst round)",
		Value: worst(v, rng), Unit: "x", Range: rng, NotMeasured: why}))
	maxGoal := goal{bound: 50, atMost: true, unit: "ms"}
	for _, name := range []string{meter10, meter03} {
		x := Ratio{Name: fmt.Sprintf("closed loop max latency: %s (worst round)", name), Unit: "ms"}
		rounds := roundsOf(r.Max, name)
		for _, res := range rounds {
			x.Value = max(x.Value, res.Max)
		}
		if len(rounds) == 0 {
			x.NotMeasured = whyMissing(r.Max, name)
		}
		out = append(out, maxGoal.judge(x))
	}
	out = append(out, goal{bound: 1.5, atMost: true, unit: "x"}.judge(r.serverCPURatio()))
	out = append(out, r.projectionRatios()...)

	sse := Ratio{Name: "SSE: added delay p99, meter − direct", Unit: "ms"}
	if sm, sd := findSSE(r.SSE, "meter"), findSSE(r.SSE, "direct"); sm != nil && sd != nil {
		sse.Value = sm.P99 - sd.P99
	} else {
		sse.NotMeasured = "no SSE phase (-sse-streams 0) or no events"
	}
	out = append(out, added.judge(sse))
	held := Ratio{Name: "held stream: the meter's own heap+stacks (meter − direct)", Unit: "KiB", NotMeasured: "no held streams (-hold-streams 0)"}
	var hm, hd *HoldResult
	for i := range r.Hold {
		switch r.Hold[i].Target {
		case "meter":
			hm = &r.Hold[i]
		case "direct":
			hd = &r.Hold[i]
		}
	}
	if hm != nil && hd != nil && hm.Opened > 0 && hd.Opened > 0 {
		held.Value, held.NotMeasured = hm.HeapStackKB-hd.HeapStackKB, ""
		held.Note = fmt.Sprintf("%d streams at once", hm.Opened)
		if hm.Limited != "" {
			held.Note += " (" + hm.Limited + ")"
		}
	}
	out = append(out, goal{bound: 30, atMost: true, unit: "KiB"}.judge(held))

	// Not targets: to read the others by.
	ratio("throughput meter/1.0 ÷ direct/1.0", meter10, direct10, nil)
	ratio("throughput meter/0.3 ÷ direct/0.3", meter03, direct03, nil)
	ratio("throughput meter/0.3 ÷ a Go httputil reverse proxy", meter03, goProxy03, nil)
	for _, t := range extra {
		ratio("throughput meter/0.3 ÷ "+t.name, meter03, t.name, nil)
	}
	ratio("throughput lean/1.0 ÷ nginx/1.0", lean10, nginx10, nil)
	for _, c := range []struct{ meter, direct string }{{meter10, direct10}, {meter03, direct03}, {meterREST, direct10}, {meterBridged, direct10}} {
		if r.Settings.MeterProcess {
			out = append(out, ownCPURatio("the meter's CPU per call, "+c.meter+" (its own process)", r.Max, c.meter))
			continue
		}
		v, rng, why := perRound(r.Max, c.meter, c.direct, cpuDiff)
		out = append(out, Ratio{Name: fmt.Sprintf("the meter's CPU per call, %s (process CPU: %s − %s)", c.meter, c.meter, c.direct),
			Value: v, Unit: "µs", Range: rng, NotMeasured: why})
	}
	out = append(out, ownCPURatio("the lean peer's CPU per call, lean/1.0 (its own process)", r.Max, lean10),
		ownCPURatio("the SDK proxy's CPU per call, sdk-proxy/1.0 (its own process)", r.Max, sdkProxy10))
	if sm, sd := findSSE(r.SSE, "meter"), findSSE(r.SSE, "direct"); sm != nil && sd != nil {
		out = append(out, Ratio{Name: "SSE: added delay p50, meter − direct", Value: sm.P50 - sd.P50, Unit: "ms"})
	}
	r.Ratios = out
}

// serverCPURatio is the meter's CPU per call in its own process over the
// lean peer's (issue 22): measured only with the meter in a process of
// its own.
func (r *Report) serverCPURatio() Ratio {
	x := Ratio{Name: "server CPU per call: meter/1.0 ÷ lean/1.0", Unit: "x"}
	switch {
	case !r.Settings.MeterProcess && r.Settings.MeterInProcess != "":
		x.NotMeasured = "the meter ran in this process: " + r.Settings.MeterInProcess
	case !r.Settings.MeterProcess:
		x.NotMeasured = "the meter ran in this process (-meter-process=false)"
	default:
		for _, name := range []string{meter10, lean10} {
			if why := noServerCPU(r.Max, name); why != "" {
				x.NotMeasured = why
				return x
			}
		}
		x.Value, x.Range, x.NotMeasured = perRound(r.Max, meter10, lean10, serverCPURatio)
	}
	return x
}

// ownCPURatio is name's CPU per call in its own process, the mean over
// the rounds.
func ownCPURatio(title string, rs []Result, name string) Ratio {
	x := Ratio{Name: title, Unit: "µs", NotMeasured: noServerCPU(rs, name)}
	if x.NotMeasured == "" {
		x.Value, x.Range, x.NotMeasured = perRound(rs, name, name, ownCPU)
	}
	return x
}

// projectionRatios are the targets "the projections keep up": the spool
// drained within drainGoal, and the usage API's totals equal the calls
// and tokens answered.
func (r *Report) projectionRatios() []Ratio {
	drain := Ratio{Name: "spool drained after the meter's max-rate phases", Unit: "s"}
	calls := Ratio{Name: "usage API calls ÷ calls the meter answered", Unit: "x"}
	tokens := Ratio{Name: "usage API tokens ÷ tokens the meter's answers reported", Unit: "x"}
	exactlyOne := goal{bound: 1, exactly: true, unit: "x"}
	p := r.Projections
	switch {
	case p == nil:
		drain.NotMeasured = "no meter phase ran"
	case p.Unavailable != "":
		drain.NotMeasured = p.Unavailable
	case p.DrainSeconds < 0:
		drain.Value = p.WaitSeconds
		drain.Note = fmt.Sprintf("%d rows still in the spool after %gs", p.RowsLeft, p.WaitSeconds)
	default:
		drain.Value = p.DrainSeconds
		drain.Note = fmt.Sprintf("%d rows in the spool when the load stopped", p.SpoolRows)
	}
	if drain.NotMeasured != "" {
		calls.NotMeasured, tokens.NotMeasured = drain.NotMeasured, drain.NotMeasured
		return []Ratio{drainGoalOf.judge(drain), exactlyOne.judge(calls), exactlyOne.judge(tokens)}
	}
	var answered, got, wantTok, gotTok, unknown int64
	equal := len(p.Usage) > 0
	for _, u := range p.Usage {
		answered += u.Answered
		unknown += u.Unknown
		got += u.Calls
		wantTok += u.Answered * (answerInputTokens + answerOutputTokens)
		gotTok += u.InTokens + u.OutTokens
		equal = equal && u.Equal()
		if u.Error != "" {
			calls.NotMeasured, tokens.NotMeasured = u.Error, u.Error
		}
	}
	if answered > 0 {
		calls.Value, tokens.Value = float64(got)/float64(answered), float64(gotTok)/float64(wantTok)
	}
	calls.Note = fmt.Sprintf("%d billed, %d answered", got, answered)
	if unknown > 0 {
		calls.Note += fmt.Sprintf(", %d sent without an answer read", unknown)
	}
	tokens.Note = fmt.Sprintf("%d billed, %d reported", gotTok, wantTok)
	calls, tokens = exactlyOne.judge(calls), exactlyOne.judge(tokens)
	for _, x := range []*Ratio{&calls, &tokens} {
		if x.Met != nil {
			*x.Met = equal // every listing to the call and the token, not only the sums
		}
	}
	return []Ratio{drainGoalOf.judge(drain), calls, tokens}
}

var drainGoalOf = goal{bound: drainGoal.Seconds(), atMost: true, unit: "s"}
