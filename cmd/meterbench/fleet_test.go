package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestDiffRows(t *testing.T) {
	a := map[string]TableRows{"task_owners": {Table: "task_owners", Inserts: 10, Updates: 4}, "orgs": {Table: "orgs", Inserts: 2}}
	b := map[string]TableRows{"task_owners": {Table: "task_owners", Inserts: 110, Updates: 54}, "orgs": {Table: "orgs", Inserts: 2},
		"settled_bills": {Table: "settled_bills", Inserts: 100, Deletes: 3}}
	got := diffRows(a, b)
	if len(got) != 2 || got[0] != (TableRows{Table: "task_owners", Inserts: 100, Updates: 50}) || got[1] != (TableRows{Table: "settled_bills", Inserts: 100, Deletes: 3}) {
		t.Fatalf("diffRows = %+v", got)
	}
	if n := sumRows(got); n != 253 {
		t.Errorf("sumRows = %d, want 253", n)
	}
}

func TestFleetText(t *testing.T) {
	f := &Fleet{Shared: "PostgreSQL and Redis", Alone: Result{Connections: 32, RPS: 1000, OK: 8000},
		Together: []Result{{Connections: 16, RPS: 700, OK: 5600}, {Connections: 16, RPS: 900, OK: 7200}}, Ratio: 1.6,
		AloneRows: []TableRows{{Table: "task_owners", Inserts: 8000}}, AloneTasks: 8000, AlonePerTask: 1,
		TogetherRows: []TableRows{{Table: "task_owners", Inserts: 12800, Updates: 10}}, Tasks: 12800, PerTask: 1.0008}
	var buf bytes.Buffer
	f.writeText(&buf)
	out := buf.String()
	for _, want := range []string{"two meters sharing PostgreSQL and Redis", "together ÷ alone: 1.60×", "two meters together  32", "1600", "task_owners +12800 ~10 -0"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestPerTask(t *testing.T) {
	tasks, per := perTask([]TableRows{{Table: "task_owners", Inserts: 100, Updates: 100}, {Table: "settled_bills", Inserts: 100}})
	if tasks != 100 || per != 3 {
		t.Errorf("perTask = %d %v, want 100 tasks, 3 rows each", tasks, per)
	}
}
