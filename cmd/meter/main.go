// Command meter runs the metering A2A proxy on its own, beside the
// marketplace, sharing its PostgreSQL; run as many as needed.
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
		fmt.Fprintln(os.Stderr, "meter:", err)
		os.Exit(1)
	}
}
