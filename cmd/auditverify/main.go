// Command auditverify walks the marketplace's audit log (contracts/audit)
// in its database and reports the first broken link: an entry whose
// contents no longer match its hash, one whose link to the previous
// entry does not hold, a missing entry, or a checkpoint whose signature
// does not verify. It reads the settings the marketplace reads
// (AGENTMARKET_DATABASE_URL, AGENTMARKET_DATA_DIR, or their flags) and
// exits 1 when the chain is broken.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "auditverify:", err)
		os.Exit(1)
	}
}
