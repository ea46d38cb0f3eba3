package embedded

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"modernc.org/libc"
	"modernc.org/libc/sys/types"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/agentmarket/agentmarket/metering"
)

// writer is Insert's own connection to the file, through SQLite's C API
// (modernc.org/sqlite/lib, the transpiled C the database/sql driver sits
// on) called directly. Through the driver a row cost 60 to 110 µs of CPU:
// it prepares a statement again at every execution, binds parameters in
// time quadratic in their number and copies every text value into a C
// allocation of its own. Here each statement is prepared once, parameters
// are bound by index, and text is copied into one reused C buffer that
// SQLite reads in place (SQLITE_STATIC).
//
// A writer is not safe for concurrent use (nor is its libc TLS, the C
// stack of the calls): the Store's mutex serializes every call.
type writer struct {
	tls *libc.TLS
	db  uintptr // sqlite3 *

	// Prepared statements (sqlite3_stmt *).
	ins, upsert, begin, commit, rollback uintptr

	text arena
	// bindRC is the first failed bind's result code since the last check.
	bindRC int32
}

const (
	ptrSize      = unsafe.Sizeof(uintptr(0))
	sqliteStatic = 0 // SQLITE_STATIC: the bound text stays put until the statement is reset
)

// insertRow stores a row unless its ID is stored already; sqlite3_changes
// then says whether it did (ON CONFLICT … DO NOTHING changes no row).
var insertRow = "INSERT INTO usage (" + columns + ") VALUES (" + params(28) + ") ON CONFLICT (id) DO NOTHING"

// params is n parameters, comma separated.
func params(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

// openWriter opens the writer's connection to the file at path, set as
// Open sets the driver's (pragmas), and prepares its statements.
func openWriter(path string) (_ *writer, err error) {
	w := &writer{tls: libc.NewTLS()}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	name, err := libc.CString(path)
	if err != nil {
		return nil, err
	}
	defer libc.Xfree(w.tls, name)
	out := w.tls.Alloc(int(ptrSize))
	defer w.tls.Free(int(ptrSize))
	// The driver's flags, but no connection mutex: the Store's serializes.
	rc := sqlite3.Xsqlite3_open_v2(w.tls, name, out, sqlite3.SQLITE_OPEN_READWRITE|sqlite3.SQLITE_OPEN_CREATE|sqlite3.SQLITE_OPEN_URI|sqlite3.SQLITE_OPEN_NOMUTEX, 0)
	w.db = *(*uintptr)(cptr(out))
	if rc != sqlite3.SQLITE_OK {
		if w.db == 0 {
			return nil, fmt.Errorf("sqlite: open: %s (%d)", libc.GoString(sqlite3.Xsqlite3_errstr(w.tls, rc)), rc)
		}
		return nil, w.error(rc)
	}
	for _, p := range pragmas {
		if err := w.exec("PRAGMA " + p); err != nil {
			return nil, err
		}
	}
	for _, s := range []struct {
		stmt *uintptr
		sql  string
	}{
		{&w.ins, insertRow},
		{&w.upsert, fmt.Sprintf(rollupUpsert, "("+params(13)+")")},
		{&w.begin, "BEGIN IMMEDIATE"},
		{&w.commit, "COMMIT"},
		{&w.rollback, "ROLLBACK"},
	} {
		if *s.stmt, err = w.prepare(s.sql, out); err != nil {
			return nil, err
		}
	}
	if err := w.text.reserve(w.tls, 0); err != nil {
		return nil, err
	}
	return w, nil
}

// exec runs sql (statements without parameters).
func (w *writer) exec(sql string) error {
	s, err := libc.CString(sql)
	if err != nil {
		return err
	}
	defer libc.Xfree(w.tls, s)
	if rc := sqlite3.Xsqlite3_exec(w.tls, w.db, s, 0, 0, 0); rc != sqlite3.SQLITE_OK {
		return fmt.Errorf("%s: %w", sql, w.error(rc))
	}
	return nil
}

// prepare compiles sql into a statement kept for the writer's life; out
// is C memory for the statement's address.
func (w *writer) prepare(sql string, out uintptr) (uintptr, error) {
	s, err := libc.CString(sql)
	if err != nil {
		return 0, err
	}
	defer libc.Xfree(w.tls, s)
	if rc := sqlite3.Xsqlite3_prepare_v3(w.tls, w.db, s, -1, sqlite3.SQLITE_PREPARE_PERSISTENT, out, 0); rc != sqlite3.SQLITE_OK {
		return 0, fmt.Errorf("prepare %.40q…: %w", sql, w.error(rc))
	}
	return *(*uintptr)(cptr(out)), nil
}

func (w *writer) error(rc int32) error {
	return fmt.Errorf("sqlite: %s (%d)", libc.GoString(sqlite3.Xsqlite3_errmsg(w.tls, w.db)), rc)
}

// close releases the statements, the connection, the text buffer and
// the TLS.
func (w *writer) close() error {
	var err error
	if w.db != 0 {
		for _, s := range []uintptr{w.ins, w.upsert, w.begin, w.commit, w.rollback} {
			sqlite3.Xsqlite3_finalize(w.tls, s) // a no-op on 0
		}
		if rc := sqlite3.Xsqlite3_close_v2(w.tls, w.db); rc != sqlite3.SQLITE_OK {
			err = w.error(rc)
		}
		w.db = 0
	}
	w.text.free(w.tls)
	w.tls.Close()
	return err
}

// step runs s to its end and resets it for the next run.
func (w *writer) step(s uintptr) error {
	rc := sqlite3.Xsqlite3_step(w.tls, s)
	var err error
	if rc != sqlite3.SQLITE_DONE && rc != sqlite3.SQLITE_ROW {
		err = w.error(rc) // before the reset, which may replace the message
	}
	sqlite3.Xsqlite3_reset(w.tls, s)
	return err
}

func (w *writer) bindInt(s uintptr, i int32, v int64) {
	if rc := sqlite3.Xsqlite3_bind_int64(w.tls, s, i, v); rc != sqlite3.SQLITE_OK && w.bindRC == sqlite3.SQLITE_OK {
		w.bindRC = rc
	}
}

// bindText binds v, copied into the text buffer, which must have room.
// The buffer's address is never 0, so "" binds as an empty text, not as
// NULL.
func (w *writer) bindText(s uintptr, i int32, v string) {
	p, n := w.text.put(v)
	if rc := sqlite3.Xsqlite3_bind_text(w.tls, s, i, p, n, sqliteStatic); rc != sqlite3.SQLITE_OK && w.bindRC == sqlite3.SQLITE_OK {
		w.bindRC = rc
	}
}

// bound reports the first bind that failed since the last call: a
// parameter that failed to bind would keep its last value.
func (w *writer) bound() error {
	rc := w.bindRC
	w.bindRC = sqlite3.SQLITE_OK
	if rc != sqlite3.SQLITE_OK {
		return fmt.Errorf("bind: %w", w.error(rc))
	}
	return nil
}

// insert stores rows in one transaction, skipping those whose ID is stored
// already (or came earlier in rows), and adds the rows it stored to their
// days' rollup cells: summed per cell in memory, then one upsert per cell.
// On any error the transaction is rolled back.
func (w *writer) insert(ctx context.Context, rows []metering.Usage) (err error) {
	if err := w.step(w.begin); err != nil {
		return err
	}
	defer func() {
		if err != nil && sqlite3.Xsqlite3_get_autocommit(w.tls, w.db) == 0 {
			w.step(w.rollback) // err stands; closing the connection would roll back too
		}
	}()
	cells := map[dayCell]int{} // index in sums
	var order []dayCell
	var sums []metering.Total
	for i := range rows {
		if i%512 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		u := &rows[i]
		if err := w.bindRow(u); err != nil {
			return err
		}
		if err := w.step(w.ins); err != nil {
			return err
		}
		if sqlite3.Xsqlite3_changes(w.tls, w.db) == 0 {
			continue // stored already
		}
		k := dayCell{u.Time.UnixMilli() / dayMs, u.BuyerOrgID, u.SellerOrgID, u.ListingID, u.APIKeyID, u.ContractID}
		j, ok := cells[k]
		if !ok {
			j = len(sums)
			cells[k] = j
			order = append(order, k)
			sums = append(sums, metering.Total{})
		}
		sums[j] = sums[j].Add(metering.Total{Calls: 1, Tasks: u.Tasks, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			ComputeMs: u.ComputeMs, CostMicros: u.CostMicros, Estimated: int64(boolInt(u.Estimated))})
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for j, k := range order {
		if err := w.bindCell(k, &sums[j]); err != nil {
			return err
		}
		if err := w.step(w.upsert); err != nil {
			return err
		}
	}
	return w.step(w.commit)
}

// bindRow binds u to insertRow's parameters, in columns' order.
func (w *writer) bindRow(u *metering.Usage) error {
	n := len(u.ID) + len(u.TraceID) + len(u.TaskID) + len(u.ContextID) + len(u.ParentTaskID) +
		len(u.ListingID) + len(u.SellerOrgID) + len(u.BuyerOrgID) + len(u.APIKeyID) + len(u.ContractID) +
		len(u.Method) + len(u.ProtocolVersion) + len(u.State) + len(u.Currency) + len(u.CardHash) + len(u.Model) + len(u.Tags)
	if err := w.text.reserve(w.tls, n); err != nil {
		return err
	}
	s := w.ins
	w.bindText(s, 1, u.ID)
	w.bindInt(s, 2, u.Time.UnixMilli())
	w.bindText(s, 3, u.TraceID)
	w.bindText(s, 4, u.TaskID)
	w.bindText(s, 5, u.ContextID)
	w.bindText(s, 6, u.ParentTaskID)
	w.bindText(s, 7, u.ListingID)
	w.bindText(s, 8, u.SellerOrgID)
	w.bindText(s, 9, u.BuyerOrgID)
	w.bindText(s, 10, u.APIKeyID)
	w.bindText(s, 11, u.ContractID)
	w.bindText(s, 12, u.Method)
	w.bindText(s, 13, u.ProtocolVersion)
	w.bindText(s, 14, u.State)
	w.bindInt(s, 15, int64(u.ErrorCode))
	w.bindInt(s, 16, u.BytesIn)
	w.bindInt(s, 17, u.BytesOut)
	w.bindInt(s, 18, u.LatencyMs)
	w.bindInt(s, 19, u.InputTokens)
	w.bindInt(s, 20, u.OutputTokens)
	w.bindInt(s, 21, u.ComputeMs)
	w.bindInt(s, 22, u.Tasks)
	w.bindInt(s, 23, u.CostMicros)
	w.bindText(s, 24, u.Currency)
	w.bindInt(s, 25, int64(boolInt(u.Estimated)))
	w.bindText(s, 26, u.CardHash)
	w.bindText(s, 27, u.Model)
	w.bindText(s, 28, string(u.Tags))
	return w.bound()
}

// bindCell binds a cell and the sums to add to it to the rollup upsert.
func (w *writer) bindCell(k dayCell, t *metering.Total) error {
	if err := w.text.reserve(w.tls, len(k.buyer)+len(k.seller)+len(k.listing)+len(k.apiKey)+len(k.contract)); err != nil {
		return err
	}
	s := w.upsert
	w.bindInt(s, 1, k.day)
	w.bindText(s, 2, k.buyer)
	w.bindText(s, 3, k.seller)
	w.bindText(s, 4, k.listing)
	w.bindText(s, 5, k.apiKey)
	w.bindText(s, 6, k.contract)
	for i, v := range []int64{t.Calls, t.Tasks, t.InputTokens, t.OutputTokens, t.ComputeMs, t.CostMicros, t.Estimated} {
		w.bindInt(s, int32(7+i), v)
	}
	return w.bound()
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

var errTooLarge = errors.New("a usage row's text is over 1 GiB")

// reserve empties a, making room for n bytes.
func (a *arena) reserve(tls *libc.TLS, n int) error {
	a.used = 0
	if n <= len(a.buf) && a.p != 0 {
		return nil
	}
	if n > maxText {
		return errTooLarge
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
