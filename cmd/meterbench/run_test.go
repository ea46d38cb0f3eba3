package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os/exec"
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
		"-nginx", "/nonexistent/nginx", "-a2a", "/nonexistent/a2a",
		"-sse-streams", "2", "-sse-events", "4", "-sse-interval", "5ms", "-hold-streams", "20", "-target", "gone=http://127.0.0.1:1/")
	if rep.Settings.Agent != "built-in" {
		t.Errorf("canned agent %q, want built-in", rep.Settings.Agent)
	}
	for _, p := range rep.Peers {
		if p.Status != "not installed" || !strings.Contains(p.Detail, "/nonexistent/") {
			t.Errorf("peer %+v, want not installed", p)
		}
	}
	if len(rep.Peers) != 2 {
		t.Errorf("peers %+v, want nginx and sdk-proxy", rep.Peers)
	}
	checkMeasured(t, rep, direct10, direct03, goProxy03, meter10, meter03, meterREST, meterBridged)
	for _, name := range []string{nginx10, nginx03, sdkProxy10} {
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
	if goals != 14 {
		t.Errorf("%d targets with a goal, want 14: %+v", goals, rep.Ratios)
	}
	for prefix, measured := range map[string]bool{
		"message/send 1.0 (embedded): meter ÷ nginx": false, "message/send 1.0: meter ÷ the SDK's": false,
		"closed loop": true, "open loop": true, "spool drained": true, "usage API calls": true, "usage API tokens": true,
		"SSE: added delay p99": true, "held stream": true, "the meter's CPU per call, meter/rest": true,
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
// has (nginx on PATH, the a2a CLI on PATH or already built; it is not
// built here): each is started, loaded and stopped.
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
	for _, p := range rep.Peers {
		if p.Name == "sdk-proxy" && p.Status == "running" {
			checkMeasured(t, rep, sdkProxy10)
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
	} {
		if err := run(context.Background(), args, noEnv, io.Discard, io.Discard); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}
