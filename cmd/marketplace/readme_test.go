package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// docBlocks returns the sh blocks of a markdown file between
// "<!-- name:begin" and "<!-- name:end -->", in order: the commands a
// reader runs, as written. (Blocks fenced as `shell` are the reader's own
// settings, which a test supplies itself.)
func docBlocks(t *testing.T, path, name string, atLeast int) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "<!-- "+name+":begin")
	region, _, ok2 := strings.Cut(rest, "<!-- "+name+":end -->")
	if !ok || !ok2 {
		t.Fatalf("%s has no <!-- %s:begin … --> … <!-- %s:end --> section", path, name, name)
	}
	var blocks []string
	for _, part := range strings.Split(region, "```sh\n")[1:] {
		code, _, ok := strings.Cut(part, "```")
		if !ok {
			t.Fatalf("%s: unclosed sh block in %s: %.80s", path, name, part)
		}
		blocks = append(blocks, code)
	}
	if len(blocks) < atLeast {
		t.Fatalf("%s: %s has %d sh blocks, want at least %d", path, name, len(blocks), atLeast)
	}
	return blocks
}

// TestReadmeTour runs the README's step-by-step tour as written, against a
// fresh `--demo` marketplace whose data dir is ./agentmarket-data of the
// shell's directory, as when one follows the README. Only the address
// differs: the README's 127.0.0.1:8080 is this marketplace's. It runs the
// tour twice on the same data, restarting the marketplace in between, as a
// reader may (TestDemoRestart: the demo agents come back on the same
// ports).
func TestReadmeTour(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("AGENTMARKET_TEST_REQUIRE_SERVICES") == "1" {
				t.Fatalf("the tour needs %s: %v", tool, err)
			}
			t.Skipf("the tour needs %s: %v", tool, err)
		}
	}
	dir := t.TempDir()
	env := map[string]string{
		"AGENTMARKET_DATA_DIR":          filepath.Join(dir, "agentmarket-data"),
		"AGENTMARKET_FETCH_ALLOW_CIDRS": "", // only what --demo allows, as in the README
		// The marketplace takes a free port; its demo agents the same
		// ones at both starts, as they do after the README's 8080.
		"AGENTMARKET_DEMO_PORT": strconv.Itoa(demoPorts(t, 3)),
	}
	blocks := strings.Join(docBlocks(t, "../../README.md", "tour", 5), "\n")

	var m *started
	for run := 1; run <= 2; run++ {
		if m != nil {
			m.stop(t)
		}
		m = startMarketplace(t, env, "--demo")
		waitOutput(t, m, "the operator ")
		script := strings.ReplaceAll(blocks, "http://127.0.0.1:8080", m.URL) +
			"\necho \"TOUR LISTING=$LISTING CONTRACT=$CONTRACT TASK=$TASK\"\n"
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("run %d: the tour failed (%v):\n%s", run, err, out)
		}
		got := string(out)
		if os.Getenv("TOUR_SHOW") != "" {
			t.Logf("%s", got)
		}
		vars := regexp.MustCompile(`TOUR LISTING=(lst_\w+) CONTRACT=(ctr_\w+) TASK=(task-[\w-]+)`).FindStringSubmatch(got)
		if vars == nil {
			t.Fatalf("run %d: the tour did not capture its ids:\n%s", run, got)
		}
		listing, task := vars[1], vars[3]
		for _, want := range []string{
			`"code":"invalid_listing"`, `"rule":"non_negative"`, "} HTTP 422",
			`"code":"card_url_refused"`, `"rule":"public_address"`,
			`{"error":{"code":"forbidden","message":"a buyer key may not write listings"}} HTTP 403`,
			`"status":"active"`,
			`"state":"completed"`,
			listing + "/" + task + ",1,1,", // the task's usage row (CSV)
			"the retry got the first send's task",
			"another message under m1 got a task of its own",
			`"revoked_at":"`,
			`"code":-32040,"message":"the API key is unknown or revoked"}} HTTP 401`,
			`"max_pause_ms":600000`,
			`"code":-32003`,
			`"task_id":"` + task + `"`,
			`"kty":"EC","kid":"`, // the push signing keys
		} {
			if !strings.Contains(got, want) {
				t.Errorf("run %d: the tour's output lacks %s:\n%s", run, want, got)
			}
		}
		if strings.Contains(got, "pick: no") || strings.Contains(got, "FAILED: ") {
			t.Errorf("run %d: an id was missing from an answer, or a check failed:\n%s", run, got)
		}
		r := client{t: t, base: m.URL, key: operatorKey(t, m)}.do("GET", "/api/v1/listings/"+listing, nil)
		if r.str("status") != "suspended" {
			t.Errorf("run %d: the operator's step left the listing %s", run, r.str("status"))
		}
	}
}

// TestReadmeTourChecks: the tour's checks fail, saying so, when a value
// they compare is empty (a tour where nothing worked must not print
// "the retry got the first send's task").
func TestReadmeTourChecks(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skipf("the tour needs bash: %v", err)
	}
	helpers := docBlocks(t, "../../README.md", "tour", 5)[0]
	for _, tc := range []struct {
		check string
		pass  bool
	}{
		{`same "ok" task-1 task-1`, true},
		{`same "ok" "" ""`, false},
		{`same "ok" task-1 ""`, false},
		{`same "ok" task-1 task-2`, false},
		{`differ "ok" task-2 task-1`, true},
		{`differ "ok" "" task-1`, false},
		{`differ "ok" task-1 ""`, false},
		{`differ "ok" "" ""`, false},
		{`differ "ok" task-1 task-1`, false},
	} {
		out, err := exec.Command("bash", "-uo", "pipefail", "-c", helpers+"\n"+tc.check).CombinedOutput()
		said := strings.TrimSpace(string(out))
		if pass := err == nil && said == "ok"; pass != tc.pass || (!pass && !strings.HasPrefix(said, "FAILED: ok")) {
			t.Errorf("%s: err %v, said %q; want it to pass: %v", tc.check, err, said, tc.pass)
		}
	}
}
