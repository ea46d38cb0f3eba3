package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket/listings/agentcard"
)

func TestNginxConf(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-nginx-conf"}, noEnv, &out, &out); err != nil {
		t.Fatal(err)
	}
	conf := out.String()
	for _, want := range []string{"listen " + nginxAgentAddr, "listen " + nginxProxyAddr, "proxy_pass http://canned_agent",
		"location /v03/ { return 200 '", "location /v10/ { return 200 '", `"id":"$request_id"`,
		"location = /v10/.well-known/agent-card.json", `"supportedInterfaces":[{"protocolBinding":"JSONRPC","protocolVersion":"1.0","url":"http://` + nginxAgentAddr + `/v10/"}]`} {
		if !strings.Contains(conf, want) {
			t.Errorf("nginx.conf lacks %q", want)
		}
	}
	if strings.Count(conf, "$request_id") != 2 {
		t.Errorf("want $request_id in both answers:\n%s", conf)
	}
}

// TestNginxConfLoads asks nginx itself whether the configuration is
// valid, when nginx is installed.
func TestNginxConfLoads(t *testing.T) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		t.Skip("nginx is not installed")
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "nginx.conf")
	var b bytes.Buffer
	if err := writeNginxConf(&b, "127.0.0.1:1", "127.0.0.1:2"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-t", "-p", dir+"/", "-c", conf, "-e", filepath.Join(dir, "error.log")).CombinedOutput()
	if err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
}

// TestCannedAnswers checks that what the canned agents serve is what the
// meter and the SDK read: each card is a valid card of its version, and
// each answer, with a task id where nginx puts $request_id, is JSON with
// a task carrying the usage report the usage check counts on.
func TestCannedAnswers(t *testing.T) {
	for _, v := range []protocol{v03, v10} {
		card, err := agentcard.Parse(agentCard("http://127.0.0.1:1"+v.path(), v, false))
		if err != nil {
			t.Fatalf("%s card: %v", v, err)
		}
		if !slices.Contains(card.ProtocolVersions, string(v)) {
			t.Errorf("%s card speaks %v", v, card.ProtocolVersions)
		}
		answer := sendAnswers[v]
		body := string(answer[0]) + "3f0a9d2c81e4b7a6c5d4e3f2a1b0c9d8" + string(answer[1])
		var rpc struct {
			Result map[string]json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(body), &rpc); err != nil {
			t.Fatalf("%s answer: %v\n%s", v, err, body)
		}
		task := rpc.Result["task"] // 1.0: the task under "task"; 0.3: the result is the task
		if v == v03 {
			task, _ = json.Marshal(rpc.Result)
		}
		var got struct {
			ID       string                                               `json:"id"`
			Metadata map[string]struct{ InputTokens, OutputTokens int64 } `json:"metadata"`
		}
		if err := json.Unmarshal(task, &got); err != nil {
			t.Fatal(err)
		}
		if u := got.Metadata[usageExtension]; got.ID != "3f0a9d2c81e4b7a6c5d4e3f2a1b0c9d8" || u.InputTokens != answerInputTokens || u.OutputTokens != answerOutputTokens {
			t.Errorf("%s answer: task %+v", v, got)
		}
		var req map[string]any
		if err := json.Unmarshal(sendBody(v), &req); err != nil || len(sendBody(v)) < 1000 {
			t.Errorf("%s request (%d bytes): %v", v, len(sendBody(v)), err)
		}
	}
}

func TestFindProgram(t *testing.T) {
	for _, c := range []struct {
		flag, status string
		found        bool
	}{
		{"off", "skipped", false},
		{"/nonexistent/nginx", "not installed", false},
		{"no-such-program-meterbench", "not installed", false},
		{"sh", "", true},
	} {
		path, status, why := findProgram(c.flag)
		if (path != "") != c.found || status != c.status || (why == "") != c.found {
			t.Errorf("%s: %q %q %q", c.flag, path, status, why)
		}
	}
}
