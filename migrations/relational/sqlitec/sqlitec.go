// Package sqlitec is a connection to a SQLite file through SQLite's C API
// (modernc.org/sqlite/lib, the transpiled C the database/sql driver sits
// on) called directly, for the writers whose rows the driver makes too
// dear: it prepares a statement again at every execution, binds
// parameters in time quadratic in their number and copies every text value
// into a C allocation of its own. Here statements are prepared once,
// parameters are bound by index, and text is copied into one reused C
// buffer that SQLite reads in place (SQLITE_STATIC) until the statement is
// reset.
//
// A Conn is not safe for concurrent use (nor is its libc TLS, the C stack
// of its calls): its owner serializes every call.
package sqlitec

import (
	"errors"
	"fmt"
	"unsafe"

	"modernc.org/libc"
	"modernc.org/libc/sys/types"
	sqlite3 "modernc.org/sqlite/lib"
)

// Conn is one connection, its statements and its text buffer.
type Conn struct {
	tls   *libc.TLS
	db    uintptr // sqlite3 *
	stmts []Stmt
	// begin, commit and rollback are Tx's.
	begin, commit, rollback Stmt
	text                    arena
	// bindRC is the first failed bind's result code since the last Bound.
	bindRC int32
	// out is C memory for an address a call hands back.
	out uintptr
}

// Stmt is a prepared statement (sqlite3_stmt *), kept for the Conn's life.
type Stmt uintptr

const (
	ptrSize = unsafe.Sizeof(uintptr(0))
	// static is SQLITE_STATIC: the bound text stays put until the
	// statement is reset.
	static = 0
)

// Open opens a connection to the file at path and sets each PRAGMA of
// pragmas ("journal_mode(WAL)" and the like). It takes no connection mutex:
// the caller serializes.
func Open(path string, pragmas []string) (_ *Conn, err error) {
	c := &Conn{tls: libc.NewTLS()}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	c.out = c.tls.Alloc(int(ptrSize))
	name, err := libc.CString(path)
	if err != nil {
		return nil, err
	}
	defer libc.Xfree(c.tls, name)
	rc := sqlite3.Xsqlite3_open_v2(c.tls, name, c.out, sqlite3.SQLITE_OPEN_READWRITE|sqlite3.SQLITE_OPEN_CREATE|sqlite3.SQLITE_OPEN_URI|sqlite3.SQLITE_OPEN_NOMUTEX, 0)
	c.db = *(*uintptr)(cptr(c.out))
	if rc != sqlite3.SQLITE_OK {
		if c.db == 0 {
			return nil, fmt.Errorf("sqlite: open: %s (%d)", libc.GoString(sqlite3.Xsqlite3_errstr(c.tls, rc)), rc)
		}
		return nil, c.error(rc)
	}
	for _, p := range pragmas {
		if err := c.Exec("PRAGMA " + p); err != nil {
			return nil, err
		}
	}
	if err := c.text.reserve(c.tls, 0); err != nil {
		return nil, err
	}
	for _, st := range []struct {
		stmt *Stmt
		sql  string
	}{{&c.begin, "BEGIN IMMEDIATE"}, {&c.commit, "COMMIT"}, {&c.rollback, "ROLLBACK"}} {
		if *st.stmt, err = c.Prepare(st.sql); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Tx runs f in one transaction, taking the write lock at once (BEGIN
// IMMEDIATE), and commits; when f or the commit fails, it rolls back.
func (c *Conn) Tx(f func() error) (err error) {
	if err := c.Step(c.begin); err != nil {
		return err
	}
	defer func() {
		if err != nil && c.InTx() {
			c.Step(c.rollback) // err stands; closing the connection would roll back too
		}
	}()
	if err := f(); err != nil {
		return err
	}
	return c.Step(c.commit)
}

// Exec runs sql, statements without parameters.
func (c *Conn) Exec(sql string) error {
	s, err := libc.CString(sql)
	if err != nil {
		return err
	}
	defer libc.Xfree(c.tls, s)
	if rc := sqlite3.Xsqlite3_exec(c.tls, c.db, s, 0, 0, 0); rc != sqlite3.SQLITE_OK {
		return fmt.Errorf("%s: %w", sql, c.error(rc))
	}
	return nil
}

// Prepare compiles sql into a statement kept until Close.
func (c *Conn) Prepare(sql string) (Stmt, error) {
	s, err := libc.CString(sql)
	if err != nil {
		return 0, err
	}
	defer libc.Xfree(c.tls, s)
	if rc := sqlite3.Xsqlite3_prepare_v3(c.tls, c.db, s, -1, sqlite3.SQLITE_PREPARE_PERSISTENT, c.out, 0); rc != sqlite3.SQLITE_OK {
		return 0, fmt.Errorf("prepare %.40q…: %w", sql, c.error(rc))
	}
	st := Stmt(*(*uintptr)(cptr(c.out)))
	c.stmts = append(c.stmts, st)
	return st, nil
}

func (c *Conn) error(rc int32) error {
	return fmt.Errorf("sqlite: %s (%d)", libc.GoString(sqlite3.Xsqlite3_errmsg(c.tls, c.db)), rc)
}

// Close releases the statements, the connection, the text buffer and the
// TLS.
func (c *Conn) Close() error {
	var err error
	if c.db != 0 {
		for _, s := range c.stmts {
			sqlite3.Xsqlite3_finalize(c.tls, uintptr(s))
		}
		if rc := sqlite3.Xsqlite3_close_v2(c.tls, c.db); rc != sqlite3.SQLITE_OK {
			err = c.error(rc)
		}
		c.db = 0
	}
	c.text.free(c.tls)
	if c.out != 0 {
		c.tls.Free(int(ptrSize))
		c.out = 0
	}
	c.tls.Close()
	return err
}

// Step runs s to its end and resets it for the next run.
func (c *Conn) Step(s Stmt) error {
	rc := sqlite3.Xsqlite3_step(c.tls, uintptr(s))
	var err error
	if rc != sqlite3.SQLITE_DONE && rc != sqlite3.SQLITE_ROW {
		err = c.error(rc) // before the reset, which may replace the message
	}
	sqlite3.Xsqlite3_reset(c.tls, uintptr(s))
	return err
}

// Row runs s to its first row and returns whether there was one; the
// caller reads it (ColumnText, ColumnInt) and then calls Reset.
func (c *Conn) Row(s Stmt) (bool, error) {
	switch rc := sqlite3.Xsqlite3_step(c.tls, uintptr(s)); rc {
	case sqlite3.SQLITE_ROW:
		return true, nil
	case sqlite3.SQLITE_DONE:
		return false, nil
	default:
		err := c.error(rc)
		sqlite3.Xsqlite3_reset(c.tls, uintptr(s))
		return false, err
	}
}

// Reset makes s ready to run again.
func (c *Conn) Reset(s Stmt) { sqlite3.Xsqlite3_reset(c.tls, uintptr(s)) }

// ColumnText is column i (from 0) of s's current row, copied.
func (c *Conn) ColumnText(s Stmt, i int32) string {
	p := sqlite3.Xsqlite3_column_text(c.tls, uintptr(s), i)
	n := sqlite3.Xsqlite3_column_bytes(c.tls, uintptr(s), i)
	if p == 0 || n == 0 {
		return ""
	}
	return string(unsafe.Slice((*byte)(cptr(p)), n))
}

// Changes is how many rows the last statement run changed.
func (c *Conn) Changes() int32 { return sqlite3.Xsqlite3_changes(c.tls, c.db) }

// InTx reports whether a transaction is open.
func (c *Conn) InTx() bool { return sqlite3.Xsqlite3_get_autocommit(c.tls, c.db) == 0 }

// Reserve empties the text buffer, making room for n bytes of the next
// statement's text parameters.
func (c *Conn) Reserve(n int) error { return c.text.reserve(c.tls, n) }

// BindInt binds v to parameter i (from 1) of s.
func (c *Conn) BindInt(s Stmt, i int32, v int64) {
	if rc := sqlite3.Xsqlite3_bind_int64(c.tls, uintptr(s), i, v); rc != sqlite3.SQLITE_OK && c.bindRC == sqlite3.SQLITE_OK {
		c.bindRC = rc
	}
}

// BindNull binds NULL to parameter i of s.
func (c *Conn) BindNull(s Stmt, i int32) {
	if rc := sqlite3.Xsqlite3_bind_null(c.tls, uintptr(s), i); rc != sqlite3.SQLITE_OK && c.bindRC == sqlite3.SQLITE_OK {
		c.bindRC = rc
	}
}

// BindText binds v, copied into the text buffer, which Reserve must have
// made room for. The buffer's address is never 0, so "" binds as an
// empty text, not as NULL.
func (c *Conn) BindText(s Stmt, i int32, v string) {
	if len(v) > len(c.text.buf)-c.text.used {
		if c.bindRC == sqlite3.SQLITE_OK {
			c.bindRC = sqlite3.SQLITE_TOOBIG // Reserve made no room for it
		}
		return
	}
	p, n := c.text.put(v)
	if rc := sqlite3.Xsqlite3_bind_text(c.tls, uintptr(s), i, p, n, static); rc != sqlite3.SQLITE_OK && c.bindRC == sqlite3.SQLITE_OK {
		c.bindRC = rc
	}
}

// Bound reports the first bind that failed since the last call: a
// parameter that failed to bind would keep its last value.
func (c *Conn) Bound() error {
	rc := c.bindRC
	c.bindRC = sqlite3.SQLITE_OK
	if rc != sqlite3.SQLITE_OK {
		return fmt.Errorf("bind: %w", c.error(rc))
	}
	return nil
}

// arena is the C memory a statement's text parameters are copied into
// before it is stepped. SQLite reads them in place until the statement is
// reset; the next statement's parameters then reuse it from the start.
type arena struct {
	p    uintptr // its address
	buf  []byte  // the same memory, seen from Go
	used int
}

// maxText bounds a statement's text: SQLite refuses a value past 10^9
// bytes anyway (SQLITE_MAX_LENGTH), and lengths are bound as int32.
const maxText = 1 << 30

// ErrTooLarge is a statement's text past 1 GiB.
var ErrTooLarge = errors.New("a statement's text is over 1 GiB")

func (a *arena) reserve(tls *libc.TLS, n int) error {
	a.used = 0
	if n <= len(a.buf) && a.p != 0 {
		return nil
	}
	if n > maxText {
		return ErrTooLarge
	}
	size := max(n, 2*len(a.buf), 16<<10)
	p := libc.Xmalloc(tls, types.Size_t(size))
	if p == 0 {
		return fmt.Errorf("sqlite: cannot allocate %d bytes", size)
	}
	a.free(tls)
	a.p, a.buf = p, unsafe.Slice((*byte)(cptr(p)), size)
	return nil
}

// put copies s after what a holds and returns its address and length.
func (a *arena) put(s string) (uintptr, int32) {
	p := a.p + uintptr(a.used)
	a.used += copy(a.buf[a.used:], s)
	return p, int32(len(s))
}

func (a *arena) free(tls *libc.TLS) {
	if a.p != 0 {
		libc.Xfree(tls, a.p)
	}
	*a = arena{}
}

// cptr is p, an address of C memory (from libc's allocator or a TLS's
// stack), as a pointer. That memory is outside the Go heap, so the
// collector neither moves nor frees it under a uintptr, which is all
// unsafe.Pointer's rules and vet's unsafeptr check guard against; the
// conversion goes through memory because vet cannot tell a C address
// from a Go one in a plain unsafe.Pointer(p).
func cptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
