// Package relational is the relational base of every GORM store
// (listings, contracts, billing and the meter's ledger): it opens the
// database through GORM, PostgreSQL for a DSN or pure-Go SQLite (no cgo)
// for a file, brings it to the newest schema with the versioned migrations,
// and translates driver errors into the application's error kinds.
//
// It lives under migrations/ because it is the one place that applies the
// postgres and sqlite migrations: a store gets a database only through it,
// so no store can see a schema older than its code. The ClickHouse meter
// applies its own files and does not use it.
package relational

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/migrations"
)

// DB is an open, migrated database.
type DB struct {
	*gorm.DB
	Dialect migrations.Dialect
	// Path is the SQLite file's ("" for PostgreSQL), for writers that open
	// a connection of their own to it (sqlitec).
	Path string
}

// OpenPostgres opens PostgreSQL at dsn and applies the migrations.
func OpenPostgres(ctx context.Context, dsn string) (*DB, error) {
	g, err := gorm.Open(postgres.Open(dsn), config())
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	sqlDB, err := g.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(20)
	sqlDB.SetMaxIdleConns(10)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	return migrate(ctx, g, migrations.Postgres)
}

// SQLitePragmas are how every connection to the embedded database is set,
// the driver's and those a writer opens of its own (sqlitec): WAL, so
// that readers work beside the one writer, and a busy timeout queueing
// writers.
var SQLitePragmas = []string{"foreign_keys(1)", "journal_mode(WAL)", "busy_timeout(5000)", "synchronous(NORMAL)", "mmap_size(1073741824)",
	"temp_store(MEMORY)", "cache_size(-32768)"}

// OpenSQLite opens (creating) the SQLite file at path and applies the
// migrations. WAL mode and a busy timeout let the marketplace and its
// in-process meter share the file.
func OpenSQLite(ctx context.Context, path string) (*DB, error) {
	if path != ":memory:" {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
	}
	dsn := path + "?"
	for _, p := range SQLitePragmas {
		dsn += "_pragma=" + p + "&"
	}
	dsn += "_txlock=immediate"
	g, err := gorm.Open(sqlite.Open(dsn), config())
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	sqlDB, err := g.DB()
	if err != nil {
		return nil, err
	}
	// One writer at a time is SQLite's rule, and WAL lets readers work
	// beside it: a few connections, with the busy timeout queueing writers.
	// ":memory:" needs a single connection to stay one database.
	if path == ":memory:" {
		sqlDB.SetMaxOpenConns(1)
	} else {
		sqlDB.SetMaxOpenConns(4)
		sqlDB.SetMaxIdleConns(4)
	}
	db, err := migrate(ctx, g, migrations.SQLite)
	if err != nil {
		return nil, err
	}
	if path != ":memory:" {
		db.Path = path
	}
	return db, nil
}

func config() *gorm.Config {
	return &gorm.Config{
		Logger:                 logger.Discard,
		TranslateError:         true,
		SkipDefaultTransaction: true,
		// The meter runs the same few statements on every call: parse each
		// once per connection.
		PrepareStmt: true,
		NowFunc:     func() time.Time { return time.Now().UTC() },
	}
}

func migrate(ctx context.Context, g *gorm.DB, d migrations.Dialect) (*DB, error) {
	sqlDB, err := g.DB()
	if err != nil {
		return nil, err
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("connect to %s: %w", d, err)
	}
	if _, err := migrations.Apply(ctx, sqlDB, d); err != nil {
		return nil, err
	}
	return &DB{DB: g, Dialect: d}, nil
}

// Close closes the database.
func (db *DB) Close() error {
	sqlDB, err := db.DB.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// Ping checks that the database answers (for /readyz).
func (db *DB) Ping(ctx context.Context) error {
	sqlDB, err := db.DB.DB()
	if err != nil {
		return err
	}
	return sqlDB.PingContext(ctx)
}

// Version names the server and its version, like "PostgreSQL 15.5" or
// "SQLite 3.46.0"; it also proves the database answers.
func (db *DB) Version(ctx context.Context) (string, error) {
	q, name := "SHOW server_version", "PostgreSQL"
	if db.Dialect == migrations.SQLite {
		q, name = "SELECT sqlite_version()", "SQLite"
	}
	var v string
	if err := db.DB.WithContext(ctx).Raw(q).Scan(&v).Error; err != nil {
		return "", err
	}
	return name + " " + v, nil
}

// Translate maps a GORM or driver error to the application's error kinds;
// what names the thing concerned ("listing", "api key").
func Translate(err error, what string) error {
	if err == nil {
		return nil
	}
	var ae *agentmarket.Error
	if errors.As(err, &ae) {
		return err
	}
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return agentmarket.Errorf(agentmarket.NotFound, strings.ReplaceAll(what, " ", "_")+"_not_found", "%s not found", what)
	}
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return agentmarket.Wrap(agentmarket.Conflict, "conflict", err, "%s already exists", what)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return agentmarket.Wrap(agentmarket.Unavailable, "database_timeout", err, "the database did not answer in time")
	}
	return agentmarket.Wrap(agentmarket.Internal, "database_error", err, "the database failed")
}

// InsertRows writes rows (each one value per column, in order) into table
// with one multi-row INSERT per chunk of at most perStatement rows: the
// pure-Go SQLite driver parses a statement on every execution, and GORM's
// batched create reads each row back into its struct, so for the rows the
// meter's projections write, one long statement is what costs least. The
// caller translates the error.
func InsertRows(tx *gorm.DB, table string, columns []string, rows [][]any, perStatement int) error {
	one := "(?" + strings.Repeat(", ?", len(columns)-1) + ")"
	for start := 0; start < len(rows); start += perStatement {
		part := rows[start:min(start+perStatement, len(rows))]
		var b strings.Builder
		b.WriteString("INSERT INTO " + table + " (" + strings.Join(columns, ", ") + ") VALUES ")
		args := make([]any, 0, len(columns)*len(part))
		for i, r := range part {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(one)
			args = append(args, r...)
		}
		if err := tx.Exec(b.String(), args...).Error; err != nil {
			return err
		}
	}
	return nil
}
