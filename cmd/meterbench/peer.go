package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Peer is a comparison target this tool runs as another program (nginx,
// the SDK's forwarding proxy): whether it ran, and if not, why.
type Peer struct {
	Name   string `json:"name"`
	Status string `json:"status"` // "running", "not installed", "skipped" or "failed"
	Detail string `json:"detail,omitempty"`
}

// How long a peer may take to answer after its start, and to stop.
const (
	peerStartTimeout = 15 * time.Second
	peerStopGrace    = 3 * time.Second
)

// peerProc is a peer process this tool started, in a process group of
// its own (it and its children, e.g. nginx's workers, are stopped
// together). Its output goes to a file in its directory.
type peerProc struct {
	name  string
	cmd   *exec.Cmd
	out   string        // the file its output (or, for the meter, its log) goes to
	grace time.Duration // how long stop waits for it to end before killing it
	done  chan struct{} // closed when it has exited
}

func startPeer(ctx context.Context, name, bin, dir string, args ...string) (*peerProc, error) {
	out := filepath.Join(dir, name+".out")
	f, err := os.Create(out)
	if err != nil {
		return nil, err
	}
	// Not exec.CommandContext: stop ends it gracefully first.
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = f, f
	p, err := launch(name, cmd, out)
	// The child has its own copy of the descriptor once started.
	f.Close()
	return p, err
}

// launch starts cmd as a peer (its own process group, ended with this
// process) and watches for its exit. out names where its output goes.
func launch(name string, cmd *exec.Cmd, out string) (*peerProc, error) {
	cmd.SysProcAttr = peerProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &peerProc{name: name, cmd: cmd, out: out, grace: peerStopGrace, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// pid is the peer's process id: its CPU time is read from /proc.
func (p *peerProc) pid() int { return p.cmd.Process.Pid }

// waitReady waits until a GET of u answers 200, the peer exits, or
// peerStartTimeout passes.
func (p *peerProc) waitReady(ctx context.Context, u string) error {
	ctx, cancel := context.WithTimeout(ctx, peerStartTimeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		res, err := client.Do(req)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited at start (%s)", p.name, p.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer GET %s within %s", p.name, u, peerStartTimeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop asks the peer to end (SIGTERM to its group, also when the peer
// itself has exited: its children may not have), and kills the group when
// the peer has not ended within its grace (peerStopGrace unless set). It
// returns once the peer has exited, or after another second if even
// SIGKILL did not end it.
func (p *peerProc) stop() {
	signalPeer(p.cmd.Process, false)
	select {
	case <-p.done:
		return
	case <-time.After(p.grace):
	}
	signalPeer(p.cmd.Process, true)
	select {
	case <-p.done:
	case <-time.After(time.Second):
	}
}

// lastOutput is the end of the peer's output and of the other files
// named (its logs), for an error message; empty when there is none.
func (p *peerProc) lastOutput(files ...string) string {
	var b strings.Builder
	for _, f := range append([]string{p.out}, files...) {
		data, err := os.ReadFile(f)
		if err != nil || len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		if len(data) > 600 {
			data = data[len(data)-600:]
		}
		fmt.Fprintf(&b, "\n  %s: %s", filepath.Base(f), strings.ReplaceAll(strings.TrimSpace(string(data)), "\n", "\n    "))
	}
	return b.String()
}

// freePorts picks n free loopback addresses (host:port). Another process
// could take one before the peer binds it; the peer then fails to start
// and is reported so.
func freePorts(n int) ([]string, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// findProgram resolves a peer's -flag value: "off" skips it, a name
// without a slash is looked up on PATH, a path must exist. why says what
// to report when it cannot be used.
func findProgram(flagValue string) (path, status, why string) {
	switch {
	case flagValue == "off":
		return "", "skipped", "switched off"
	case !strings.ContainsRune(flagValue, filepath.Separator):
		p, err := exec.LookPath(flagValue)
		if err != nil {
			return "", "not installed", flagValue + " is not on PATH"
		}
		return p, "", ""
	}
	if _, err := os.Stat(flagValue); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", "not installed", flagValue + " does not exist"
		}
		return "", "not installed", err.Error()
	}
	return flagValue, "", ""
}
