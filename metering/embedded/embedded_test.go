package embedded_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/embedded"
	"github.com/agentmarket/agentmarket/metering/storetest"
)

// MustOpen opens a usage store in a temporary file, closed after the test.
func MustOpen(tb testing.TB) *embedded.Store {
	tb.Helper()
	s, err := embedded.Open(filepath.Join(tb.TempDir(), "usage.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) metering.Store { return MustOpen(t) })
}

func TestReopenKeepsRows(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "usage.db")
	s, err := embedded.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	u := storetest.Row(1, time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	if err := s.Insert(ctx, []metering.Usage{u}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = embedded.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Insert(ctx, []metering.Usage{u}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Rows(ctx, metering.Query{})
	if err != nil || len(got) != 1 || got[0] != storetest.Stored(u) {
		t.Fatalf("after reopen: %+v, %v", got, err)
	}
}
