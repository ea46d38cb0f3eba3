// Command meterbench measures what the meter costs: in one run it loads a
// canned fast A2A agent (nginx return 200 when nginx is installed, else a
// built-in one) directly, through nginx proxy_pass, through the official
// SDK's forwarding proxy, through a plain Go reverse proxy and through the
// real meter with full metering (listings, a subscription, a bearer key,
// usage rows) in A2A 1.0 and 0.3, HTTP+JSON and bridged, side by side, and
// reports each of the product's performance targets against its goal. It
// starts and stops the peers itself, sends traffic only to the loopback,
// and every phase is bounded in time and requests.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if os.Getenv(serveMarketEnv) == "1" {
		os.Exit(serveMarket()) // this is the meter's own process (-meter-process)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A closed stdout (| head) must fail the report's write, not kill the
	// process before it has stopped its peers and removed its data dir.
	signal.Ignore(syscall.SIGPIPE)
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "meterbench:", err)
		os.Exit(1)
	}
}
