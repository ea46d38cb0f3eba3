// Package redistest gives tests the Redis server that scripts/test.sh
// starts (AGENTMARKET_TEST_REDIS_URL). Without it the tests skip, unless
// AGENTMARKET_TEST_REQUIRE_SERVICES=1 makes them fail, so CI never skips.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentmarket/agentmarket/contracts/redis"
)

const (
	URLEnv     = "AGENTMARKET_TEST_REDIS_URL"
	RequireEnv = "AGENTMARKET_TEST_REQUIRE_SERVICES"
)

// URL is the test server's URL, or skips the test.
func URL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv(URLEnv)
	if u == "" {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("%s is not set but %s=1: run the tests through scripts/test.sh", URLEnv, RequireEnv)
		}
		tb.Skipf("%s not set: Redis tests skipped (scripts/test.sh sets it)", URLEnv)
	}
	return u
}

// Open is a store on the test server under a prefix of its own, so tests
// never see each other's keys; it is closed when the test ends.
func Open(tb testing.TB) *redis.Store {
	tb.Helper()
	var b [6]byte
	rand.Read(b[:])
	s, err := redis.Open(URL(tb), redis.Options{Prefix: "t" + hex.EncodeToString(b[:]) + ":"})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Ping(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// Server is a redis-server of a test's own (no persistence), for tests that
// stop it: Redis down, then back.
type Server struct {
	URL  string
	port int
	tb   testing.TB
	cmd  *exec.Cmd
}

// Start starts a redis-server on a free port of 127.0.0.1, stopped when
// the test ends. Without the binary it skips, or fails under
// AGENTMARKET_TEST_REQUIRE_SERVICES=1 (scripts/test.sh installs it).
func Start(tb testing.TB) *Server {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("redis-server is not installed but %s=1: run the tests through scripts/test.sh", RequireEnv)
		}
		tb.Skip("redis-server not installed: skipped (scripts/test.sh installs it)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{URL: fmt.Sprintf("redis://127.0.0.1:%d/0", port), port: port, tb: tb}
	s.Restart()
	tb.Cleanup(s.Stop)
	return s
}

// Restart starts the server again on its port (empty: nothing persists).
func (s *Server) Restart() {
	s.tb.Helper()
	s.cmd = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(s.port), "--save", "", "--appendonly", "no")
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.port), time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("redis-server did not start on port %d: %v", s.port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (as an outage would) and waits for it.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// Has reports whether the server holds key.
func (s *Server) Has(tb testing.TB, key string) bool {
	tb.Helper()
	opt, err := goredis.ParseURL(s.URL)
	if err != nil {
		tb.Fatal(err)
	}
	c := goredis.NewClient(opt)
	defer c.Close()
	n, err := c.Exists(context.Background(), key).Result()
	if err != nil {
		tb.Fatal(err)
	}
	return n == 1
}
