// Package migrations holds the versioned SQL schema of every store and
// applies it at start. Files are named NNNN_description.sql, one directory
// per SQL dialect (postgres, sqlite) and one for ClickHouse; each file is
// applied once, in order, inside a transaction, and recorded in
// schema_migrations. Production never uses ORM auto-migration.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"
)

//go:embed postgres/*.sql sqlite/*.sql clickhouse/*.sql
var files embed.FS

// Dialect names a directory of migrations.
type Dialect string

const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
	// ClickHouse files are listed here but applied by metering/clickhouse,
	// not by Apply: ClickHouse has no transactions, so each file must be
	// idempotent (CREATE ... IF NOT EXISTS).
	ClickHouse Dialect = "clickhouse"
)

// Migration is one versioned SQL file.
type Migration struct {
	Version string // the file name without .sql, e.g. "0001_init"
	SQL     string
}

// List returns the migrations of a dialect in the order they apply.
func List(d Dialect) ([]Migration, error) {
	entries, err := fs.ReadDir(files, string(d))
	if err != nil {
		return nil, fmt.Errorf("migrations: unknown dialect %q: %w", d, err)
	}
	var out []Migration
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		b, err := files.ReadFile(path.Join(string(d), e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: strings.TrimSuffix(e.Name(), ".sql"), SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Apply brings db up to the newest migration of dialect d and returns the
// versions it applied. On PostgreSQL an advisory lock makes concurrent
// starts (a marketplace and several meters) apply each file exactly once.
func Apply(ctx context.Context, db *sql.DB, d Dialect) ([]string, error) {
	ms, err := List(d)
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations: connect: %w", err)
	}
	defer conn.Close()
	if d == Postgres {
		// The key is arbitrary but fixed, shared by every AgentMarket process.
		if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(726174836)"); err != nil {
			return nil, fmt.Errorf("migrations: lock: %w", err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(726174836)")
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version TEXT PRIMARY KEY, applied_at TEXT NOT NULL)`); err != nil {
		return nil, fmt.Errorf("migrations: create schema_migrations: %w", err)
	}
	done := map[string]bool{}
	rows, err := conn.QueryContext(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("migrations: read schema_migrations: %w", err)
	}
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, err
		}
		done[v] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var applied []string
	for _, m := range ms {
		if done[m.Version] {
			continue
		}
		if err := applyOne(ctx, conn, d, m); err != nil {
			return applied, err
		}
		applied = append(applied, m.Version)
	}
	return applied, nil
}

func applyOne(ctx context.Context, conn *sql.Conn, d Dialect, m Migration) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, stmt := range splitStatements(m.SQL) {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("migrations: %s/%s: %w\n%s", d, m.Version, err, stmt)
		}
	}
	mark := "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)"
	if d == SQLite {
		mark = "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)"
	}
	if _, err := tx.ExecContext(ctx, mark, m.Version, time.Now().UTC().Format(time.RFC3339)); err != nil {
		return fmt.Errorf("migrations: record %s: %w", m.Version, err)
	}
	return tx.Commit()
}

// splitStatements cuts a migration file at semicolons that end a line.
// Migrations keep to that form (no semicolons inside string literals or
// bodies), which the tests check.
func splitStatements(sqlText string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(sqlText, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "--") || trimmed == "" {
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if strings.HasSuffix(trimmed, ";") {
			if s := strings.TrimSpace(cur.String()); s != "" {
				out = append(out, strings.TrimSuffix(s, ";"))
			}
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}
