package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket/listings"
	listingsgorm "github.com/agentmarket/agentmarket/listings/gormstore"
	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/embedded"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

func noEnv(string) string { return "" }

func TestSeedCatalog(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(ctx, []string{"-listings", "120", "-data-dir", dir}, noEnv, &out); err != nil {
		t.Fatal(err)
	}
	if err := run(ctx, []string{"-listings", "150", "-data-dir", dir}, noEnv, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "150 listings (30 new)") {
		t.Errorf("output:\n%s", out.String())
	}
	db, err := relational.OpenSQLite(ctx, filepath.Join(dir, "agentmarket.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := listings.Query{}
	if err := q.Normalize(); err != nil {
		t.Fatal(err)
	}
	_, total, err := listingsgorm.New(db.DB).Search(ctx, q)
	if err != nil || total != 150 {
		t.Fatalf("the seeded catalog holds %d listings (%v), want 150", total, err)
	}
}

func TestOptionsAreBounded(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-listings", "-1"},
		{"-listings", "1000001"},
		{"-listings", "5", "-database-url", "postgres://u@10.0.0.1:5432/db"},
		{"-listings", "5", "-database-url", "postgres://u@db.example:5432/db"},
		{"-listings", "5", "-database-url", "mysql://u@127.0.0.1/db"},
		{"-listings", "5", "stray"},
		{"-usage", "200000001"},
		{"-usage", "5", "-usage-from", "6"},
		{"-usage", "5", "-days", "0"},
		{"-usage", "5", "-usage-end", "yesterday"},
		{"-usage", "5", "-clickhouse-url", "clickhouse://10.1.2.3:9000/db"},
		{"-usage", "5", "-clickhouse-url", "http://127.0.0.1:8123/db"},
		{"-ingest-rate", "1000001"},
		{"-ingest-rate", "5", "-ingest-for", "11m"},
	} {
		if _, err := parseOptions(args, noEnv, &bytes.Buffer{}); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	for _, args := range [][]string{
		{"-listings", "5", "-database-url", "postgres://u@127.0.0.1:5432/db"},
		{"-listings", "5", "-database-url", "postgresql://u@[::1]:5432/db"},
		{"-listings", "5", "-database-url", "postgres://u@localhost/db"},
		{"-usage", "5", "-clickhouse-url", "clickhouse://127.0.0.1:9000/db"},
		{"-ingest-rate", "100000", "-ingest-for", "30s"},
	} {
		if _, err := parseOptions(args, noEnv, &bytes.Buffer{}); err != nil {
			t.Errorf("%q refused: %v", args, err)
		}
	}
}

func TestSeedUsageAndIngestEmbedded(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(ctx, []string{"-usage", "3000", "-days", "2", "-data-dir", dir}, noEnv, &out); err != nil {
		t.Fatal(err)
	}
	if err := run(ctx, []string{"-usage", "3000", "-usage-from", "2000", "-days", "2", "-data-dir", dir}, noEnv, &out); err != nil {
		t.Fatal(err)
	}
	s, err := embedded.Open(filepath.Join(dir, "usage.db"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.Rows(ctx, metering.Query{})
	s.Close()
	if err != nil || len(rows) != 3000 {
		t.Fatalf("%d rows stored (%v), want 3000: a row stored twice counts once", len(rows), err)
	}
	out.Reset()
	if err := run(ctx, []string{"-ingest-rate", "2000", "-ingest-for", "1s", "-data-dir", dir}, noEnv, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "ingest: offered") || !strings.Contains(out.String(), "CPU per shipped row") {
		t.Errorf("output:\n%s", out.String())
	}
}

func TestProcessCPU(t *testing.T) {
	if processCPU(os.Getpid()) < 0 || processCPU(0) != 0 || processCPU(-1) != 0 {
		t.Fatal("processCPU")
	}
}
