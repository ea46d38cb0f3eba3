package ops_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/cmd/internal/ops"
)

// TestReady: a required check down makes the process unavailable, an
// optional one only degraded; errors are shown by their safe words, and a
// change of state is logged once.
func TestReady(t *testing.T) {
	var dbDown, chDown bool
	check := func(down *bool, detail string, err error) func(context.Context) (string, error) {
		return func(context.Context) (string, error) {
			if *down {
				return "", err
			}
			return detail, nil
		}
	}
	var logs bytes.Buffer
	o := ops.New("test")
	o.Log = slog.New(slog.NewJSONHandler(&logs, nil))
	o.Checks = []ops.Check{
		{Name: "database", Check: check(&dbDown, "PostgreSQL 15", errors.New("dial tcp 10.1.2.3:5432: secret detail"))},
		{Name: "usage_store", Optional: true, Impact: "usage waits", Check: check(&chDown, "ClickHouse 18.16",
			agentmarket.Wrap(agentmarket.Unavailable, "usage_store", errors.New("dial tcp 10.1.2.4:9000"), "the usage store failed: connection refused"))},
	}
	for _, tc := range []struct {
		db, ch bool
		want   string
	}{
		{false, false, "ready"},
		{false, true, "degraded"},
		{true, true, "unavailable"},
		{false, false, "ready"},
	} {
		dbDown, chDown = tc.db, tc.ch
		r := o.Ready(context.Background())
		if r.Status != tc.want {
			t.Errorf("db down %v, ch down %v: status %s, want %s", tc.db, tc.ch, r.Status, tc.want)
		}
		if tc.ch {
			if st := r.Checks["usage_store"]; st.Error != "the usage store failed: connection refused" || !st.Optional || st.Impact != "usage waits" {
				t.Errorf("usage_store = %+v", st)
			}
		} else if st := r.Checks["usage_store"]; st.State != "up" || st.Detail != "ClickHouse 18.16" {
			t.Errorf("usage_store = %+v", st)
		}
		if tc.db && r.Checks["database"].Error != "failed (the logs say why)" {
			t.Errorf("database error shown as %q", r.Checks["database"].Error)
		}
	}
	got := logs.String()
	if n := strings.Count(got, `"msg":"dependency down","check":"usage_store"`); n != 1 {
		t.Errorf("usage_store down logged %d times:\n%s", n, got)
	}
	if n := strings.Count(got, `"msg":"dependency up again"`); n != 2 {
		t.Errorf("%d comebacks logged, want 2:\n%s", n, got)
	}
}
