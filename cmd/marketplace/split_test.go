package main

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/cmd/internal/demoagent"
	"github.com/agentmarket/agentmarket/metering/clickhouse/clickhousetest"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// TestSplitDeployment follows docs/operations.md's "Running the meter
// apart, step by step" as written: both binaries built, the marketplace
// without its meter and a meter as separate processes on PostgreSQL and
// ClickHouse, the operator's first steps, a buyer's call through the meter
// and its usage read back by the marketplace, then SIGTERM. The test puts
// its own services, binaries and agent where the doc says "yours", and its
// own free ports in place of 8080 and 8081.
func TestSplitDeployment(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the doc's commands are for a Unix shell")
	}
	pg, ch := relationaltest.PostgresDSN(t), clickhousetest.DSN(t)
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the doc needs %s: %v", tool, err)
		}
	}
	dir := t.TempDir()
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", filepath.Join(dir, "bin")+"/", "./cmd/marketplace", "./cmd/meter")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	agent := demoagent.New(demoagent.Config{Version: "0.3", ReportUsage: true})
	srv := httptest.NewServer(agent)
	defer srv.Close()
	agent.SetBaseURL(srv.URL + "/")

	yours := strings.Join([]string{
		"export AGENTMARKET_DATABASE_URL='" + pg + "'",
		"export AGENTMARKET_CLICKHOUSE_URL='" + ch + "'",
		"AGENT=" + srv.URL + "/",
		"export AGENTMARKET_FETCH_ALLOW_CIDRS=127.0.0.0/8 # the agent is on loopback",
	}, "\n")
	script := yours + "\n" + strings.Join(docBlocks(t, "../../docs/operations.md", "split", 7), "\n")
	script = strings.ReplaceAll(script, "127.0.0.1:8080", closedPort(t))
	script = strings.ReplaceAll(script, "127.0.0.1:8081", closedPort(t))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	// The doc starts the binaries in the background: in the script's
	// process group, which the test ends whatever happens.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	got := string(out)
	logs := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return string(b)
	}
	if err != nil {
		t.Fatalf("the doc's commands failed (%v):\n%s\n--- marketplace.log\n%s\n--- meter-1.log\n%s", err, got, logs("marketplace.log"), logs("meter-1.log"))
	}
	for _, want := range []string{
		`{"status":"ready"`,
		"marketplace.log:  usage_store  ClickHouse at ", "meter-1.log:  usage_store  ClickHouse at ",
		"marketplace.log:  meter        separate (cmd/meter); buyers reach it at http://127.0.0.1:",
		"marketplace.log:  listings     new ones wait for the operator's review",
		`"status":"pending_review"`,
		"published",
		`"state":"completed"`,
		`"calls":1`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the output lacks %s:\n%s", want, got)
		}
	}
	if !regexp.MustCompile(`meter-1\.log:  database     PostgreSQL at 127\.0\.0\.1:\d+/\w+: up, PostgreSQL \d+`).MatchString(got) {
		t.Errorf("the meter's banner lacks PostgreSQL:\n%s", got)
	}
	for _, name := range []string{"marketplace.log", "meter-1.log"} {
		if l := logs(name); !strings.Contains(l, `"msg":"stopped"`) {
			t.Errorf("%s does not say it stopped:\n%s", name, l)
		}
	}
}
