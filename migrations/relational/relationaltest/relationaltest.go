// Package relationaltest gives tests fresh, migrated databases: a temporary
// SQLite file always, and a fresh PostgreSQL database (created from
// AGENTMARKET_TEST_DATABASE_URL, dropped afterwards) when the test script
// provides one. With AGENTMARKET_TEST_REQUIRE_SERVICES=1 a missing DSN
// fails the test instead of skipping it, so CI can never skip silently.
package relationaltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the admin connection that creates test databases

	"github.com/agentmarket/agentmarket/migrations/relational"
)

// PostgresEnv names the variable with the admin DSN of the test server.
const PostgresEnv = "AGENTMARKET_TEST_DATABASE_URL"

// RequireEnv set to 1 turns skips for missing services into failures.
const RequireEnv = "AGENTMARKET_TEST_REQUIRE_SERVICES"

// SQLite opens a migrated SQLite database in a temporary file.
func SQLite(tb testing.TB) *relational.DB {
	tb.Helper()
	db, err := relational.OpenSQLite(context.Background(), filepath.Join(tb.TempDir(), "test.db"))
	if err != nil {
		tb.Fatalf("open sqlite: %v", err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// PostgresDSN creates a fresh database on the test server and returns its
// DSN; the database is dropped when the test ends. It skips (or fails,
// under RequireEnv) when no server is configured.
func PostgresDSN(tb testing.TB) string {
	tb.Helper()
	admin := os.Getenv(PostgresEnv)
	if admin == "" {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("%s is not set but %s=1: run the tests through scripts/test.sh", PostgresEnv, RequireEnv)
		}
		tb.Skipf("%s not set: PostgreSQL tests skipped (scripts/test.sh sets it)", PostgresEnv)
	}
	u, err := url.Parse(admin)
	if err != nil {
		tb.Fatalf("bad %s: %v", PostgresEnv, err)
	}
	var b [6]byte
	rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	adb, err := sql.Open("pgx", admin)
	if err != nil {
		tb.Fatalf("connect to test postgres: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adb.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		adb.Close()
		tb.Fatalf("create test database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		adb.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		adb.Close()
	})
	u.Path = "/" + name
	return u.String()
}

// Postgres opens a migrated, fresh PostgreSQL database.
func Postgres(tb testing.TB) *relational.DB {
	tb.Helper()
	db, err := relational.OpenPostgres(context.Background(), PostgresDSN(tb))
	if err != nil {
		tb.Fatalf("open postgres: %v", err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// Opener opens a fresh database of one dialect.
type Opener struct {
	Name string
	Open func(testing.TB) *relational.DB
}

// Openers lists every supported database, for contract suites that need a
// fresh database per case.
var Openers = []Opener{{"sqlite", SQLite}, {"postgres", Postgres}}

// Each runs f as a subtest against a fresh database of every dialect.
func Each(t *testing.T, f func(t *testing.T, db *relational.DB)) {
	for _, o := range Openers {
		t.Run(o.Name, func(t *testing.T) { f(t, o.Open(t)) })
	}
}
