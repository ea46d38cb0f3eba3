package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/agentmarket/agentmarket/cmd/internal/config"
)

// serveMarketEnv, set to 1, makes this program the meter's own process
// (-meter-process): it runs only the marketplace with its embedded meter,
// configured by the AGENTMARKET_* variables its parent passed, prints
// its base URL on stdout as one line and serves until SIGTERM.
const serveMarketEnv = "METERBENCH_SERVE_MARKET"

// How long the meter's process may take to print its URL (its stores
// open and migrate first), and to stop (it drains and closes them).
const (
	marketStartTimeout = time.Minute
	marketStopGrace    = 10 * time.Second
)

// serveMarket is main in the meter's own process; its log (and anything
// else it says) goes to stderr, which its parent points at meter.log.
func serveMarket() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	signal.Ignore(syscall.SIGPIPE)
	m, err := wireMarket(ctx, os.Getenv, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "meterbench (the meter's process):", err)
		return 1
	}
	fmt.Println(m.URL)
	<-ctx.Done()
	m.stop()
	return 0
}

// marketProcEnv is the environment of the meter's process: this one's
// without its AGENTMARKET_* variables, then every marketplace setting
// env gives (the caller's, as run received them, and the benchmark's).
func marketProcEnv(env func(string) string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTMARKET_") && !strings.HasPrefix(kv, serveMarketEnv+"=") {
			out = append(out, kv)
		}
	}
	for _, s := range config.Settings("marketplace") {
		if v := env(s.Env()); v != "" {
			out = append(out, s.Env()+"="+v)
		}
	}
	return append(out, serveMarketEnv+"=1")
}

// startMarketProcess runs this executable again as the meter's process
// (serveMarket), a peer like the others: its own process group, ended
// with this process, stopped at the end. Its log goes to logOut (named
// logName, for errors).
func startMarketProcess(ctx context.Context, env func(string) string, dir string, logOut io.Writer, logName string) (*market, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command(exe)
	cmd.Dir, cmd.Env = dir, marketProcEnv(env)
	cmd.Stdout, cmd.Stderr = w, logOut
	p, err := launch("meter", cmd, logName)
	w.Close() // the child has its own; EOF when it exits
	if err != nil {
		return nil, err
	}
	p.grace = marketStopGrace
	base, err := readURL(ctx, p, r)
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("%w%s", err, p.lastOutput())
	}
	return &market{URL: base, pid: p.pid(), stop: p.stop}, nil
}

// readURL waits for the one line the meter's process prints: its base
// URL, on the loopback.
func readURL(ctx context.Context, p *peerProc, r io.Reader) (string, error) {
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	exited := func() error { return fmt.Errorf("the meter's process exited at start (%s)", p.cmd.ProcessState) }
	var s string
	select {
	case s = <-line:
		if s == "" { // its stdout closed: it is exiting
			select {
			case <-p.done:
				return "", exited()
			case <-time.After(time.Second):
			}
		}
	case <-p.done:
		return "", exited()
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(marketStartTimeout):
		return "", fmt.Errorf("the meter's process did not print its URL within %s", marketStartTimeout)
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "http" || s == "" {
		return "", fmt.Errorf("the meter's process printed %q, not its URL", s)
	}
	if err := loopbackOnly(u.Host); err != nil {
		return "", err
	}
	return s, nil
}
