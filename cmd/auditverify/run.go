package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/agentmarket/agentmarket/cmd/internal/config"
	"github.com/agentmarket/agentmarket/cmd/internal/serve"
	"github.com/agentmarket/agentmarket/contracts/audit"
	"github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/listings/aesgcm"
)

// ErrBroken is returned (wrapped, naming the row) when the chain does not
// verify.
var ErrBroken = errors.New("the audit chain is broken")

// run verifies the chain in the database the settings name and writes
// what it found to stdout.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg, err := config.Load("marketplace", serve.ConfigFormats(), args, getenv, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	db, err := serve.OpenDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	key, err := serve.SealerKey(cfg)
	if err != nil {
		return fmt.Errorf("secret key: %w", err)
	}
	sealer, err := aesgcm.New(key)
	if err != nil {
		return err
	}
	store := gormstore.New(db.DB)
	every := cfg.AuditCheckpointEvery
	if every <= 0 {
		every = time.Hour
	}
	r, err := audit.Verify(ctx, store, serve.AuditKeys(store, sealer), audit.Cadence{Now: time.Now(), Every: every})
	if err != nil {
		return err
	}
	if r.Broken != nil {
		fmt.Fprintf(stdout, "audit chain broken at %s %d: %s\n", r.Broken.Kind, r.Broken.Seq, r.Broken.Reason)
		fmt.Fprintf(stdout, "verified before it: %d entries, %d signed checkpoints\n", r.Entries, r.Checkpoints)
		return fmt.Errorf("%w at %s %d: %s", ErrBroken, r.Broken.Kind, r.Broken.Seq, r.Broken.Reason)
	}
	if r.Entries == 0 {
		fmt.Fprintf(stdout, "audit chain ok: no entries, %d signed checkpoints\n", r.Checkpoints)
		return nil
	}
	fmt.Fprintf(stdout, "audit chain ok: entries %d to %d (%d), %d signed checkpoints\n", r.FirstSeq, r.LastSeq, r.Entries, r.Checkpoints)
	return nil
}
