package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket/cmd/internal/config"
	"github.com/agentmarket/agentmarket/cmd/internal/serve"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/audit"
	"github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/listings/aesgcm"
	jose "github.com/go-jose/go-jose/v4"
)

// ErrBroken is returned (wrapped, naming the row) when the chain does not
// verify.
var ErrBroken = errors.New("the audit chain is broken")

// run verifies the chain in the database the settings name and writes
// what it found to stdout. With --jwks FILE the checkpoints are verified
// with the public keys in FILE (the marketplace's GET /api/v1/audit/jwks,
// saved), and the secret key is neither needed nor read: an auditor who
// can read the database but holds no key that signs can check the chain.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	jwksFile, args, err := jwksFlag(args)
	if err != nil {
		return err
	}
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
	store := gormstore.New(db.DB)
	var keys audit.Keys
	if jwksFile != "" {
		if keys, err = readJWKS(jwksFile); err != nil {
			return err
		}
	} else {
		key, err := serve.SealerKey(cfg)
		if err != nil {
			return fmt.Errorf("secret key (or verify with the published keys: --jwks FILE): %w", err)
		}
		sealer, err := aesgcm.New(key)
		if err != nil {
			return err
		}
		keys = serve.AuditKeys(store, sealer)
	}
	every := cfg.AuditCheckpointEvery
	if every <= 0 {
		every = time.Hour
	}
	r, err := audit.Verify(ctx, store, keys, audit.Cadence{Now: time.Now(), Every: every})
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

// jwksFlag takes --jwks FILE (or --jwks=FILE) out of args, leaving the
// marketplace's settings.
func jwksFlag(args []string) (file string, rest []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--jwks" || a == "-jwks":
			if i+1 == len(args) {
				return "", nil, errors.New("--jwks: needs a file, the marketplace's GET /api/v1/audit/jwks saved")
			}
			file = args[i+1]
			i++
		case strings.HasPrefix(a, "--jwks=") || strings.HasPrefix(a, "-jwks="):
			file = a[strings.Index(a, "=")+1:]
		default:
			rest = append(rest, a)
		}
	}
	return file, rest, nil
}

// jwksKeys are the audit keys of a published key set.
type jwksKeys []contracts.PushKey

func (k jwksKeys) PushKeys(context.Context) ([]contracts.PushKey, error) { return k, nil }

// readJWKS reads a JWKS document of EC public keys (what the marketplace
// publishes at /api/v1/audit/jwks).
func readJWKS(path string) (audit.Keys, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--jwks: %w", err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("--jwks %s: not a JWKS document: %w", path, err)
	}
	var out jwksKeys
	for _, k := range set.Keys {
		pub, ok := k.Key.(*ecdsa.PublicKey)
		if !ok || k.KeyID == "" {
			continue // not an audit key
		}
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			return nil, fmt.Errorf("--jwks %s: key %s: %w", path, k.KeyID, err)
		}
		out = append(out, contracts.PushKey{ID: k.KeyID, Public: der})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--jwks %s: no EC key with a kid", path)
	}
	return out, nil
}
