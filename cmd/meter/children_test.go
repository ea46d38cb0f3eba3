//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/agentmarket/agentmarket/metering/clickhouse/clickhousetest"
)

// The processes the fault tests start: a private ClickHouse server they can
// kill and restart, and the meter itself, re-executed from the test binary
// so that it can be SIGKILLed. Both die with the test binary (Pdeathsig), so
// a test that times out or panics leaves nothing running.

// meterChildEnv, set to 1, makes the test binary run the meter instead of
// the tests (see TestMain).
const meterChildEnv = "AGENTMARKET_TEST_METER_CHILD"

// TestMain runs the meter process that the fault tests start (the test
// binary run again with meterChildEnv=1), or else the tests. The child
// serves until SIGTERM, or until it is killed.
func TestMain(m *testing.M) {
	if os.Getenv(meterChildEnv) != "1" {
		os.Exit(m.Run())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, nil, os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "meter:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// syncBuffer collects a child's output.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// child is a started process and what became of it.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // Wait's answer, once done is closed
}

// startChild starts cmd, which dies with the test binary, and arranges for
// it to be killed when the test ends.
func startChild(t *testing.T, name string, cmd *exec.Cmd) (*child, error) {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(c.kill)
	return c, nil
}

// kill SIGKILLs the process (if it still runs) and waits for it.
func (c *child) kill() {
	select {
	case <-c.done:
		return
	default:
	}
	c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// freePort returns a TCP port free on 127.0.0.1, below the kernel's
// ephemeral range (as scripts/lib/services.sh does): a server restarted on
// the same port must not find it taken by an outgoing connection meanwhile.
func freePort(t *testing.T, not ...int) int {
	t.Helper()
	lo, hi := 15000, 32767
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if eph, err := strconv.Atoi(f[0]); err == nil && eph > lo+1000 {
				hi = eph - 1
			}
		}
	}
	span := hi - lo
	p := lo + rand.IntN(span)
next:
	for range span {
		p++
		if p >= hi {
			p = lo
		}
		for _, n := range not {
			if p == n {
				continue next
			}
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		ln.Close()
		return p
	}
	t.Fatalf("no free TCP port between %d and %d", lo, hi)
	return 0
}

// chServer is a private clickhouse-server: its own config, ports and data
// under a temp dir, so a test can kill it and start it again with its data.
type chServer struct {
	t         *testing.T
	bin       string
	dir       string
	tcp, http int
	proc      *child
}

// startClickHouse starts a private ClickHouse server. Without the
// clickhouse-server binary the test skips, or fails under
// AGENTMARKET_TEST_REQUIRE_SERVICES=1.
func startClickHouse(t *testing.T) *chServer {
	t.Helper()
	bin, err := exec.LookPath("clickhouse-server")
	if err != nil {
		if os.Getenv(clickhousetest.RequireEnv) == "1" {
			t.Fatalf("clickhouse-server is not installed but %s=1 (scripts/test.sh installs it)", clickhousetest.RequireEnv)
		}
		t.Skip("clickhouse-server not installed: ClickHouse fault tests skipped (scripts/test.sh installs it)")
	}
	s := &chServer{t: t, bin: bin, dir: t.TempDir()}
	t.Cleanup(func() {
		if t.Failed() {
			for _, f := range []string{"server.err.log", "stdout.log"} {
				if b, err := os.ReadFile(filepath.Join(s.dir, f)); err == nil && len(b) > 0 {
					t.Logf("clickhouse %s (last 4 KiB):\n%s", f, tail(b, 4<<10))
				}
			}
		}
	})
	// Ports can be taken between the check and the bind: try a few.
	for try := 1; ; try++ {
		s.tcp = freePort(t)
		s.http = freePort(t, s.tcp)
		s.writeConfig()
		err := s.start()
		if err == nil {
			return s
		}
		if try == 3 {
			t.Fatalf("clickhouse-server did not start: %v", err)
		}
		t.Logf("clickhouse-server did not start on ports %d/%d (try %d): %v", s.tcp, s.http, try, err)
	}
}

// writeConfig writes the test script's own self-contained config
// (scripts/lib/services.sh am_write_clickhouse_config): nothing under /etc
// or /var is read or written.
func (s *chServer) writeConfig() {
	s.t.Helper()
	lib, err := filepath.Abs(filepath.Join("..", "..", "scripts", "lib", "services.sh"))
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", `. "$1" && am_write_clickhouse_config "$2" "$3" "$4"`, "bash",
		lib, s.dir, strconv.Itoa(s.tcp), strconv.Itoa(s.http))
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("writing the ClickHouse config: %v\n%s", err, out)
	}
}

// start runs the server on its config and data and waits (30 s at most)
// until a native-protocol ping works.
func (s *chServer) start() error {
	s.t.Helper()
	out, err := os.OpenFile(filepath.Join(s.dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close() // the child has its own copy
	cmd := exec.Command(s.bin, "--config-file="+filepath.Join(s.dir, "config.xml"))
	cmd.Stdout, cmd.Stderr = out, out
	p, err := startChild(s.t, "clickhouse-server", cmd)
	if err != nil {
		return err
	}
	s.proc = p
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := s.ping()
		if err == nil {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("clickhouse-server exited (%v); last ping: %v", p.err, err)
		}
		if time.Now().After(deadline) {
			p.kill()
			return fmt.Errorf("no native-protocol ping within 30s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill SIGKILLs the server: a crash, the harshest way for it to go.
func (s *chServer) kill() { s.proc.kill() }

// dsn is the native-protocol DSN of database db on this server.
func (s *chServer) dsn(db string) string {
	return fmt.Sprintf("clickhouse://127.0.0.1:%d/%s", s.tcp, db)
}

func (s *chServer) open() (ch.Conn, error) {
	opts, err := ch.ParseDSN(s.dsn("default"))
	if err != nil {
		return nil, err
	}
	opts.DialTimeout = time.Second
	return ch.Open(opts)
}

func (s *chServer) ping() error {
	conn, err := s.open()
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return conn.Ping(ctx)
}

// exec runs one statement on the server.
func (s *chServer) exec(query string) {
	s.t.Helper()
	conn, err := s.open()
	if err != nil {
		s.t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := conn.Exec(ctx, query); err != nil {
		s.t.Fatalf("clickhouse: %s: %v", query, err)
	}
}

// count runs a query returning one UInt64.
func (s *chServer) count(query string) (uint64, error) {
	conn, err := s.open()
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var n uint64
	err = conn.QueryRow(ctx, query).Scan(&n)
	return n, err
}

// meterProc is one life of the meter, a child process.
type meterProc struct {
	name string
	url  string
	out  *syncBuffer
	proc *child
}

// startMeter runs the meter (see TestMain) in a new process with env on
// top of this one's, and waits until it listens. Its output is logged if
// the test fails.
func startMeter(t *testing.T, name string, env map[string]string) *meterProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.count=1")
	cmd.Env = append(os.Environ(), meterChildEnv+"=1", "AGENTMARKET_METER_ADDR=127.0.0.1:0")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v) // the last value of a key wins
	}
	m := &meterProc{name: name, out: &syncBuffer{}}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	p, err := startChild(t, "meter "+name, cmd)
	if err != nil {
		t.Fatal(err)
	}
	m.proc = p
	go func() {
		<-p.done
		pw.Close()
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("output of meter %s:\n%s", name, m.out.String())
		}
	})
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			m.out.Write([]byte(line + "\n"))
			if _, after, ok := strings.Cut(line, "meter listening on "); ok {
				select {
				case urlc <- strings.TrimSpace(after):
				default:
				}
			}
		}
		io.Copy(m.out, pr)
	}()
	select {
	case m.url = <-urlc:
	case <-p.done:
		t.Fatalf("meter %s exited before listening (%v); its output follows", name, p.err)
	case <-time.After(30 * time.Second):
		t.Fatalf("meter %s did not listen within 30s; its output follows", name)
	}
	return m
}

// sigkill kills the meter at once: no flush, no spool close.
func (m *meterProc) sigkill() { m.proc.kill() }

// metric reads one unlabelled sample from the meter's /metrics.
func (m *meterProc) metric(name string) (float64, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	res, err := c.Get(m.url + "/metrics")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no sample " + name + " in /metrics")
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
