package clickhouse_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/clickhouse"
	"github.com/agentmarket/agentmarket/metering/clickhouse/clickhousetest"
)

// TestOpenOrLazyWithoutServer: a server that does not answer leaves a Lazy
// store, which fails as unavailable until the server is there; a DSN that
// can never work is an error at once.
func TestOpenOrLazyWithoutServer(t *testing.T) {
	ctx := context.Background()
	s, closeStore, err := clickhouse.OpenOrLazy(ctx, "clickhouse://127.0.0.1:1/default", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*clickhouse.Lazy); !ok {
		t.Fatalf("store %T, want a *clickhouse.Lazy", s)
	}
	if n := s.(metering.BatchSizer).PreferredBatchRows(); n != clickhouse.PreferredBatchRows {
		t.Errorf("PreferredBatchRows = %d, want ClickHouse's %d", n, clickhouse.PreferredBatchRows)
	}
	if err := s.Insert(ctx, nil); agentmarket.KindOf(err) != agentmarket.Unavailable {
		t.Errorf("Insert with no server = %v, want unavailable", err)
	}
	if err := closeStore(); err != nil {
		t.Errorf("Close of a Lazy never opened = %v", err)
	}
	if _, _, err := clickhouse.OpenOrLazy(ctx, "http://127.0.0.1:1/default", time.Second); agentmarket.KindOf(err) != agentmarket.Invalid {
		t.Errorf("OpenOrLazy of an HTTP DSN = %v, want invalid", err)
	}
}

// TestLazyOpensOnFirstUse: with the server up, OpenOrLazy opens the store
// at once, and a Lazy opens it on first use.
func TestLazyOpensOnFirstUse(t *testing.T) {
	ctx := context.Background()
	dsn := clickhousetest.DSN(t)
	s, closeStore, err := clickhouse.OpenOrLazy(ctx, dsn, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	if _, ok := s.(*clickhouse.Store); !ok {
		t.Fatalf("store %T, want a *clickhouse.Store", s)
	}
	l := clickhouse.NewLazy(dsn)
	defer l.Close()
	if v, err := l.Ping(ctx); err != nil || v == "" {
		t.Fatalf("Ping = %q, %v", v, err)
	}
	if _, err := l.Totals(ctx, metering.Query{GroupBy: metering.ByListing}); err != nil {
		t.Fatal(err)
	}
}
