package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func noEnv(string) string { return "" }

// TestRunSmall runs the whole benchmark briefly: every built-in target
// answers through its path (the meter with a real listing, subscription
// and key), a missing extra target is reported without failing the run,
// and the report carries the ratios.
func TestRunSmall(t *testing.T) {
	var out bytes.Buffer
	args := []string{"-json", "-c", "2", "-d", "300ms", "-warmup", "100ms", "-n", "2000",
		"-sse-streams", "2", "-sse-events", "4", "-sse-interval", "5ms", "-hold-streams", "20", "-target", "gone=http://127.0.0.1:1/"}
	if err := run(context.Background(), args, noEnv, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out.String())
	}
	for _, name := range []string{"direct", "proxy", "meter"} {
		r := rep.result(name)
		if r == nil {
			t.Fatalf("no %s result in %+v", name, rep.Max)
		}
		if r.NetErrors+r.BadStatus+r.RPCErrors > 0 || r.P50 <= 0 || r.P99 < r.P50 {
			t.Errorf("%s: %+v", name, *r)
		}
		if h := find(rep.Half, name); h == nil || h.OK == 0 {
			t.Errorf("%s: no half-load result in %+v", name, rep.Half)
		}
		if s := findSSE(rep.SSE, name); s == nil || s.Events != 2*4 || s.Errors != 0 {
			t.Errorf("%s: SSE %+v", name, s)
		}
	}
	for _, name := range []string{"direct", "meter"} {
		var h *HoldResult
		for i := range rep.Hold {
			if rep.Hold[i].Target == name {
				h = &rep.Hold[i]
			}
		}
		if h == nil || h.Opened != 20 || h.Unavailable != "" || h.Goroutines <= 0 {
			t.Errorf("%s: held streams %+v", name, h)
		}
	}
	if g := rep.Max[len(rep.Max)-1]; g.Target != "gone" || !strings.Contains(g.Unavailable, "unreachable") {
		t.Errorf("missing target reported as %+v", g)
	}
	names := map[string]bool{}
	for _, r := range rep.Ratios {
		names[r.Name] = true
	}
	for _, want := range []string{"throughput meter/proxy", "added p99 at half load, meter-direct", "SSE added delay p99, meter-direct", "held stream, meter's own heap+stacks (meter-direct)"} {
		if !names[want] {
			t.Errorf("no ratio %q in %+v", want, rep.Ratios)
		}
	}
}

func TestOnlyLoopback(t *testing.T) {
	for _, args := range [][]string{
		{"-target", "far=http://10.0.0.1:80/"},
		{"-agent", "http://example.com/"},
		{"-c", "0"},
		{"-d", "1h"},
	} {
		if err := run(context.Background(), args, noEnv, &bytes.Buffer{}); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}

func TestNginxConf(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-nginx-conf"}, noEnv, &out); err != nil {
		t.Fatal(err)
	}
	conf := out.String()
	for _, want := range []string{"listen " + nginxAgentAddr, "listen " + nginxProxyAddr, "proxy_pass http://canned_agent", `"id":"$request_id"`} {
		if !strings.Contains(conf, want) {
			t.Errorf("nginx.conf lacks %q", want)
		}
	}
}
