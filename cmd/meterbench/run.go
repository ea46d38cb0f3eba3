package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"time"
)

// options are meterbench's flags.
type options struct {
	conns           int
	duration        time.Duration
	warmup          time.Duration
	maxReqs         int64
	timeout         time.Duration
	rounds          int
	halfLoad        bool
	drainWait       time.Duration
	sseStreams      int
	sseEvents       int
	sseInterval     time.Duration
	agent           string
	nginx           string
	a2a             string
	a2aBuild        bool
	a2aBuildTimeout time.Duration
	extra           targetFlags
	jsonOut         bool
	cpuProfile      string
	serveFor        time.Duration
	logLevel        string
	dataDir         string
	nginxConf       bool
	holdStreams     int
	memProfile      string
	lean            string
	leanSync        string
	otlpSink        bool
	endpoints       int
	limits          bool
	meterProcess    bool
	// meterInProcess says why the meter runs in this process although
	// -meter-process was not switched off (validate).
	meterInProcess  string
	meterProcessSet bool // -meter-process given explicitly
	fleet           bool
}

// targetFlags collects -target name=url.
type targetFlags []namedTarget

type namedTarget struct{ name, url string }

func (t *targetFlags) String() string {
	var parts []string
	for _, n := range *t {
		parts = append(parts, n.name+"="+n.url)
	}
	return strings.Join(parts, ",")
}

func (t *targetFlags) Set(v string) error {
	name, u, ok := strings.Cut(v, "=")
	if !ok || name == "" || u == "" {
		return errors.New("want name=http://127.0.0.1:PORT/path")
	}
	switch name {
	case direct10, nginx10, sdkProxy10, direct03, nginx03, goProxy03, lean10, meter10, meter03, meterREST, meterBridged:
		return fmt.Errorf("%q is a built-in target", name)
	}
	*t = append(*t, namedTarget{name, u})
	return nil
}

func parseOptions(args []string, out io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("meterbench", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.IntVar(&o.conns, "c", 32, "concurrent keep-alive connections per target (1-1024)")
	fs.DurationVar(&o.duration, "d", 5*time.Second, "measured time per target and phase (at most 5m)")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unrecorded load before each max-throughput measurement (at most 1m)")
	fs.Int64Var(&o.maxReqs, "n", 5_000_000, "at most this many requests per target and phase")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Second, "per-request timeout")
	fs.IntVar(&o.rounds, "rounds", 2, "max-throughput rounds: each loads every target in turn, the meter's phases last, each round starting one of them later (1-10)")
	fs.BoolVar(&o.halfLoad, "half-load", true, "also measure latency at half of nginx's max rate (open loop; half the meter's when nginx was not measured)")
	fs.DurationVar(&o.drainWait, "drain-wait", 30*time.Second, "after the max-throughput rounds, wait at most this long (5s-5m) for the meter's spool to drain and the usage API's totals to match the calls answered (the goal is 5s)")
	fs.IntVar(&o.sseStreams, "sse-streams", 16, "concurrent message/stream calls per target for the SSE relay delay (built-in agent); 0 skips it")
	fs.IntVar(&o.sseEvents, "sse-events", 100, "events per stream")
	fs.DurationVar(&o.sseInterval, "sse-interval", 10*time.Millisecond, "time between a stream's events")
	fs.StringVar(&o.agent, "agent", "auto", "the canned agent of the message/send phases: nginx, builtin, or auto (nginx when it runs)")
	fs.StringVar(&o.nginx, "nginx", "nginx", "nginx `program` (a name on PATH or a path) to run as the canned agent and proxy_pass; off skips it")
	fs.StringVar(&o.a2a, "a2a", "a2a", "the a2a-go "+a2aVersion+" CLI `program` whose serve --proxy is compared; a name on PATH or a path, off skips it; by default, when not on PATH, the one built in the user cache dir (agentmarket/a2a-"+a2aVersion+")")
	fs.BoolVar(&o.a2aBuild, "a2a-build", true, "build the a2a CLI into the cache dir when it is not there (needs the Go module proxy)")
	fs.DurationVar(&o.a2aBuildTimeout, "a2a-build-timeout", 10*time.Minute, "at most this long to build the a2a CLI")
	fs.Var(&o.extra, "target", "also load this `name=url` with the 0.3 message/send (e.g. mine=http://127.0.0.1:18081/v03/), compared with meter/0.3; repeatable; a missing one is reported, not fatal")
	fs.BoolVar(&o.jsonOut, "json", false, "print the report as JSON")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the max-throughput rounds (with -serve-for: of the whole serving time) to `file`; goroutines are labelled role=meter|agent|reverse-proxy|loadgen")
	fs.DurationVar(&o.serveFor, "serve-for", 0, "set up, print the targets (and wrk scripts), serve them for this long (at most 30m) and exit without loading them")
	fs.StringVar(&o.logLevel, "log-level", "info", "the meter's log level (its log goes to meter.log in the data dir)")
	fs.BoolVar(&o.nginxConf, "nginx-conf", false, "print the nginx configuration of the canned agent (on "+nginxAgentAddr+") and proxy_pass to it (on "+nginxProxyAddr+"), and exit")
	fs.IntVar(&o.holdStreams, "hold-streams", 0, "also open this many streams through direct and meter at once, held open, and measure the memory each costs (0 skips it; each stream through the meter uses 4 file descriptors in this process, which raises its limit to what they need when it may, else holds as many as fit and says why)")
	fs.StringVar(&o.memProfile, "memprofile", "", "with -hold-streams: write a heap profile to `file` while the streams through the meter are held")
	fs.StringVar(&o.dataDir, "data-dir", "", "the marketplace's data dir; empty = a temporary one, removed at the end")
	fs.StringVar(&o.lean, "lean", "auto", "the lean peer (issue 22, a minimal metering proxy in Go, run as another program, never linked in): a directory of its Go source, built once per version into the user cache dir (agentmarket/leanpeer-<sha256>); an executable; auto: ../shared/bench/leanpeer beside the repository root (found upwards from the working directory, or from this executable's); off skips it")
	fs.StringVar(&o.leanSync, "lean-sync", "wait", "the durability of the lean peer and the meter, compared in the same mode: wait (each answer after the fdatasync covering its usage record: the meter's default, AGENTMARKET_SPOOL_SYNC=each), bg (after write(2), fdatasync every 5 ms: the meter with AGENTMARKET_SPOOL_SYNC=5ms) or off (the lean peer answers after write(2) alone; the meter, which has no such mode, runs as for bg)")
	fs.BoolVar(&o.meterProcess, "meter-process", true, "run the marketplace with its meter in a process of its own (this program again), so that it shares no Go runtime with the load generator and its CPU per call is its own; false: in this process. -cpuprofile and -hold-streams measure this process, so with either the meter runs in this process (the report says so), and -meter-process=true given explicitly with them is refused")
	fs.BoolVar(&o.otlpSink, "otlp-sink", false, "trace the meter: start an OTLP/HTTP receiver that discards what it gets and point the meter's AGENTMARKET_OTEL_ENDPOINT at it (every call traced at AGENTMARKET_OTEL_SAMPLE_RATIO's default of 1), to measure what tracing costs; compare with a run without it")
	fs.IntVar(&o.endpoints, "endpoints", 1, "the meter/1.0 listing's agent endpoints (1-16): with more than 1 the seller names that many (the card's interface, then the same URL with ?replica=2, …), so the meter balances each call among them, to measure what routing costs")
	fs.BoolVar(&o.limits, "limits", false, "the buyer calls under every admission limit, each far above what the run reaches: the org's, the key's and each subscription's rate limits, in-flight caps and monthly budgets (to measure what checking them costs)")
	fs.BoolVar(&o.fleet, "fleet", false, "also start a second meter process on the same database (AGENTMARKET_DATABASE_URL; with AGENTMARKET_REDIS_URL they share their state through Redis too), and, after the other phases, measure one meter alone against both together (half the connections each) and PostgreSQL's row writes per new task, from its statistics (scripts/meterbench-fleet.sh starts the services)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	fs.Visit(func(f *flag.Flag) { o.meterProcessSet = o.meterProcessSet || f.Name == "meter-process" })
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return o, o.validate()
}

func (o *options) validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(o.conns >= 1 && o.conns <= 1024, "-c: must be 1 to 1024")
	check(o.duration > 0 && o.duration <= 5*time.Minute, "-d: must be above 0 and at most 5m")
	check(o.warmup >= 0 && o.warmup <= time.Minute, "-warmup: must be 0 to 1m")
	check(o.maxReqs >= 1, "-n: must be at least 1")
	check(o.timeout > 0 && o.timeout <= time.Minute, "-timeout: must be above 0 and at most 1m")
	check(o.sseStreams >= 0 && o.sseStreams <= 1000, "-sse-streams: must be 0 to 1000")
	check(o.sseEvents >= 2 && o.sseEvents <= 10_000, "-sse-events: must be 2 to 10000")
	check(o.sseInterval >= 0 && time.Duration(o.sseEvents)*o.sseInterval <= 2*time.Minute, "-sse-events × -sse-interval: a stream must last at most 2m")
	check(o.serveFor >= 0 && o.serveFor <= 30*time.Minute, "-serve-for: must be 0 to 30m")
	check(o.holdStreams >= 0 && o.holdStreams <= 100_000, "-hold-streams: must be 0 to 100000")
	check(o.rounds >= 1 && o.rounds <= 10, "-rounds: must be 1 to 10")
	check(o.drainWait >= drainGoal && o.drainWait <= 5*time.Minute, "-drain-wait: must be 5s to 5m")
	check(o.a2aBuildTimeout > 0 && o.a2aBuildTimeout <= 30*time.Minute, "-a2a-build-timeout: must be above 0 and at most 30m")
	check(o.agent == "auto" || o.agent == "nginx" || o.agent == "builtin", "-agent: must be auto, nginx or builtin")
	check(o.agent != "nginx" || o.nginx != "off", "-agent nginx: not with -nginx off")
	switch o.logLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, errors.New("-log-level: must be debug, info, warn or error"))
	}
	check(o.endpoints >= 1 && o.endpoints <= 16, "-endpoints: must be 1 to 16")
	check(o.leanSync == "wait" || o.leanSync == "bg" || o.leanSync == "off", "-lean-sync: must be wait, bg or off")
	check(o.lean != "", "-lean: must be auto, off, a directory or an executable")
	for _, t := range o.extra {
		if _, err := newRequest(t.url, nil, nil); err != nil {
			errs = append(errs, fmt.Errorf("-target %s: %w", t.name, err))
		}
	}
	// -cpuprofile and -hold-streams measure this process: the meter must
	// be in it to be measured.
	var inProcess []string
	if o.cpuProfile != "" {
		inProcess = append(inProcess, "-cpuprofile")
	}
	if o.holdStreams > 0 {
		inProcess = append(inProcess, "-hold-streams")
	}
	if o.meterProcess && len(inProcess) > 0 {
		why := strings.Join(inProcess, " and ") + " measures this process"
		if len(inProcess) > 1 {
			why = strings.Join(inProcess, " and ") + " measure this process"
		}
		if o.meterProcessSet {
			errs = append(errs, fmt.Errorf("-meter-process: %s, so the meter must run in it: leave out -meter-process or set it to false", why))
		} else {
			o.meterProcess, o.meterInProcess = false, why
		}
	}
	if o.fleet && !o.meterProcess {
		errs = append(errs, errors.New("-fleet: both meters run in processes of their own (-meter-process), which -cpuprofile, -hold-streams and -meter-process=false rule out"))
	}
	return errors.Join(errs...)
}

// meterLogFile is the meter's log, in the data dir.
const meterLogFile = "meter.log"

// run is the whole program: set up the targets, load each in turn, report.
// It fails only when what it runs itself fails to start; a peer that is
// not installed or a target that does not answer is reported as such.
// Progress (building the SDK's CLI) goes to stderr.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if o.nginxConf {
		return writeNginxConf(stdout, nginxAgentAddr, nginxProxyAddr)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	dataDir := o.dataDir
	if dataDir == "" {
		if dataDir, err = os.MkdirTemp("", "meterbench-"); err != nil {
			return err
		}
		defer os.RemoveAll(dataDir)
	} else if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(dataDir, meterLogFile))
	if err != nil {
		return err
	}
	defer logFile.Close()

	b, err := setUp(ctx, o, getenv, dataDir, logFile, stderr)
	if err != nil {
		return err
	}
	defer b.stop()

	if o.serveFor > 0 {
		if o.cpuProfile != "" {
			stopProfile, err := startProfile(o.cpuProfile)
			if err != nil {
				return err
			}
			defer stopProfile()
		}
		return b.serveFor(ctx, o.serveFor, dataDir, stdout)
	}
	rep, err := b.measure(ctx, o)
	if err != nil {
		return err
	}
	if b.fleet != nil {
		spec := loadSpec{conns: o.conns, duration: o.duration, warmup: o.warmup, maxReqs: o.maxReqs, timeout: o.timeout}
		if rep.Fleet, err = b.measureFleet(ctx, o, spec, getenv("AGENTMARKET_DATABASE_URL")); err != nil {
			return fmt.Errorf("fleet: %w", err)
		}
	}
	if b.sink != nil {
		rep.Peers = append(rep.Peers, Peer{Name: "otlp-sink", Status: "running", Detail: b.sink.detail()})
	}
	rep.compare(o.extra)
	if o.jsonOut {
		return rep.writeJSON(stdout)
	}
	return rep.writeText(stdout)
}

// measure runs the phases: the max-throughput rounds, the projections'
// check, half load, the SSE relay delay, held streams.
func (b *bench) measure(ctx context.Context, o *options) (*Report, error) {
	rep := &Report{Machine: machine(), Settings: settings(o, b.agentName, b.store), Peers: b.peers}
	spec := loadSpec{conns: o.conns, duration: o.duration, warmup: o.warmup, maxReqs: o.maxReqs, timeout: o.timeout}
	stopProfile := func() {}
	if o.cpuProfile != "" {
		var err error
		if stopProfile, err = startProfile(o.cpuProfile); err != nil {
			return nil, err
		}
	}
	for round := 1; round <= o.rounds; round++ {
		for _, t := range roundOrder(b.targets, round) {
			if t.why != "" {
				if round == 1 {
					rep.Max = append(rep.Max, Result{Target: t.name, Mode: "closed", Unavailable: t.why})
				}
				continue
			}
			s := spec
			s.server = t.pid
			res := closedLoop(ctx, t.name, t.url, t.req, s)
			res.Round = round
			rep.Max = append(rep.Max, res)
		}
	}
	stopProfile()
	rep.Projections = checkProjections(ctx, b.usage, b.metered, o.drainWait)

	if o.halfLoad {
		b.halfLoad(ctx, rep, spec)
	}
	if o.sseStreams > 0 {
		stream := streamSpec{events: o.sseEvents, interval: o.sseInterval}
		for _, t := range b.streams {
			rep.SSE = append(rep.SSE, sseDelays(ctx, t.name, t.url, b.streamHdr, o.sseStreams, stream))
		}
	}
	if o.holdStreams > 0 {
		n, limited := fitStreams(o.holdStreams)
		for _, t := range b.streams {
			profile := ""
			switch t.name {
			case "go-proxy":
				continue
			case "meter":
				profile = o.memProfile
			}
			h := holdStreams(ctx, t.name, t.url, b.streamHdr, n, profile)
			h.Streams, h.Limited = o.holdStreams, limited
			rep.Hold = append(rep.Hold, h)
		}
	}
	return rep, nil
}

// halfLoad measures direct and the meter in an open loop at half of
// nginx's max rate of the same version, or of the meter's when nginx was
// not measured.
func (b *bench) halfLoad(ctx context.Context, rep *Report, spec loadSpec) {
	for _, v := range []struct{ nginx, direct, meter string }{{nginx10, direct10, meter10}, {nginx03, direct03, meter03}} {
		of, basis := halfOfNginx, meanRPS(rep.Max, v.nginx)
		if basis == 0 {
			of, basis = "half the meter's max (no nginx)", meanRPS(rep.Max, v.meter)
		}
		rep.Settings.HalfLoadOf = of
		for _, name := range []string{v.direct, v.meter} {
			if basis == 0 {
				rep.Half = append(rep.Half, Result{Target: name, Mode: "open", Unavailable: "no max rate to take half of"})
				continue
			}
			t := b.target(name)
			half := spec
			half.rate, half.server = basis/2, t.pid
			rep.Half = append(rep.Half, openLoop(ctx, name, t.url, t.req, half))
		}
	}
}

// halfOfNginx is the half-load phase's rate, as the target states it.
const halfOfNginx = "half nginx's max"

// roundOrder is the order of the targets in a round: the peers as given,
// then the meter's phases, each round starting one phase later. Every
// call through the meter leaves a task's row behind, and a row costs more
// as the table grows (a write at a random page of its primary key), so a
// phase measured last meets the largest table: over several rounds each
// phase takes each place in turn, and their ratios compare like with like.
func roundOrder(ts []target, round int) []target {
	var peers, meter []target
	for _, t := range ts {
		if strings.HasPrefix(t.name, "meter/") {
			meter = append(meter, t)
		} else {
			peers = append(peers, t)
		}
	}
	if len(meter) == 0 {
		return ts
	}
	k := (round - 1) % len(meter)
	return append(append(peers, meter[k:]...), meter[:k]...)
}

// meanRPS is name's mean max throughput over the rounds it ran.
func meanRPS(rs []Result, name string) float64 {
	rounds := roundsOf(rs, name)
	var sum float64
	for _, x := range rounds {
		sum += x.RPS
	}
	if len(rounds) == 0 {
		return 0
	}
	return sum / float64(len(rounds))
}

func startProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// serveFor keeps the targets up for d so another load tool (wrk) can be
// pointed at them, and writes a wrk script per target that sends the
// benchmark's request with a messageId of its own each time.
func (b *bench) serveFor(ctx context.Context, d time.Duration, dir string, out io.Writer) error {
	fmt.Fprintf(out, "serving for %s (until then, or until interrupted)\n", d)
	for _, t := range b.targets {
		if t.why != "" {
			fmt.Fprintf(out, "  %-14s %s\n", t.name, t.why)
			continue
		}
		script := filepath.Join(dir, "send-"+strings.NewReplacer("/", "-", ".", "").Replace(t.name)+".lua")
		if err := os.WriteFile(script, wrkScript(t), 0o600); err != nil {
			return err
		}
		fmt.Fprintf(out, "  %-14s wrk -t1 -c32 -d10s --latency -s %s %s\n", t.name, script, t.url)
	}
	pause(ctx, d)
	return nil
}

// wrkScript is a wrk script that sends t's request, each time with a new
// messageId, as the benchmark's own load does (a repeated one would
// measure the meter's replays of the first send): the last 12 hex digits
// of the id are a per-run base (the time wrk started, so two runs against
// one meter do not meet) plus the request's number on its thread.
func wrkScript(t target) []byte {
	var s strings.Builder
	fmt.Fprintf(&s, "-- meterbench: the message/send of %s, a new messageId per request\n", t.name)
	s.WriteString("wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\n")
	keys := make([]string, 0, len(t.headers))
	for k := range t.headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&s, "wrk.headers[%q] = %q\n", k, t.headers[k])
	}
	s.WriteString("local pieces = {")
	at, prev := messageIDOffsets(t.body), 0
	for _, i := range at {
		fmt.Fprintf(&s, "%q, ", t.body[prev:i])
		prev = i + 12
	}
	fmt.Fprintf(&s, "%q}\n", t.body[prev:])
	s.WriteString(`local n, base = 0, (os.time() % 4194304) * 4096
local threads = 0
setup = function(thread) threads = threads + 1; thread:set("tid", threads) end
request = function()
  n = n + 1
  local v = base + (tid or 0) * 1073741824 + n
  local id = string.format("%06x%06x", math.floor(v / 16777216) % 16777216, v % 16777216)
  wrk.body = table.concat(pieces, id)
  return wrk.format()
end
`)
	return []byte(s.String())
}
