package migrations_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// A schema is what the migrations leave in a database, as facts that mean
// the same on both dialects: "column listings.name" → "text not null".
// Every fact belongs to a table, so a table that exists in one dialect only
// can be named once, with all its facts.
type schema map[string]fact

type fact struct {
	table string
	value string
}

func (s schema) add(table, key, value string) { s[key] = fact{table, value} }

// knownDifference is a difference between the dialects' schemas that is
// meant to be there. A key that starts with "table " covers every fact of
// that table; any other key covers that fact alone. sqlite and postgres
// are the fact's value in each, "" where it is absent.
type knownDifference struct {
	key, sqlite, postgres string
}

// knownDifferences lists every way the applied schemas differ on purpose;
// TestDialectSchemasMatch fails on any other difference, and on an entry
// here that no longer occurs.
var knownDifferences = []knownDifference{
	// Catalog search keeps each listing's words in FTS5 on SQLite and in a
	// tsvector with a GIN index on PostgreSQL (0030/0031_catalog_search):
	// the same words either way, indexed by each database's own full-text
	// engine. listing_fts is the FTS5 index (its shadow tables are left out
	// of the SQLite schema); listing_fts_doc keeps what each FTS5 document
	// was inserted with, because a contentless FTS5 table forgets its text
	// and deleting a document takes those very words; listing_documents
	// holds PostgreSQL's tsvector beside copies of the columns a full-text
	// search filters and sorts on, so it never joins.
	{key: "table listing_fts", sqlite: "virtual table (fts5)"},
	{key: "table listing_fts_doc", sqlite: "table"},
	{key: "table listing_documents", postgres: "table"},
}

// TestDialectSchemasMatch applies every migration to a fresh SQLite and a
// fresh PostgreSQL database, reads back what they built (tables; columns
// with a type class, integer/text/bool/timestamp/bytes/numeric/float, and
// nullability; primary keys; unique constraints; indexes with their
// columns, order, uniqueness and whether they are partial; foreign keys)
// and fails on every difference that knownDifferences does not list.
//
// Not compared, as the dialects differ there by nature: column order,
// defaults, CHECK constraints, collations (PostgreSQL's "C" columns sort as
// SQLite's binary ones do), the text of index expressions and partial
// index predicates (each database rewrites them its own way: only their
// presence is compared), and integer widths (SQLite has one integer type).
func TestDialectSchemasMatch(t *testing.T) {
	ctx := context.Background()
	liteDB, err := relationaltest.SQLite(t).DB.DB()
	if err != nil {
		t.Fatal(err)
	}
	lite := sqliteSchema(ctx, t, liteDB)
	if len(lite) == 0 {
		t.Fatal("read no schema from SQLite")
	}
	for _, k := range knownDifferences {
		if k.sqlite != "" && lite[k.key].value != k.sqlite {
			t.Errorf("known difference %q: SQLite has %q, the table says %q", k.key, lite[k.key].value, k.sqlite)
		}
	}

	t.Run("postgres", func(t *testing.T) {
		if os.Getenv(relationaltest.PostgresEnv) == "" && os.Getenv(relationaltest.RequireEnv) != "1" {
			t.Skipf("%s not set: the PostgreSQL half skipped, so the schemas were not compared (scripts/test.sh starts PostgreSQL and sets it)", relationaltest.PostgresEnv)
		}
		pgDB, err := relationaltest.Postgres(t).DB.DB()
		if err != nil {
			t.Fatal(err)
		}
		pg := postgresSchema(ctx, t, pgDB)
		for _, d := range compareSchemas(lite, pg, knownDifferences) {
			t.Error(d)
		}
		t.Logf("compared %d facts from SQLite with %d from PostgreSQL", len(lite), len(pg))
	})
}

// compareSchemas returns every difference between the two schemas that
// known does not list, and every entry of known that did not occur, sorted.
func compareSchemas(lite, pg schema, known []knownDifference) []string {
	knownTable := map[string]knownDifference{}
	knownFact := map[string]knownDifference{}
	for _, k := range known {
		if name, ok := strings.CutPrefix(k.key, "table "); ok {
			knownTable[name] = k
		} else {
			knownFact[k.key] = k
		}
	}
	seen := map[string]bool{}
	var out []string
	keys := map[string]bool{}
	for k := range lite {
		keys[k] = true
	}
	for k := range pg {
		keys[k] = true
	}
	for key := range keys {
		l, p := lite[key], pg[key]
		if l.value == p.value {
			continue
		}
		table := l.table
		if table == "" {
			table = p.table
		}
		if k, ok := knownTable[table]; ok {
			if key == k.key && (l.value != k.sqlite || p.value != k.postgres) {
				out = append(out, fmt.Sprintf("known difference %s: SQLite has %s, PostgreSQL has %s; the table says %s and %s",
					key, describe(l.value), describe(p.value), describe(k.sqlite), describe(k.postgres)))
			}
			seen[k.key] = true
			continue
		}
		if k, ok := knownFact[key]; ok && l.value == k.sqlite && p.value == k.postgres {
			seen[k.key] = true
			continue
		}
		out = append(out, fmt.Sprintf("%s: SQLite has %s, PostgreSQL has %s", key, describe(l.value), describe(p.value)))
	}
	for _, k := range known {
		if !seen[k.key] {
			out = append(out, fmt.Sprintf("known difference %s no longer occurs: remove it from knownDifferences", k.key))
		}
	}
	slices.Sort(out)
	return out
}

func TestCompareSchemas(t *testing.T) {
	base := func() schema {
		s := schema{}
		s.add("orgs", "table orgs", "table")
		s.add("orgs", "column orgs.id", "text not null")
		s.add("orgs", "index orgs_name", "on orgs (name)")
		return s
	}
	known := []knownDifference{
		{key: "table fts", sqlite: "virtual table (fts5)"},
		{key: "column orgs.note", postgres: "text null"},
	}
	withKnown := func(s schema, sqlite bool) schema {
		if sqlite {
			s.add("fts", "table fts", "virtual table (fts5)")
			s.add("fts", "column fts.a", "? ")
		} else {
			s.add("orgs", "column orgs.note", "text null")
		}
		return s
	}
	for _, c := range []struct {
		name     string
		lite, pg func(schema) schema
		want     []string
	}{
		{"only known differences", nil, nil, nil},
		{"a type class", nil, func(s schema) schema { s.add("orgs", "column orgs.id", "integer not null"); return s },
			[]string{`column orgs.id: SQLite has "text not null", PostgreSQL has "integer not null"`}},
		{"a missing index", func(s schema) schema { delete(s, "index orgs_name"); return s }, nil,
			[]string{`index orgs_name: SQLite has nothing, PostgreSQL has "on orgs (name)"`}},
		{"a known difference gone", nil, func(s schema) schema { delete(s, "column orgs.note"); return s },
			[]string{"known difference column orgs.note no longer occurs: remove it from knownDifferences"}},
		{"a known table changed", func(s schema) schema { s.add("fts", "table fts", "table"); return s }, nil,
			[]string{`known difference table fts: SQLite has "table", PostgreSQL has nothing; the table says "virtual table (fts5)" and nothing`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			lite, pg := withKnown(base(), true), withKnown(base(), false)
			if c.lite != nil {
				lite = c.lite(lite)
			}
			if c.pg != nil {
				pg = c.pg(pg)
			}
			if got := compareSchemas(lite, pg, known); !slices.Equal(got, c.want) {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

func describe(v string) string {
	if v == "" {
		return "nothing"
	}
	return strconv.Quote(v)
}

func nullability(notNull bool) string {
	if notNull {
		return "not null"
	}
	return "null"
}

// typeClass maps a declared SQLite type or a PostgreSQL data_type to the
// class both dialects agree on; "?" for a type this test does not know.
func typeClass(declared string) string {
	t := strings.ToLower(declared)
	switch {
	case strings.Contains(t, "int") || strings.Contains(t, "serial"):
		return "integer"
	case strings.Contains(t, "timestamp") || strings.Contains(t, "date") || strings.Contains(t, "time"):
		return "timestamp"
	case strings.Contains(t, "bool"):
		return "bool"
	case strings.Contains(t, "char") || strings.Contains(t, "text") || strings.Contains(t, "clob"):
		return "text"
	case t == "blob" || t == "bytea":
		return "bytes"
	case strings.Contains(t, "numeric") || strings.Contains(t, "decimal"):
		return "numeric"
	case strings.Contains(t, "real") || strings.Contains(t, "double") || strings.Contains(t, "float"):
		return "float"
	case t == "tsvector":
		return "tsvector"
	}
	return "? " + declared
}

func indexValue(unique bool, table string, cols []string, partial bool, method string) string {
	v := "on " + table + " (" + strings.Join(cols, ", ") + ")"
	if unique {
		v = "unique " + v
	}
	if method != "" && method != "btree" {
		v += " using " + method
	}
	if partial {
		v += " where …"
	}
	return v
}

// queryRows runs q and calls scan for every row.
func queryRows(ctx context.Context, t *testing.T, db *sql.DB, q string, args []any, scan func(*sql.Rows) error) {
	t.Helper()
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func sqliteSchema(ctx context.Context, t *testing.T, db *sql.DB) schema {
	t.Helper()
	s := schema{}
	type table struct{ name, kind string }
	var tables []table
	// table_list names FTS5's shadow tables as such: they are the virtual
	// table's storage, not schema of their own. sqlite_* tables
	// (sqlite_sequence for AUTOINCREMENT) are SQLite's.
	queryRows(ctx, t, db, "SELECT name, type FROM pragma_table_list WHERE schema = 'main' AND type IN ('table', 'virtual') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'", nil,
		func(r *sql.Rows) error {
			var tb table
			err := r.Scan(&tb.name, &tb.kind)
			tables = append(tables, tb)
			return err
		})
	for _, tb := range tables {
		if tb.kind == "virtual" {
			var ddl string
			if err := db.QueryRowContext(ctx, "SELECT sql FROM sqlite_master WHERE name = ?", tb.name).Scan(&ddl); err != nil {
				t.Fatal(err)
			}
			module := "?"
			if _, rest, ok := strings.Cut(strings.ToLower(ddl), " using "); ok {
				module, _, _ = strings.Cut(strings.TrimSpace(rest), "(")
			}
			s.add(tb.name, "table "+tb.name, "virtual table ("+strings.TrimSpace(module)+")")
			continue
		}
		s.add(tb.name, "table "+tb.name, "table")
		pk := map[int]string{}
		queryRows(ctx, t, db, "SELECT name, type, \"notnull\", pk FROM pragma_table_info(?)", []any{tb.name}, func(r *sql.Rows) error {
			var name, typ string
			var notNull bool
			var pkPos int
			if err := r.Scan(&name, &typ, &notNull, &pkPos); err != nil {
				return err
			}
			if pkPos > 0 {
				pk[pkPos] = name
				// A primary key column of a rowid table takes NULL unless
				// declared NOT NULL (a legacy quirk SQLite keeps); it never
				// holds one here, and PostgreSQL makes it NOT NULL itself.
				notNull = true
			}
			s.add(tb.name, "column "+tb.name+"."+name, typeClass(typ)+" "+nullability(notNull))
			return nil
		})
		if len(pk) > 0 {
			cols := make([]string, len(pk))
			for i, c := range pk {
				cols[i-1] = c
			}
			s.add(tb.name, "primary key "+tb.name, "("+strings.Join(cols, ", ")+")")
		}

		type index struct {
			name, origin    string
			unique, partial bool
		}
		var indexes []index
		queryRows(ctx, t, db, "SELECT name, \"unique\", origin, partial FROM pragma_index_list(?)", []any{tb.name}, func(r *sql.Rows) error {
			var ix index
			err := r.Scan(&ix.name, &ix.unique, &ix.origin, &ix.partial)
			indexes = append(indexes, ix)
			return err
		})
		for _, ix := range indexes {
			if ix.origin == "pk" {
				continue // the primary key, above
			}
			var cols []string
			queryRows(ctx, t, db, "SELECT cid, name, \"desc\" FROM pragma_index_xinfo(?) WHERE key ORDER BY seqno", []any{ix.name}, func(r *sql.Rows) error {
				var cid int
				var name sql.NullString
				var desc bool
				if err := r.Scan(&cid, &name, &desc); err != nil {
					return err
				}
				c := name.String
				if cid == -2 {
					c = "<expression>"
				}
				if desc {
					c += " DESC"
				}
				cols = append(cols, c)
				return nil
			})
			if ix.origin == "u" {
				// A UNIQUE constraint: its index's name is SQLite's own.
				s.add(tb.name, "unique "+tb.name+" ("+strings.Join(cols, ", ")+")", "constraint")
				continue
			}
			s.add(tb.name, "index "+ix.name, indexValue(ix.unique, tb.name, cols, ix.partial, ""))
		}

		type fk struct {
			to, onDelete string
			from, refs   []string
		}
		fks := map[int]*fk{}
		queryRows(ctx, t, db, "SELECT id, \"table\", \"from\", \"to\", on_delete FROM pragma_foreign_key_list(?) ORDER BY id, seq", []any{tb.name}, func(r *sql.Rows) error {
			var id int
			var to, from, onDelete string
			var ref sql.NullString
			if err := r.Scan(&id, &to, &from, &ref, &onDelete); err != nil {
				return err
			}
			f := fks[id]
			if f == nil {
				f = &fk{to: to, onDelete: strings.ToLower(onDelete)}
				fks[id] = f
			}
			f.from = append(f.from, from)
			f.refs = append(f.refs, ref.String)
			return nil
		})
		for _, f := range fks {
			if slices.Contains(f.refs, "") {
				// REFERENCES t without columns: t's primary key.
				f.refs = sqlitePrimaryKey(ctx, t, db, f.to)
			}
			s.add(tb.name, "foreign key "+tb.name+" ("+strings.Join(f.from, ", ")+")",
				"references "+f.to+" ("+strings.Join(f.refs, ", ")+") on delete "+f.onDelete)
		}
	}
	return s
}

func sqlitePrimaryKey(ctx context.Context, t *testing.T, db *sql.DB, table string) []string {
	t.Helper()
	var cols []string
	queryRows(ctx, t, db, "SELECT name FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk", []any{table}, func(r *sql.Rows) error {
		var c string
		err := r.Scan(&c)
		cols = append(cols, c)
		return err
	})
	return cols
}

func postgresSchema(ctx context.Context, t *testing.T, db *sql.DB) schema {
	t.Helper()
	s := schema{}
	queryRows(ctx, t, db, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`, nil, func(r *sql.Rows) error {
		var name string
		err := r.Scan(&name)
		s.add(name, "table "+name, "table")
		return err
	})
	queryRows(ctx, t, db, `SELECT table_name, column_name, data_type, is_nullable = 'NO'
		FROM information_schema.columns WHERE table_schema = current_schema()`, nil, func(r *sql.Rows) error {
		var table, column, typ string
		var notNull bool
		if err := r.Scan(&table, &column, &typ, &notNull); err != nil {
			return err
		}
		if _, ok := s["table "+table]; ok { // not a view's column
			s.add(table, "column "+table+"."+column, typeClass(typ)+" "+nullability(notNull))
		}
		return nil
	})

	type index struct {
		oid                      int64
		table, name, kind, meth  string
		unique, primary, partial bool
		columns                  int
		options                  string
	}
	var indexes []index
	queryRows(ctx, t, db, `SELECT ix.indexrelid::bigint, tc.relname, ic.relname, ix.indisunique, ix.indisprimary,
			ix.indpred IS NOT NULL, COALESCE(con.contype::text, ''), am.amname, ix.indnkeyatts, ix.indoption::text
		FROM pg_index ix
		JOIN pg_class tc ON tc.oid = ix.indrelid
		JOIN pg_class ic ON ic.oid = ix.indexrelid
		JOIN pg_am am ON am.oid = ic.relam
		LEFT JOIN pg_constraint con ON con.conindid = ix.indexrelid AND con.contype IN ('p', 'u')
		WHERE tc.relnamespace = current_schema()::regnamespace`, nil, func(r *sql.Rows) error {
		var ix index
		err := r.Scan(&ix.oid, &ix.table, &ix.name, &ix.unique, &ix.primary, &ix.partial, &ix.kind, &ix.meth, &ix.columns, &ix.options)
		indexes = append(indexes, ix)
		return err
	})
	for _, ix := range indexes {
		options := strings.Fields(ix.options)
		var cols []string
		for k := 1; k <= ix.columns; k++ {
			// int2vector counts from 0; attnum 0 is an expression.
			var name sql.NullString
			err := db.QueryRowContext(ctx, `SELECT a.attname FROM pg_index ix
				LEFT JOIN pg_attribute a ON a.attrelid = ix.indrelid AND a.attnum = ix.indkey[$2 - 1] AND a.attnum > 0
				WHERE ix.indexrelid = $1::bigint::oid`, ix.oid, k).Scan(&name)
			if err != nil {
				t.Fatal(err)
			}
			c := name.String
			if !name.Valid {
				c = "<expression>"
			}
			if o, _ := strconv.Atoi(options[k-1]); o&1 == 1 { // INDOPTION_DESC
				c += " DESC"
			}
			cols = append(cols, c)
		}
		switch {
		case ix.primary:
			s.add(ix.table, "primary key "+ix.table, "("+strings.Join(cols, ", ")+")")
		case ix.kind == "u":
			s.add(ix.table, "unique "+ix.table+" ("+strings.Join(cols, ", ")+")", "constraint")
		default:
			s.add(ix.table, "index "+ix.name, indexValue(ix.unique, ix.table, cols, ix.partial, ix.meth))
		}
	}

	onDelete := map[string]string{"a": "no action", "r": "restrict", "c": "cascade", "n": "set null", "d": "set default"}
	queryRows(ctx, t, db, `SELECT tc.relname, rc.relname, con.confdeltype::text,
			array_to_string(ARRAY(SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY AS k(attnum, n)
				JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum ORDER BY k.n), ', '),
			array_to_string(ARRAY(SELECT a.attname FROM unnest(con.confkey) WITH ORDINALITY AS k(attnum, n)
				JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.attnum ORDER BY k.n), ', ')
		FROM pg_constraint con
		JOIN pg_class tc ON tc.oid = con.conrelid
		JOIN pg_class rc ON rc.oid = con.confrelid
		WHERE con.contype = 'f' AND con.connamespace = current_schema()::regnamespace`, nil, func(r *sql.Rows) error {
		var table, to, del, from, refs string
		if err := r.Scan(&table, &to, &del, &from, &refs); err != nil {
			return err
		}
		s.add(table, "foreign key "+table+" ("+from+")", "references "+to+" ("+refs+") on delete "+onDelete[del])
		return nil
	})
	return s
}
