package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket/listings"
	listingsgorm "github.com/agentmarket/agentmarket/listings/gormstore"
	"github.com/agentmarket/agentmarket/migrations/gormdb"
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
	db, err := gormdb.OpenSQLite(ctx, filepath.Join(dir, "agentmarket.db"))
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
	} {
		if _, err := parseOptions(args, noEnv, &bytes.Buffer{}); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	for _, args := range [][]string{
		{"-listings", "5", "-database-url", "postgres://u@127.0.0.1:5432/db"},
		{"-listings", "5", "-database-url", "postgresql://u@[::1]:5432/db"},
		{"-listings", "5", "-database-url", "postgres://u@localhost/db"},
	} {
		if _, err := parseOptions(args, noEnv, &bytes.Buffer{}); err != nil {
			t.Errorf("%q refused: %v", args, err)
		}
	}
}
