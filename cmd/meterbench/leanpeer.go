package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The lean peer (shared/bench/leanpeer, issue 22): the honest minimum of a
// metering A2A JSON-RPC proxy in Go, the meter's yardstick. The project
// neither imports nor copies it: like nginx, it is a program this tool
// builds (from its source beside the repository) and runs.
const (
	leanRoute     = "/l/lst_bench/a2a"         // the one listing it serves
	leanBuyerKey  = "amk_bench_buyer_key_0001" // the buyer key it provisions
	leanBuildTime = 5 * time.Minute            // at most, to build it
	// modulePath is this repository's module: its go.mod marks the root
	// that the lean peer's source is found beside.
	modulePath = "github.com/agentmarket/agentmarket"
)

// leanNextToRoot is where -lean auto looks, from the repository's root.
var leanNextToRoot = filepath.Join("..", "shared", "bench", "leanpeer")

// findLean resolves -lean: "off"; "auto", the source beside the
// repository; a directory of Go source; or an executable file. Source is
// built into the user cache dir (once per version of it). src is the
// source used, if any; status and why say what to report when there is
// no binary.
func findLean(ctx context.Context, flagValue string, progress io.Writer) (bin, src, status, why string) {
	switch flagValue {
	case "off":
		return "", "", "skipped", "switched off (-lean off)"
	case "auto":
		if src, why = leanBesideRepo(); src == "" {
			return "", "", "not installed", why
		}
	default:
		fi, err := os.Stat(flagValue)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return "", "", "not installed", flagValue + " does not exist"
		case err != nil:
			return "", "", "not installed", err.Error()
		case fi.IsDir():
			src = flagValue
		case fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0:
			return flagValue, "", "", ""
		default:
			return "", "", "not installed", flagValue + " is neither a directory of Go source nor an executable file"
		}
	}
	bin, err := buildLean(ctx, src, progress)
	if err != nil {
		return "", src, "not installed", "could not build " + src + ": " + err.Error()
	}
	return bin, src, "", ""
}

// leanBesideRepo finds ../shared/bench/leanpeer from the repository's
// root, looked for upwards from the working directory and then from this
// executable's directory; why says where it looked when it is not there.
func leanBesideRepo() (dir, why string) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	var looked []string
	for _, start := range starts {
		root := repoRoot(start)
		if root == "" {
			looked = append(looked, "no "+modulePath+" go.mod at or above "+start)
			continue
		}
		dir := filepath.Join(root, leanNextToRoot)
		if _, err := os.Stat(filepath.Join(dir, "main.go")); err == nil {
			return dir, ""
		}
		looked = append(looked, "no "+filepath.Join(dir, "main.go"))
	}
	return "", "-lean auto: " + strings.Join(slices.Compact(looked), "; ") + " (give -lean its source directory or a binary)"
}

// repoRoot is the directory at or above dir whose go.mod declares
// modulePath, or "".
func repoRoot(dir string) string {
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && moduleOf(b) == modulePath {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// moduleOf is the module path a go.mod declares.
func moduleOf(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// leanSum names a version of the source: the SHA-256 of its Go files (in
// name order: main.go today), go.mod and go.sum, 12 hex digits.
func leanSum(src string) (string, error) {
	files, err := filepath.Glob(filepath.Join(src, "*.go"))
	if err != nil {
		return "", err
	}
	slices.Sort(files)
	files = append(files, filepath.Join(src, "go.mod"), filepath.Join(src, "go.sum"))
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// buildLean builds the source into the user cache dir as
// agentmarket/leanpeer-<leanSum>, or reuses the binary already there. It
// appears under its name only once complete, so concurrent runs at worst
// build it twice.
func buildLean(ctx context.Context, src string, progress io.Writer) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: %w", err)
	}
	sum, err := leanSum(src)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "agentmarket")
	bin := filepath.Join(dir, "leanpeer-"+sum)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", errors.New("no go command on PATH")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "meterbench: building the lean peer from %s into %s (at most %s)\n", src, bin, leanBuildTime)
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, leanBuildTime)
	defer cancel()
	tmp := bin + ".building-" + strconv.Itoa(os.Getpid())
	defer os.Remove(tmp)
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", tmp, ".")
	// Its own module: no workspace of ours around it.
	cmd.Dir, cmd.Env = src, append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("not done within %s", leanBuildTime)
		}
		return "", fmt.Errorf("go build: %w: %s", err, lastLines(out, 5))
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "meterbench: built %s in %s\n", bin, time.Since(began).Round(100*time.Millisecond))
	return bin, nil
}

// leanPeer is the lean peer serving the canned agent's 1.0 JSON-RPC
// interface.
type leanPeer struct {
	url  string // its route, the target
	proc *peerProc
}

// startLean runs the lean peer on a free loopback port, forwarding to
// agent (the canned agent's 1.0 URL), its spool in dir, in durability
// mode sync (wait: each answer after the fdatasync covering its line;
// bg: after write(2), fdatasync every 5 ms; off: after write(2)).
func startLean(ctx context.Context, bin, agent, dir, sync string) (*leanPeer, error) {
	upstream, path, ok := strings.Cut(strings.TrimPrefix(agent, "http://"), "/")
	if !ok {
		return nil, fmt.Errorf("agent URL %s has no path", agent)
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	p := &leanPeer{url: "http://" + ports[0] + leanRoute}
	p.proc, err = startPeer(ctx, "leanpeer", bin, dir, "-addr", ports[0], "-upstream", upstream, "-path", "/"+path,
		"-spool", filepath.Join(dir, "lean.spool"), "-sync", sync)
	if err != nil {
		return nil, err
	}
	if err := p.proc.waitReady(ctx, "http://"+ports[0]+"/stats"); err != nil {
		p.proc.stop()
		return nil, fmt.Errorf("%w%s", err, p.proc.lastOutput())
	}
	return p, nil
}
