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
	"strings"
	"time"
)

// options are meterbench's flags.
type options struct {
	conns       int
	duration    time.Duration
	warmup      time.Duration
	maxReqs     int64
	timeout     time.Duration
	halfLoad    bool
	sseStreams  int
	sseEvents   int
	sseInterval time.Duration
	agentURL    string
	extra       targetFlags
	jsonOut     bool
	cpuProfile  string
	serveFor    time.Duration
	logLevel    string
	dataDir     string
	nginxConf   bool
	holdStreams int
	memProfile  string
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
	case "direct", "proxy", "meter":
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
	fs.BoolVar(&o.halfLoad, "half-load", true, "also measure latency at half the meter's max throughput (open loop)")
	fs.IntVar(&o.sseStreams, "sse-streams", 16, "concurrent message/stream calls per target for the SSE relay delay; 0 skips it (built-in agent only)")
	fs.IntVar(&o.sseEvents, "sse-events", 100, "events per stream")
	fs.DurationVar(&o.sseInterval, "sse-interval", 10*time.Millisecond, "time between a stream's events")
	fs.StringVar(&o.agentURL, "agent", "", "use the canned agent at `url` (its card at /.well-known/agent-card.json) instead of the built-in one, e.g. nginx with return 200 (see -nginx-conf)")
	fs.Var(&o.extra, "target", "also load this `name=url` (e.g. nginx=http://127.0.0.1:18081/), compared with the meter (a name containing nginx is held to the 0.9x target); repeatable; a missing one is reported, not fatal")
	fs.BoolVar(&o.jsonOut, "json", false, "print the report as JSON")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the meter's max-throughput phase (with -serve-for: of the whole serving time) to `file`; goroutines are labelled role=meter|agent|reverse-proxy|loadgen")
	fs.DurationVar(&o.serveFor, "serve-for", 0, "set up, print the targets (and a wrk script), serve them for this long (at most 30m) and exit without loading them")
	fs.StringVar(&o.logLevel, "log-level", "info", "the meter's log level (its log goes to meter.log in the data dir)")
	fs.BoolVar(&o.nginxConf, "nginx-conf", false, "print an nginx configuration serving the same canned agent on "+nginxAgentAddr+" and proxy_pass to it on "+nginxProxyAddr+", and exit")
	fs.IntVar(&o.holdStreams, "hold-streams", 0, "also open this many streams through direct and meter at once, held open, and measure the memory each costs (0 skips it; each stream through the meter uses 4 file descriptors in this process)")
	fs.StringVar(&o.memProfile, "memprofile", "", "with -hold-streams: write a heap profile to `file` while the streams through the meter are held")
	fs.StringVar(&o.dataDir, "data-dir", "", "the marketplace's data dir; empty = a temporary one, removed at the end")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
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
	check(o.holdStreams >= 0 && o.holdStreams <= 20_000, "-hold-streams: must be 0 to 20000")
	switch o.logLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, errors.New("-log-level: must be debug, info, warn or error"))
	}
	if o.agentURL != "" {
		if _, err := newRequest(o.agentURL, nil, nil); err != nil {
			errs = append(errs, fmt.Errorf("-agent: %w", err))
		}
	}
	for _, t := range o.extra {
		if _, err := newRequest(t.url, nil, nil); err != nil {
			errs = append(errs, fmt.Errorf("-target %s: %w", t.name, err))
		}
	}
	return errors.Join(errs...)
}

// run is the whole program: set up the targets, load each in turn, report.
// It fails only when the set-up fails; a target that does not answer is
// reported as unavailable.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	o, err := parseOptions(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if o.nginxConf {
		return writeNginxConf(stdout)
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
	logFile, err := os.Create(filepath.Join(dataDir, "meter.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()

	stream := streamSpec{events: o.sseEvents, interval: o.sseInterval}
	agentURL := o.agentURL
	if agentURL == "" {
		a, err := startAgent(ctx, stream)
		if err != nil {
			return fmt.Errorf("canned agent: %w", err)
		}
		agentURL = a.URL
	}
	proxyURL, err := startReverseProxy(ctx, agentURL)
	if err != nil {
		return fmt.Errorf("reverse proxy: %w", err)
	}
	m, err := startMarket(ctx, marketEnv(getenv, dataDir, o.logLevel), logFile)
	if err != nil {
		return fmt.Errorf("marketplace: %w", err)
	}
	defer m.stop()
	sub, err := subscribe(ctx, m.URL, agentURL)
	if err != nil {
		return err
	}

	body := sendBody()
	auth := map[string]string{"Authorization": "Bearer " + sub.Key}
	targets := []namedTarget{{"direct", agentURL}, {"proxy", proxyURL}, {"meter", sub.Endpoint}}
	targets = append(targets, o.extra...)
	reqs := map[string]request{}
	for _, t := range targets {
		if reqs[t.name], err = newRequest(t.url, body, auth); err != nil {
			return err
		}
	}
	for _, name := range []string{"direct", "meter"} {
		if why := probe(reqs[name], o.timeout); why != "" {
			return fmt.Errorf("%s target %s %s", name, reqs[name].addr, why)
		}
	}

	if o.serveFor > 0 {
		if o.cpuProfile != "" {
			stopProfile, err := startProfile(o.cpuProfile)
			if err != nil {
				return err
			}
			defer stopProfile()
		}
		return serveFor(ctx, o.serveFor, dataDir, targets, body, auth, stdout)
	}

	rep := &Report{Machine: machine(), Settings: settings(o, agentURL)}
	spec := loadSpec{conns: o.conns, duration: o.duration, warmup: o.warmup, maxReqs: o.maxReqs, timeout: o.timeout}
	for _, t := range targets {
		var stopProfile func()
		if t.name == "meter" && o.cpuProfile != "" {
			if stopProfile, err = startProfile(o.cpuProfile); err != nil {
				return err
			}
		}
		rep.Max = append(rep.Max, closedLoop(ctx, t.name, t.url, reqs[t.name], spec))
		if stopProfile != nil {
			stopProfile()
		}
	}
	if meter := rep.result("meter"); o.halfLoad && meter != nil && meter.RPS > 0 {
		half := spec
		half.rate = meter.RPS / 2
		for _, name := range []string{"direct", "proxy", "meter"} {
			rep.Half = append(rep.Half, openLoop(ctx, name, urlOf(targets, name), reqs[name], half))
		}
	}
	if o.sseStreams > 0 && o.agentURL == "" {
		for _, name := range []string{"direct", "proxy", "meter"} {
			rep.SSE = append(rep.SSE, sseDelays(ctx, name, urlOf(targets, name), auth, o.sseStreams, stream))
		}
	}
	if o.holdStreams > 0 && o.agentURL == "" {
		for _, name := range []string{"direct", "meter"} {
			profile := ""
			if name == "meter" {
				profile = o.memProfile
			}
			rep.Hold = append(rep.Hold, holdStreams(ctx, name, urlOf(targets, name), auth, o.holdStreams, profile))
		}
	}
	rep.compare(o.extra)
	if o.jsonOut {
		return rep.writeJSON(stdout)
	}
	return rep.writeText(stdout)
}

func urlOf(ts []namedTarget, name string) string {
	for _, t := range ts {
		if t.name == name {
			return t.url
		}
	}
	return ""
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
// pointed at them, and writes a wrk script that sends the same request.
func serveFor(ctx context.Context, d time.Duration, dir string, targets []namedTarget, body []byte, headers map[string]string, out io.Writer) error {
	script := filepath.Join(dir, "send.lua")
	var b strings.Builder
	b.WriteString("-- meterbench: the 1 KiB message/send, with the buyer's key\nwrk.method = \"POST\"\n")
	fmt.Fprintf(&b, "wrk.body = %q\n", body)
	b.WriteString("wrk.headers[\"Content-Type\"] = \"application/json\"\n")
	for k, v := range headers {
		fmt.Fprintf(&b, "wrk.headers[%q] = %q\n", k, v)
	}
	if err := os.WriteFile(script, []byte(b.String()), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(out, "serving for %s (until then, or until interrupted)\n", d)
	for _, t := range targets {
		fmt.Fprintf(out, "  %-8s %s\n", t.name, t.url)
	}
	fmt.Fprintf(out, "  wrk script: %s\n  e.g. wrk -t1 -c32 -d10s -s %s %s\n", script, script, urlOf(targets, "meter"))
	pause(ctx, d)
	return nil
}
