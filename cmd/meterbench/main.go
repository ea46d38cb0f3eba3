// Command meterbench measures what the meter costs: in one process and one
// run it loads a canned fast A2A agent directly, through a plain Go reverse
// proxy and through the real meter with full metering (a listing, a
// subscription, a bearer key, usage rows), side by side, and reports the
// ratios the product's performance targets are stated in. It sends traffic only to the
// loopback, and every phase is bounded in time and requests.
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
		fmt.Fprintln(os.Stderr, "meterbench:", err)
		os.Exit(1)
	}
}
