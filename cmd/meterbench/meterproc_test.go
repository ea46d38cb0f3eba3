package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary be the meter's own process too: with
// -meter-process, run executes os.Executable(), which here is this binary.
func TestMain(m *testing.M) {
	if os.Getenv(serveMarketEnv) == "1" {
		os.Exit(serveMarket())
	}
	os.Exit(m.Run())
}

func TestParseProcStat(t *testing.T) {
	// A command name with a space and a ')' in it; utime 250, stime 50 ticks.
	stat := []byte("4242 (lean peer) x) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 9 0 12345 1000000 500 18446744073709551615\n")
	if d, ok := parseProcStat(stat); !ok || d != 3*time.Second {
		t.Errorf("parseProcStat: %v %t, want 3s", d, ok)
	}
	for _, bad := range []string{"", "4242 (x) S 1 2", "4242 (x) S 1 4242 4242 0 -1 0 0 0 0 0 a b"} {
		if _, ok := parseProcStat([]byte(bad)); ok {
			t.Errorf("parseProcStat(%q) accepted", bad)
		}
	}
	if _, ok := procCPU(os.Getpid()); !ok && runtime.GOOS == "linux" {
		t.Error("procCPU(self): not read")
	}
	if _, ok := procCPU(0); ok {
		t.Error("procCPU(0) read something")
	}
}

func TestRepoRoot(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "main")
	deep := filepath.Join(root, "cmd", "meterbench")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/other\n"), 0o644)
	os.WriteFile(filepath.Join(root, "go.mod"), []byte("// the marketplace\nmodule "+modulePath+"\n\ngo 1.26\n"), 0o644)
	if got := repoRoot(deep); got != root {
		t.Errorf("repoRoot(%s) = %q, want %q", deep, got, root)
	}
	if got := repoRoot(dir); got != "" {
		t.Errorf("repoRoot(%s) = %q, want none", dir, got)
	}
	if got := moduleOf([]byte("modulex foo\nmodule \"a/b\"\n")); got != "a/b" {
		t.Errorf("moduleOf: %q", got)
	}
}

func TestLeanSum(t *testing.T) {
	src := t.TempDir()
	for name, text := range map[string]string{"main.go": "package main\n", "go.mod": "module leanproxy\n", "go.sum": ""} {
		os.WriteFile(filepath.Join(src, name), []byte(text), 0o644)
	}
	a, err := leanSum(src)
	if err != nil || len(a) != 12 {
		t.Fatalf("leanSum: %q, %v", a, err)
	}
	os.WriteFile(filepath.Join(src, "main.go"), []byte("package main // changed\n"), 0o644)
	if b, _ := leanSum(src); b == a {
		t.Error("the sum did not change with the source")
	}
	os.Remove(filepath.Join(src, "go.sum"))
	if _, err := leanSum(src); err == nil {
		t.Error("no go.sum: no error")
	}
}

func TestFindLean(t *testing.T) {
	ctx := context.Background()
	if bin, _, status, _ := findLean(ctx, "off", io.Discard); bin != "" || status != "skipped" {
		t.Errorf("off: %q %q", bin, status)
	}
	if bin, _, status, why := findLean(ctx, "/nonexistent/leanpeer", io.Discard); bin != "" || status != "not installed" || !strings.Contains(why, "does not exist") {
		t.Errorf("missing: %q %q %q", bin, status, why)
	}
	exe := filepath.Join(t.TempDir(), "leanpeer")
	os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755)
	if bin, _, _, _ := findLean(ctx, exe, io.Discard); bin != exe {
		t.Errorf("an executable: %q", bin)
	}
	notExe := filepath.Join(t.TempDir(), "leanpeer.txt")
	os.WriteFile(notExe, nil, 0o644)
	if bin, _, status, _ := findLean(ctx, notExe, io.Discard); bin != "" || status != "not installed" {
		t.Errorf("not executable: %q %q", bin, status)
	}
}

func TestMarketProcEnv(t *testing.T) {
	t.Setenv("AGENTMARKET_DATABASE_URL", "postgres://leaked")
	env := marketProcEnv(marketEnv(noEnv, "/tmp/data", "warn", "wait"))
	joined := "\n" + strings.Join(env, "\n") + "\n"
	for _, want := range []string{"\nAGENTMARKET_DATA_DIR=/tmp/data\n", "\nAGENTMARKET_LOG_LEVEL=warn\n", "\nAGENTMARKET_FETCH_ALLOW_CIDRS=127.0.0.0/8\n", "\n" + serveMarketEnv + "=1\n"} {
		if !strings.Contains(joined, want) {
			t.Errorf("env lacks %q", strings.TrimSpace(want))
		}
	}
	// Only what run's getenv gives: not this process's own variables.
	if strings.Contains(joined, "leaked") {
		t.Errorf("env passes this process's AGENTMARKET_DATABASE_URL")
	}
}
