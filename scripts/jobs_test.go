package scripts

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignalKeepsJobsOutput: test.sh's concurrent jobs write their output
// to files under the work dir and print it only once every job has ended.
// A run stopped meanwhile (CI's time limit, a developer's Ctrl-C, a job
// that hangs) ends in on_signal, which kills the jobs and exits; the EXIT
// trap then removes the work dir. What the jobs printed so far (which test
// hung, which failed) must still reach the reader; it does not.
func TestSignalKeepsJobsOutput(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	work := t.TempDir()
	cmd := exec.Command("bash", "-c", `set -euo pipefail; . ./test.sh; AM_WORKDIR=`+work+`; T0=$(am_now)
trap 'on_signal 143' TERM
hangs() { echo "--- FAIL: TestBefore (0.00s)"; echo "shard 2 is in TestThatHangs"; sleep 30; }
start_job other2 hangs
wait_jobs`)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("test.sh's jobs did not end on SIGTERM")
	}
	if !strings.Contains(out.String(), "shard 2 is in TestThatHangs") || !strings.Contains(out.String(), "--- FAIL: TestBefore") {
		t.Errorf("stopped by SIGTERM, test.sh printed nothing of its running job's output (a failure, the test it was in):\n%q", out.String())
	}
}

// TestShardFallbackCounts: when cmd/marketplace's tests cannot be listed
// (the package does not build), test.sh runs the whole package as job
// other1 through other_step, which counts under "other", the file the
// other packages' job writes too: one job's counts replace the other's in
// the closing summary.
func TestShardFallbackCounts(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	work := t.TempDir()
	cmd := exec.Command("bash", "-c", `set -euo pipefail; . ./test.sh; AM_WORKDIR=`+work+`; T0=$(am_now); RACE_PATTERNS=(./a2aproxy/...)
go() {
	case "$*" in
	*marketplace*) sleep 0.5; printf 'FAIL\tgithub.com/agentmarket/agentmarket/cmd/marketplace [build failed]\n'; return 1 ;;
	*) for i in 1 2 3 4 5; do printf -- '--- PASS: Test%d (0.00s)\n' "$i"; done; printf 'ok\tpkg\t0.1s\n' ;;
	esac
}
start_job other other_step "./billing/ ./listings/"
start_job other1 other_step "$SHARDED_PKG" other1
wait_jobs
print_summary`)
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "the other packages: 5 passed") {
		t.Errorf("the summary lost the other packages' 5 passed tests (the marketplace fallback job's counts replaced them):\n%s", out)
	}
}
