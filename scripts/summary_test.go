// Package scripts holds the project's shell scripts; its test checks what
// scripts/test.sh tells its reader.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goTestOutput is `go test -v` output with a race report, a pass, a skip
// and a subtest.
const goTestOutput = `=== RUN   TestRace
==================
WARNING: DATA RACE
Read at 0x00c000018278 by goroutine 9:
  racemod.TestRace.func1()
==================
--- FAIL: TestRace (0.00s)
    testing.go:1617: race detected during execution of test
=== RUN   TestOK
=== RUN   TestOK/sub
--- PASS: TestOK (0.00s)
    --- PASS: TestOK/sub (0.00s)
=== RUN   TestNeedsChrome
    web_test.go:12: no chromium
--- SKIP: TestNeedsChrome (0.00s)
FAIL
FAIL	racemod	0.014s
`

// TestSummary: the filter keeps what a reader needs (race reports whole,
// failures, skips), counts top-level tests, and the closing summary adds
// up the race-detector step and the rest.
func TestSummary(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	work := t.TempDir()
	run := func(script, stdin string) string {
		t.Helper()
		cmd := exec.Command("bash", "-c", `set -euo pipefail; . ./test.sh; AM_WORKDIR=`+work+`; T0=$(am_now); `+script)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
		return string(out)
	}
	got := run("summarize_go_test race", goTestOutput)
	for _, want := range []string{"WARNING: DATA RACE", "racemod.TestRace.func1()", "--- FAIL: TestRace", "race detected",
		"--- SKIP: TestNeedsChrome", "no chromium", "FAIL\tracemod", "1 passed, 1 failed, 1 skipped"} {
		if !strings.Contains(got, want) {
			t.Errorf("the filtered output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "=== RUN") || strings.Contains(got, "TestOK/sub") {
		t.Errorf("the filtered output keeps noise:\n%s", got)
	}
	for name, counts := range map[string]string{"counts.other": "200 0 3\n", "counts.other1": "7 0 0\n", "counts.other2": "3 0 0\n", "counts.chart": "3 0 0\n"} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(counts), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got = run("RACE_PATTERNS=(./a2aproxy/... ./metering/...); print_summary", "")
	for _, want := range []string{
		"with the race detector (./a2aproxy/... ./metering/...): 1 passed, 1 failed, 1 skipped",
		"the other packages: 210 passed, 0 failed, 3 skipped",
		"the Helm chart's check: 3 passed, 0 failed, 0 skipped",
		"in total: 214 passed, 1 failed, 4 skipped",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the summary lacks %q:\n%s", want, got)
		}
	}
}
