package sqlitec_test

import (
	"path/filepath"
	"testing"

	"github.com/agentmarket/agentmarket/migrations/relational/sqlitec"
)

// TestConn: statements prepared once run again and again with new
// parameters; text binds from the reserved buffer (and "" as empty text,
// not NULL); text with no room reserved is refused, not cut; a row reads
// back.
func TestConn(t *testing.T) {
	c, err := sqlitec.Open(filepath.Join(t.TempDir(), "t.db"), []string{"journal_mode(WAL)"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Exec("CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT, n INTEGER)"); err != nil {
		t.Fatal(err)
	}
	ins, err := c.Prepare("INSERT INTO t (k, v, n) VALUES (?, ?, ?) ON CONFLICT (k) DO NOTHING")
	if err != nil {
		t.Fatal(err)
	}
	get, err := c.Prepare("SELECT v FROM t WHERE k = ? AND v IS NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	for i, kv := range [][2]string{{"a", "first"}, {"b", ""}, {"a", "again"}} {
		if err := c.Reserve(len(kv[0]) + len(kv[1])); err != nil {
			t.Fatal(err)
		}
		c.BindText(ins, 1, kv[0])
		c.BindText(ins, 2, kv[1])
		c.BindInt(ins, 3, int64(i))
		if err := c.Bound(); err != nil {
			t.Fatal(err)
		}
		if err := c.Step(ins); err != nil {
			t.Fatal(err)
		}
		if want := int32(1); i == 2 {
			want = 0
			if c.Changes() != want {
				t.Errorf("a second insert of key a changed %d rows", c.Changes())
			}
		} else if c.Changes() != want {
			t.Errorf("insert %d changed %d rows", i, c.Changes())
		}
	}
	for k, want := range map[string]string{"a": "first", "b": ""} {
		if err := c.Reserve(len(k)); err != nil {
			t.Fatal(err)
		}
		c.BindText(get, 1, k)
		ok, err := c.Row(get)
		if err != nil || !ok {
			t.Fatalf("row %s: %v %v (an empty text must not bind as NULL)", k, ok, err)
		}
		if got := c.ColumnText(get, 0); got != want {
			t.Errorf("row %s = %q, want %q", k, got, want)
		}
		c.Reset(get)
	}
	if err := c.Reserve(1); err != nil {
		t.Fatal(err)
	}
	c.BindText(ins, 1, string(make([]byte, 1<<20))) // past what the buffer holds
	if err := c.Bound(); err == nil {
		t.Error("text with no room reserved was bound")
	}
}
