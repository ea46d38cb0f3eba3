package migrations_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/agentmarket/agentmarket/migrations"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
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
		db, err := sql.Open("pgx", relationaltest.PostgresDSN(t))
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
	for _, o := range relationaltest.Openers {
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
	db, err := sql.Open("pgx", relationaltest.PostgresDSN(t))
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

// TestAmountBounds: amounts stored before they were bounded are brought
// within the bounds by 0013_amount_bounds (run here on data written just
// before it); amounts within them, and absent budgets, are left alone.
func TestAmountBounds(t *testing.T) {
	ctx := context.Background()
	const maxI = "9223372036854775807"
	const at = "'2026-01-01 00:00:00'"
	for _, o := range rawOpeners {
		t.Run(string(o.dialect), func(t *testing.T) {
			db := o.open(t)
			if _, err := migrations.Apply(ctx, db, o.dialect); err != nil {
				t.Fatal(err)
			}
			plan := func(version int, v string) string {
				return "INSERT INTO listing_plans (listing_id, version, currency, monthly_fee_micros, input_tokens_per_million_micros," +
					" output_tokens_per_million_micros, compute_per_hour_micros, per_task_micros, included_input_tokens," +
					" included_output_tokens, included_compute_ms, included_tasks, created_at) VALUES ('lst_1', " + strconv.Itoa(version) +
					", 'usd', " + strings.Repeat(v+", ", 9) + at + ")"
			}
			for _, stmt := range []string{
				"INSERT INTO orgs (id, name, created_at) VALUES ('org_s', 'Seller', " + at + ")",
				"INSERT INTO orgs (id, name, created_at) VALUES ('org_b', 'Buyer', " + at + ")",
				"INSERT INTO orgs (id, name, created_at) VALUES ('org_c', 'Another buyer', " + at + ")",
				"INSERT INTO listings (id, seller_org_id, status, health, name, description, card_json, card_hash, card_fetched_at," +
					" protocol_versions, streaming, push_notifications, search_text, plan_version, currency, monthly_fee_micros," +
					" refresh_seconds, created_at, updated_at) VALUES ('lst_1', 'org_s', 'published', 'healthy', 'L', 'd', '{}', 'h', " + at +
					", '0.3', FALSE, FALSE, 'l', 1, 'usd', " + maxI + ", 3600, " + at + ", " + at + ")",
				plan(1, maxI),
				plan(2, "7"),
				"INSERT INTO api_keys (id, org_id, name, prefix, hash, role, monthly_budget_micros, created_at) VALUES ('key_big', 'org_b', 'k', 'p', 'h1', 'buyer', " + maxI + ", " + at + ")",
				"INSERT INTO api_keys (id, org_id, name, prefix, hash, role, monthly_budget_micros, created_at) VALUES ('key_small', 'org_b', 'k', 'p', 'h2', 'buyer', 5, " + at + ")",
				"INSERT INTO api_keys (id, org_id, name, prefix, hash, role, created_at) VALUES ('key_none', 'org_b', 'k', 'p', 'h3', 'buyer', " + at + ")",
				"INSERT INTO contracts (id, buyer_org_id, listing_id, seller_org_id, plan_version, status, monthly_budget_micros, created_at, updated_at)" +
					" VALUES ('ctr_big', 'org_b', 'lst_1', 'org_s', 1, 'active', " + maxI + ", " + at + ", " + at + ")",
				"INSERT INTO contracts (id, buyer_org_id, listing_id, seller_org_id, plan_version, status, created_at, updated_at)" +
					" VALUES ('ctr_none', 'org_c', 'lst_1', 'org_s', 2, 'active', " + at + ", " + at + ")",
				"DELETE FROM schema_migrations WHERE version = '0013_amount_bounds'",
			} {
				if _, err := db.ExecContext(ctx, stmt); err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
			}
			applied, err := migrations.Apply(ctx, db, o.dialect)
			if err != nil || !slices.Equal(applied, []string{"0013_amount_bounds"}) {
				t.Fatalf("Apply = %v, %v; want [0013_amount_bounds]", applied, err)
			}
			for _, c := range []struct{ query, want string }{
				{"SELECT monthly_fee_micros, input_tokens_per_million_micros, output_tokens_per_million_micros, compute_per_hour_micros," +
					" per_task_micros, included_input_tokens, included_output_tokens, included_compute_ms, included_tasks" +
					" FROM listing_plans ORDER BY version",
					"10000000000000 10000000000 10000000000 10000000000 10000000000 1000000000000 1000000000000 1000000000000 1000000000000 " +
						"7 7 7 7 7 7 7 7 7"},
				{"SELECT monthly_fee_micros FROM listings", "10000000000000"},
				{"SELECT COALESCE(monthly_budget_micros, -1) FROM api_keys ORDER BY id", "1000000000000000 -1 5"},
				{"SELECT COALESCE(monthly_budget_micros, -1) FROM contracts ORDER BY id", "1000000000000000 -1"},
			} {
				if got := queryInts(t, db, c.query); got != c.want {
					t.Errorf("%s\n got  %s\n want %s", c.query, got, c.want)
				}
			}
		})
	}
}

// queryInts runs query and returns every integer it answers, in order,
// separated by spaces.
func queryInts(t *testing.T, db *sql.DB, query string) string {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vs := make([]int64, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vs {
			ptrs[i] = &vs[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			out = append(out, strconv.FormatInt(v, 10))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, " ")
}
