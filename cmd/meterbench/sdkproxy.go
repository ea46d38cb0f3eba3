package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The official Go SDK whose CLI's forwarding proxy is the baseline
// (`a2a serve --proxy`).
const (
	a2aModule  = "github.com/a2aproject/a2a-go/v2"
	a2aVersion = "v2.3.1"
)

// a2aCacheDir is where the CLI is built once per machine: `go install
// …/cmd/a2a@v2.3.1` does not work here (it asks GitHub for deprecation
// notes), so it is built from a throwaway module (shared/infra.md).
func a2aCacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "agentmarket", "a2a-"+a2aVersion), nil
}

// findA2A resolves -a2a: "off", a path, or a name on PATH; failing that,
// for the default name, the CLI built in the cache, built there now when
// build is set. status and why say what to report when there is none.
func findA2A(ctx context.Context, flagValue string, build bool, buildTimeout time.Duration, progress io.Writer) (path, status, why string) {
	path, status, why = findProgram(flagValue)
	if path != "" || flagValue != "a2a" {
		return path, status, why
	}
	dir, err := a2aCacheDir()
	if err != nil {
		return "", "not installed", "no cache directory: " + err.Error()
	}
	bin := filepath.Join(dir, "a2a")
	if _, err := os.Stat(bin); err == nil {
		return bin, "", ""
	}
	if !build {
		return "", "not installed", "a2a is not on PATH nor in " + dir + " (-a2a-build=false)"
	}
	fmt.Fprintf(progress, "meterbench: building the a2a CLI %s into %s (once per machine, at most %s)\n", a2aVersion, dir, buildTimeout)
	began := time.Now()
	if err := buildA2A(ctx, dir, buildTimeout); err != nil {
		return "", "not installed", "could not build it (no network to the Go module proxy?): " + err.Error()
	}
	fmt.Fprintf(progress, "meterbench: built %s in %s\n", bin, time.Since(began).Round(time.Second))
	return bin, "", ""
}

// buildA2A builds the CLI into dir/a2a from a throwaway module, as
// shared/infra.md shows. The binary appears under its name only once
// complete, so concurrent runs at worst build it twice.
func buildA2A(ctx context.Context, dir string, timeout time.Duration) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return errors.New("no go command on PATH")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"go.mod":   "module a2acli\n\ngo 1.26\n\nrequire " + a2aModule + " " + a2aVersion + "\n",
		"tools.go": "//go:build tools\n\npackage tools\n\nimport _ \"" + a2aModule + "/cmd/a2a\"\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tmp := filepath.Join(dir, "a2a.building-"+strconv.Itoa(os.Getpid()))
	defer os.Remove(tmp)
	env := append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"))
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", tmp, a2aModule + "/cmd/a2a"}} {
		cmd := exec.CommandContext(ctx, goBin, args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("not done within %s", timeout)
			}
			return fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, lastLines(out, 5))
		}
	}
	return os.Rename(tmp, filepath.Join(dir, "a2a"))
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], " | ")
}

// sdkProxy is the SDK's forwarding proxy, serving A2A 1.0 JSON-RPC.
type sdkProxy struct {
	url  string // ending in /
	proc *peerProc
}

// startSDKProxy runs `a2a serve --proxy agent --transport jsonrpc` on a
// free loopback port. agent must serve a 1.0 card with
// supportedInterfaces (the proxy reads it at start and forwards to the
// interface it names). --quiet: no line on stderr per call, the proxy at
// its fastest.
func startSDKProxy(ctx context.Context, bin, agent, dir string) (*sdkProxy, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	_, port, _ := strings.Cut(ports[0], ":")
	p := &sdkProxy{url: "http://" + ports[0] + "/"}
	p.proc, err = startPeer(ctx, "a2a-proxy", bin, dir,
		"serve", "--proxy", agent, "--transport", "jsonrpc", "--host", "127.0.0.1", "--port", port, "--quiet")
	if err != nil {
		return nil, err
	}
	if err := p.proc.waitReady(ctx, p.url+".well-known/agent-card.json"); err != nil {
		p.proc.stop()
		return nil, fmt.Errorf("%w%s", err, p.proc.lastOutput())
	}
	return p, nil
}
