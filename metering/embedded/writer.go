package embedded

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/migrations/relational/sqlitec"
)

// writer is Insert's own connection to the file, through SQLite's C API
// (migrations/relational/sqlitec): through the database/sql driver a row
// cost 60 to 110 µs of CPU; here each statement is prepared once and
// parameters are bound by index from one reused C buffer. Not safe for
// concurrent use: the Store's mutex serializes every call.
type writer struct {
	c *sqlitec.Conn
	// Prepared statements.
	ins, upsert sqlitec.Stmt
}

// insertRow stores a row unless its ID is stored already; Changes then
// says whether it did (ON CONFLICT … DO NOTHING changes no row).
var insertRow = "INSERT INTO usage (" + columns + ") VALUES (" + params(28) + ") ON CONFLICT (id) DO NOTHING"

// params is n parameters, comma separated.
func params(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

// openWriter opens the writer's connection to the file at path, set as
// Open sets the driver's (pragmas), and prepares its statements.
func openWriter(path string) (_ *writer, err error) {
	c, err := sqlitec.Open(path, pragmas)
	if err != nil {
		return nil, err
	}
	w := &writer{c: c}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	for _, s := range []struct {
		stmt *sqlitec.Stmt
		sql  string
	}{
		{&w.ins, insertRow},
		{&w.upsert, fmt.Sprintf(rollupUpsert, "("+params(13)+")")},
	} {
		if *s.stmt, err = c.Prepare(s.sql); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// close releases the connection and its statements.
func (w *writer) close() error { return w.c.Close() }

// insert stores rows in one transaction, skipping those whose ID is stored
// already (or came earlier in rows), and adds the rows it stored to their
// days' rollup cells: summed per cell in memory, then one upsert per cell.
// On any error the transaction is rolled back.
func (w *writer) insert(ctx context.Context, rows []metering.Usage) error {
	return w.c.Tx(func() error { return w.insertRows(ctx, rows) })
}

// insertRows is insert's work, in its transaction.
func (w *writer) insertRows(ctx context.Context, rows []metering.Usage) error {
	c := w.c
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
		if err := c.Step(w.ins); err != nil {
			return err
		}
		if c.Changes() == 0 {
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
		if err := c.Step(w.upsert); err != nil {
			return err
		}
	}
	return nil
}

// bindRow binds u to insertRow's parameters, in columns' order.
func (w *writer) bindRow(u *metering.Usage) error {
	n := len(u.ID) + len(u.TraceID) + len(u.TaskID) + len(u.ContextID) + len(u.ParentTaskID) +
		len(u.ListingID) + len(u.SellerOrgID) + len(u.BuyerOrgID) + len(u.APIKeyID) + len(u.ContractID) +
		len(u.Method) + len(u.ProtocolVersion) + len(u.State) + len(u.Currency) + len(u.CardHash) + len(u.Model) + len(u.Tags)
	c, s := w.c, w.ins
	if err := c.Reserve(n); err != nil {
		return err
	}
	c.BindText(s, 1, u.ID)
	c.BindInt(s, 2, u.Time.UnixMilli())
	c.BindText(s, 3, u.TraceID)
	c.BindText(s, 4, u.TaskID)
	c.BindText(s, 5, u.ContextID)
	c.BindText(s, 6, u.ParentTaskID)
	c.BindText(s, 7, u.ListingID)
	c.BindText(s, 8, u.SellerOrgID)
	c.BindText(s, 9, u.BuyerOrgID)
	c.BindText(s, 10, u.APIKeyID)
	c.BindText(s, 11, u.ContractID)
	c.BindText(s, 12, u.Method)
	c.BindText(s, 13, u.ProtocolVersion)
	c.BindText(s, 14, u.State)
	c.BindInt(s, 15, int64(u.ErrorCode))
	c.BindInt(s, 16, u.BytesIn)
	c.BindInt(s, 17, u.BytesOut)
	c.BindInt(s, 18, u.LatencyMs)
	c.BindInt(s, 19, u.InputTokens)
	c.BindInt(s, 20, u.OutputTokens)
	c.BindInt(s, 21, u.ComputeMs)
	c.BindInt(s, 22, u.Tasks)
	c.BindInt(s, 23, u.CostMicros)
	c.BindText(s, 24, u.Currency)
	c.BindInt(s, 25, int64(boolInt(u.Estimated)))
	c.BindText(s, 26, u.CardHash)
	c.BindText(s, 27, u.Model)
	c.BindText(s, 28, string(u.Tags))
	return c.Bound()
}

// bindCell binds a cell and the sums to add to it to the rollup upsert.
func (w *writer) bindCell(k dayCell, t *metering.Total) error {
	c, s := w.c, w.upsert
	if err := c.Reserve(len(k.buyer) + len(k.seller) + len(k.listing) + len(k.apiKey) + len(k.contract)); err != nil {
		return err
	}
	c.BindInt(s, 1, k.day)
	c.BindText(s, 2, k.buyer)
	c.BindText(s, 3, k.seller)
	c.BindText(s, 4, k.listing)
	c.BindText(s, 5, k.apiKey)
	c.BindText(s, 6, k.contract)
	for i, v := range []int64{t.Calls, t.Tasks, t.InputTokens, t.OutputTokens, t.ComputeMs, t.CostMicros, t.Estimated} {
		c.BindInt(s, int32(7+i), v)
	}
	return c.Bound()
}
