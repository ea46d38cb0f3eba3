// Package clickhousetest gives tests fresh ClickHouse databases: one per
// test, created on the server that AGENTMARKET_TEST_CLICKHOUSE_DSN names
// (scripts/test.sh starts one) and dropped afterwards. Without that
// variable tests skip, unless AGENTMARKET_TEST_REQUIRE_SERVICES=1 makes
// them fail, so CI can never skip silently.
package clickhousetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/agentmarket/agentmarket/metering/clickhouse"
)

// DSNEnv names the variable with the DSN of the test server's admin
// database (native protocol: clickhouse://127.0.0.1:PORT/default).
const DSNEnv = "AGENTMARKET_TEST_CLICKHOUSE_DSN"

// RequireEnv set to 1 turns skips for missing services into failures.
const RequireEnv = "AGENTMARKET_TEST_REQUIRE_SERVICES"

// AdminDSN returns the test server's admin DSN. It skips the test when
// none is configured, or fails it under RequireEnv=1.
func AdminDSN(tb testing.TB) string {
	tb.Helper()
	admin := os.Getenv(DSNEnv)
	if admin == "" {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("%s is not set but %s=1: run the tests through scripts/test.sh", DSNEnv, RequireEnv)
		}
		tb.Skipf("%s not set: ClickHouse tests skipped (scripts/test.sh sets it)", DSNEnv)
	}
	return admin
}

// DSN creates a fresh database on the test server and returns a DSN naming
// it; the database is dropped when the test ends.
func DSN(tb testing.TB) string {
	tb.Helper()
	admin := AdminDSN(tb)
	u, err := url.Parse(admin)
	if err != nil {
		tb.Fatalf("bad %s: %v", DSNEnv, err)
	}
	opts, err := ch.ParseDSN(admin)
	if err != nil {
		tb.Fatalf("bad %s: %v", DSNEnv, err)
	}
	conn, err := ch.Open(opts)
	if err != nil {
		tb.Fatalf("connect to test clickhouse: %v", err)
	}
	var b [6]byte
	rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		conn.Close()
		tb.Fatalf("create test database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			tb.Errorf("drop test database %s: %v", name, err)
		}
		conn.Close()
	})
	u.Path = "/" + name
	return u.String()
}

// Open opens the usage store on a fresh database, closed after the test.
func Open(tb testing.TB) *clickhouse.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := clickhouse.Open(ctx, DSN(tb))
	if err != nil {
		tb.Fatalf("open clickhouse usage store: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}
