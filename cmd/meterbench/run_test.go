package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func noEnv(string) string { return "" }

// runJSON runs meterbench with args and -json and returns its report.
func runJSON(t *testing.T, args ...string) *Report {
	t.Helper()
	var out, progress bytes.Buffer
	if err := run(context.Background(), append([]string{"-json"}, args...), noEnv, &out, &progress); err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, out.String(), progress.String())
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out.String())
	}
	return &rep
}

// checkMeasured fails t unless every target named has a clean result.
func checkMeasured(t *testing.T, rep *Report, names ...string) {
	t.Helper()
	for _, name := range names {
		r := rep.result(name)
		if r == nil {
			t.Errorf("no %s result in %+v", name, rep.Max)
			continue
		}
		if r.NetErrors+r.BadStatus+r.RPCErrors > 0 || r.P50 <= 0 || r.P99 < r.P50 || r.CPUPerCall <= 0 {
			t.Errorf("%s: %+v", name, *r)
		}
	}
}

func ratioNamed(rep *Report, prefix string) *Ratio {
	for i := range rep.Ratios {
		if strings.HasPrefix(rep.Ratios[i].Name, prefix) {
			return &rep.Ratios[i]
		}
	}
	return nil
}

// TestRunSmall runs the whole benchmark briefly, as on a machine without
// nginx or the SDK's CLI: every target the tool runs itself answers
// through its path (the meter with real listings, a subscription and a
// key, in 1.0, 0.3, HTTP+JSON and bridged), the missing peers and a
// missing extra target are reported without failing the run, the usage
// API's totals equal the calls answered, and every target has its row.
func TestRunSmall(t *testing.T) {
	rep := runJSON(t, "-c", "2", "-d", "300ms", "-warmup", "100ms", "-n", "2000", "-rounds", "1",
		"-nginx", "/nonexistent/nginx", "-a2a", "/nonexistent/a2a", "-lean", "/nonexistent/leanpeer",
		"-sse-streams", "2", "-sse-events", "4", "-sse-interval", "5ms", "-hold-streams", "20", "-target", "gone=http://127.0.0.1:1/")
	if rep.Settings.Agent != "built-in" {
		t.Errorf("canned agent %q, want built-in", rep.Settings.Agent)
	}
	for _, p := range rep.Peers {
		if p.Status != "not installed" || !strings.Contains(p.Detail, "/nonexistent/") {
			t.Errorf("peer %+v, want not installed", p)
		}
	}
	if len(rep.Peers) != 3 {
		t.Errorf("peers %+v, want nginx, sdk-proxy and lean-peer", rep.Peers)
	}
	// -hold-streams measures this process: the meter runs in it.
	if s := rep.Settings; s.MeterProcess || !strings.Contains(s.MeterInProcess, "-hold-streams") {
		t.Errorf("settings %+v: want the meter in this process for -hold-streams", s)
	}
	checkMeasured(t, rep, direct10, direct03, goProxy03, meter10, meter03, meterREST, meterBridged)
	for _, name := range []string{nginx10, nginx03, sdkProxy10, lean10} {
		if i := slices.IndexFunc(rep.Max, func(r Result) bool { return r.Target == name }); i < 0 || !strings.Contains(rep.Max[i].Unavailable, "not installed") {
			t.Errorf("%s: want reported not installed in %+v", name, rep.Max)
		}
	}
	if i := slices.IndexFunc(rep.Max, func(r Result) bool { return r.Target == "gone" }); i < 0 || !strings.Contains(rep.Max[i].Unavailable, "unreachable") {
		t.Errorf("missing target: want unreachable in %+v", rep.Max)
	}
	for _, name := range []string{direct10, meter10, direct03, meter03} {
		if h := find(rep.Half, name); h == nil || h.OK == 0 {
			t.Errorf("%s: no half-load result in %+v", name, rep.Half)
		}
	}
	for _, name := range []string{"direct", "go-proxy", "meter"} {
		if s := findSSE(rep.SSE, name); s == nil || s.Events != 2*4 || s.Errors != 0 {
			t.Errorf("%s: SSE %+v", name, s)
		}
	}
	for _, name := range []string{"direct", "meter"} {
		i := slices.IndexFunc(rep.Hold, func(h HoldResult) bool { return h.Target == name })
		if i < 0 || rep.Hold[i].Opened != 20 || rep.Hold[i].Unavailable != "" || rep.Hold[i].Goroutines <= 0 {
			t.Errorf("%s: held streams %+v", name, rep.Hold)
		}
	}
	p := rep.Projections
	if p == nil || p.Unavailable != "" || p.DrainSeconds < 0 || len(p.Usage) != 2 {
		t.Fatalf("projections %+v", p)
	}
	for _, u := range p.Usage {
		if !u.Equal() || u.Answered == 0 || u.Unknown != 0 {
			t.Errorf("usage of %v: %+v", u.Targets, u)
		}
	}
	var goals int
	for _, r := range rep.Ratios {
		if r.Goal != "" {
			goals++
		}
	}
	if goals != 23 {
		t.Errorf("%d targets with a goal, want 23: %+v", goals, rep.Ratios)
	}
	for prefix, measured := range map[string]bool{
		"message/send 1.0 (embedded): meter ÷ nginx": false, "message/send 1.0: meter ÷ the SDK's": false,
		"closed loop": true, "open loop": true, "spool drained": true, "usage API calls": true, "usage API tokens": true,
		"SSE: added delay p99": true, "held stream": true, "the meter's CPU per call, meter/rest": true,
		"message/send 1.0: meter ÷ lean peer": false, "HTTP+JSON: meter/rest ÷ meter/1.0": true, "closed loop max latency: meter/0.3": true,
		"server CPU per call": false,
	} {
		r := ratioNamed(rep, prefix)
		switch {
		case r == nil:
			t.Errorf("no ratio %q in %+v", prefix, rep.Ratios)
		case measured != (r.NotMeasured == ""):
			t.Errorf("%q measured %t, want %t: %+v", prefix, r.NotMeasured == "", measured, *r)
		}
	}
	for _, prefix := range []string{"usage API calls", "usage API tokens"} {
		if r := ratioNamed(rep, prefix); r == nil || r.Met == nil || !*r.Met {
			t.Errorf("%s: %+v", prefix, r)
		}
	}
}

// TestRunPeers runs the benchmark briefly with the peers this machine
// has (nginx on PATH, the a2a CLI on PATH or already built, it is not
// built here; the lean peer beside the repository, built when it can
// be): each is started, loaded and stopped. The meter runs in its own
// process (this test binary again, see TestMain).
func TestRunPeers(t *testing.T) {
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Skip("nginx is not installed")
	}
	rep := runJSON(t, "-c", "2", "-d", "300ms", "-warmup", "100ms", "-n", "2000", "-rounds", "2",
		"-a2a-build=false", "-half-load=false", "-sse-streams", "0")
	if rep.Settings.Agent != "nginx return 200" {
		t.Errorf("canned agent %q, want nginx", rep.Settings.Agent)
	}
	checkMeasured(t, rep, direct10, nginx10, direct03, nginx03, meter10, meter03, meterREST, meterBridged)
	if !rep.Settings.MeterProcess {
		t.Errorf("settings %+v: want the meter in its own process", rep.Settings)
	}
	linux := runtime.GOOS == "linux"
	serverCPU := func(name string) {
		if r := rep.result(name); r != nil && linux && r.ServerCPUPerCall <= 0 {
			t.Errorf("%s: no CPU of its own process: %+v", name, *r)
		}
	}
	serverCPU(meter10)
	for _, p := range rep.Peers {
		switch {
		case p.Name == "sdk-proxy" && p.Status == "running":
			checkMeasured(t, rep, sdkProxy10)
			serverCPU(sdkProxy10)
		case p.Name == "lean-peer" && p.Status == "running":
			checkMeasured(t, rep, lean10)
			serverCPU(lean10)
			for _, prefix := range []string{"message/send 1.0: meter ÷ lean peer", "closed loop p99: meter/1.0 ÷ lean/1.0", "server CPU per call"} {
				if r := ratioNamed(rep, prefix); r == nil || (r.NotMeasured != "" && linux) {
					t.Errorf("%s: %+v", prefix, r)
				}
			}
		case p.Name == "lean-peer":
			t.Logf("lean peer %s: %s", p.Status, p.Detail)
		}
	}
	for _, prefix := range []string{"message/send 1.0 (embedded): meter ÷ nginx", "message/send 0.3 (embedded): meter ÷ nginx", "HTTP+JSON", "bridged"} {
		if r := ratioNamed(rep, prefix); r == nil || r.NotMeasured != "" || r.Met == nil || len(r.Range) != 2 {
			t.Errorf("%s: %+v", prefix, r)
		}
	}
	if p := rep.Projections; p == nil || len(p.Usage) != 2 || !allEqual(p.Usage) {
		t.Errorf("projections %+v", p)
	}
}

func TestOnlyLoopback(t *testing.T) {
	for _, args := range [][]string{
		{"-target", "far=http://10.0.0.1:80/"},
		{"-agent", "http://example.com/"},
		{"-c", "0"},
		{"-d", "1h"},
		{"-rounds", "0"},
		{"-drain-wait", "1s"},
		{"-agent", "nginx", "-nginx", "off"},
		{"-target", "meter/1.0=http://127.0.0.1:1/"},
		{"-target", "lean/1.0=http://127.0.0.1:1/"},
		{"-lean-sync", "sometimes"},
		{"-meter-process=true", "-cpuprofile", "cpu.prof"},
	} {
		if err := run(context.Background(), args, noEnv, io.Discard, io.Discard); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}

// TestMeterProcessOptions: -cpuprofile and -hold-streams measure this
// process, so the meter runs in it unless -meter-process was asked for.
func TestMeterProcessOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		own  bool
		why  string
	}{
		{nil, true, ""},
		{[]string{"-meter-process=false"}, false, ""},
		{[]string{"-cpuprofile", "cpu.prof"}, false, "-cpuprofile measures this process"},
		{[]string{"-cpuprofile", "cpu.prof", "-hold-streams", "10"}, false, "-cpuprofile and -hold-streams measure this process"},
		{[]string{"-meter-process=false", "-hold-streams", "10"}, false, ""},
	} {
		o, err := parseOptions(c.args, io.Discard)
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if o.meterProcess != c.own || o.meterInProcess != c.why {
			t.Errorf("%v: meter process %t (%q), want %t (%q)", c.args, o.meterProcess, o.meterInProcess, c.own, c.why)
		}
	}
}

// TestRunRoutedTracedLimited: with -endpoints 3, -otlp-sink and -limits
// the meter answers every call through its three endpoints, under the
// buyer's rate limits and budgets, exports its spans to the sink, bills
// every call, and the report says how it ran.
func TestRunRoutedTracedLimited(t *testing.T) {
	rep := runJSON(t, "-c", "2", "-d", "300ms", "-warmup", "100ms", "-n", "2000", "-rounds", "1",
		"-nginx", "/nonexistent/nginx", "-a2a", "/nonexistent/a2a", "-lean", "/nonexistent/leanpeer",
		"-half-load=false", "-sse-streams", "0", "-endpoints", "3", "-otlp-sink", "-limits")
	if s := rep.Settings; !s.Traced || s.Endpoints != 3 || !s.Limits {
		t.Errorf("settings %+v: want traced, 3 endpoints, limits", s)
	}
	checkMeasured(t, rep, meter10, meter03, meterREST, meterBridged)
	i := slices.IndexFunc(rep.Peers, func(p Peer) bool { return p.Name == "otlp-sink" })
	if i < 0 || strings.Contains(rep.Peers[i].Detail, ": 0 exports") {
		t.Errorf("the OTLP sink got no spans: %+v", rep.Peers)
	}
	p := rep.Projections
	if p == nil || p.Unavailable != "" || len(p.Usage) != 2 {
		t.Fatalf("projections %+v", p)
	}
	for _, u := range p.Usage {
		if !u.Equal() || u.Answered == 0 || u.Unknown != 0 {
			t.Errorf("usage of %v: %+v", u.Targets, u)
		}
	}
}
