package relational_test

import (
	"fmt"
	"testing"

	"github.com/agentmarket/agentmarket/migrations/relational"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

// TestInsertRows: rows go in whole, in chunks, on both dialects.
func TestInsertRows(t *testing.T) {
	relationaltest.Each(t, func(t *testing.T, db *relational.DB) {
		if err := db.Exec("CREATE TABLE insert_rows_test (id TEXT PRIMARY KEY, n BIGINT NOT NULL, ok BOOLEAN NOT NULL)").Error; err != nil {
			t.Fatal(err)
		}
		var rows [][]any
		for i := range 5 {
			rows = append(rows, []any{fmt.Sprintf("r%d", i), int64(i * 10), i%2 == 0})
		}
		if err := relational.InsertRows(db.DB, "insert_rows_test", []string{"id", "n", "ok"}, rows, 2); err != nil {
			t.Fatal(err)
		}
		var got []struct {
			ID string
			N  int64
			OK bool
		}
		if err := db.Raw("SELECT id, n, ok FROM insert_rows_test ORDER BY id").Scan(&got).Error; err != nil {
			t.Fatal(err)
		}
		if len(got) != 5 || got[3].ID != "r3" || got[3].N != 30 || got[3].OK || !got[4].OK {
			t.Errorf("rows read back: %+v", got)
		}
		if err := relational.InsertRows(db.DB, "insert_rows_test", []string{"id", "n", "ok"}, rows[:1], 2); err == nil {
			t.Error("a row whose key is taken went in")
		}
	})
}
