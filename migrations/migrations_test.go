package migrations_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/agentmarket/agentmarket/migrations"
	"github.com/agentmarket/agentmarket/migrations/gormdb/gormdbtest"
)

var dialects = []migrations.Dialect{migrations.Postgres, migrations.SQLite}

func versions(t *testing.T, d migrations.Dialect) []string {
	t.Helper()
	ms, err := migrations.List(d)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		out = append(out, m.Version)
	}
	return out
}

func TestList(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			vs := versions(t, d)
			if len(vs) == 0 {
				t.Fatal("no migrations")
			}
			if !slices.IsSorted(vs) {
				t.Errorf("versions %v are not in order", vs)
			}
			for _, v := range vs {
				if len(v) < 6 || strings.Trim(v[:4], "0123456789") != "" || v[4] != '_' {
					t.Errorf("version %q is not named NNNN_description", v)
				}
			}
		})
	}
	if _, err := migrations.List("clickhouse-typo"); err == nil {
		t.Error("List of an unknown dialect succeeded")
	}
}

func TestDialectsHaveTheSameVersions(t *testing.T) {
	pg, lite := versions(t, migrations.Postgres), versions(t, migrations.SQLite)
	if !slices.Equal(pg, lite) {
		t.Errorf("postgres has %v, sqlite has %v; every schema change needs a file in both", pg, lite)
	}
}

// TestStatementForm checks what the statement splitter relies on: in code
// lines a semicolon appears only as the last character, and comments take
// whole lines (the splitter drops those; a comment after code would hide
// the semicolon that ends the statement).
func TestStatementForm(t *testing.T) {
	for _, d := range dialects {
		ms, err := migrations.List(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			for i, line := range strings.Split(m.SQL, "\n") {
				trimmed := strings.TrimSpace(line)
				n := strings.Count(trimmed, ";")
				switch {
				case strings.HasPrefix(trimmed, "--"):
					// dropped by the splitter, whatever it holds
				case strings.Contains(trimmed, "--"):
					t.Errorf("%s/%s line %d: comment after code (would hide the end of a statement): %q", d, m.Version, i+1, line)
				case n > 1 || (n == 1 && !strings.HasSuffix(trimmed, ";")):
					t.Errorf("%s/%s line %d: semicolon inside a line: %q", d, m.Version, i+1, line)
				}
			}
			if last := strings.TrimSpace(m.SQL); !strings.HasSuffix(last, ";") {
				t.Errorf("%s/%s does not end with a semicolon", d, m.Version)
			}
		}
	}
}

// rawOpeners open empty databases of each dialect, with no migration
// applied, as *sql.DB.
var rawOpeners = []struct {
	dialect migrations.Dialect
	open    func(t *testing.T) *sql.DB
}{
	{migrations.SQLite, func(t *testing.T) *sql.DB {
		g, err := gorm.Open(sqlite.Open(filepath.Join(t.TempDir(), "raw.db")+"?_pragma=foreign_keys(1)"), &gorm.Config{Logger: logger.Discard})
		if err != nil {
			t.Fatal(err)
		}
		db, err := g.DB()
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		t.Cleanup(func() { db.Close() })
		return db
	}},
	{migrations.Postgres, func(t *testing.T) *sql.DB {
		db, err := sql.Open("pgx", gormdbtest.PostgresDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}},
}

func TestApplyOnEmptyDatabase(t *testing.T) {
	ctx := context.Background()
	for _, o := range rawOpeners {
		t.Run(string(o.dialect), func(t *testing.T) {
			db := o.open(t)
			applied, err := migrations.Apply(ctx, db, o.dialect)
			if err != nil {
				t.Fatalf("first Apply: %v", err)
			}
			if want := versions(t, o.dialect); !slices.Equal(applied, want) {
				t.Errorf("first Apply applied %v, want %v", applied, want)
			}
			again, err := migrations.Apply(ctx, db, o.dialect)
			if err != nil {
				t.Fatalf("second Apply: %v", err)
			}
			if len(again) != 0 {
				t.Errorf("second Apply applied %v, want nothing", again)
			}
		})
	}
}

// TestApplyTwice opens each dialect the way the binaries do (which runs
// every statement of every file) and applies again.
func TestApplyTwice(t *testing.T) {
	ctx := context.Background()
	for _, o := range gormdbtest.Openers {
		t.Run(o.Name, func(t *testing.T) {
			db := o.Open(t)
			sqlDB, err := db.DB.DB()
			if err != nil {
				t.Fatal(err)
			}
			applied, err := migrations.Apply(ctx, sqlDB, db.Dialect)
			if err != nil {
				t.Fatalf("Apply on a migrated database: %v", err)
			}
			if len(applied) != 0 {
				t.Errorf("Apply on a migrated database applied %v, want nothing", applied)
			}
			var recorded []string
			rows, err := sqlDB.QueryContext(ctx, "SELECT version FROM schema_migrations ORDER BY version")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var v string
				if err := rows.Scan(&v); err != nil {
					t.Fatal(err)
				}
				recorded = append(recorded, v)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if want := versions(t, db.Dialect); !slices.Equal(recorded, want) {
				t.Errorf("schema_migrations holds %v, want %v", recorded, want)
			}
		})
	}
}

// TestApplyConcurrently starts several processes' worth of Apply on one
// empty PostgreSQL database: each file must be applied exactly once.
func TestApplyConcurrently(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("pgx", gormdbtest.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })

	const n = 4
	var wg sync.WaitGroup
	results := make([][]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { results[i], errs[i] = migrations.Apply(ctx, db, migrations.Postgres) })
	}
	wg.Wait()
	var all []string
	for i := range n {
		if errs[i] != nil {
			t.Errorf("Apply %d: %v", i, errs[i])
		}
		all = append(all, results[i]...)
	}
	slices.Sort(all)
	if want := versions(t, migrations.Postgres); !slices.Equal(all, want) {
		t.Errorf("applied across all runs: %v, want each of %v once", all, want)
	}
}
