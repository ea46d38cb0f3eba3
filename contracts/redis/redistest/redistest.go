// Package redistest gives tests the Redis server that scripts/test.sh
// starts (AGENTMARKET_TEST_REDIS_URL). Without it the tests skip, unless
// AGENTMARKET_TEST_REQUIRE_SERVICES=1 makes them fail, so CI never skips.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := redis.Open(ctx, URL(tb), 5*time.Second, redis.Options{Prefix: "t" + hex.EncodeToString(b[:]) + ":"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}
