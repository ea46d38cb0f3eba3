// Command pushhook is a buyer's webhook that accepts only push
// notifications signed by the AgentMarket meter (docs/long-tasks.md).
//
// Serve a webhook, printing each verified delivery for your org, at the
// URL your push configs name, of the configs you list:
//
//	go run ./docs/examples/pushverify/pushhook -jwks https://market.example/api/v1/push/jwks \
//	    -org org_7hq2kx4mzd5wa3bp -url https://hooks.globex.example/agentmarket -config cfg-1 -listen :8443
//
// Check one delivery saved earlier (its body, byte for byte, and its
// AgentMarket-Signature header):
//
//	go run ./docs/examples/pushverify/pushhook -jwks https://market.example/api/v1/push/jwks \
//	    -org org_7hq2kx4mzd5wa3bp -url https://hooks.globex.example/agentmarket -config cfg-1 \
//	    -body delivery.json -signature "$(cat delivery.sig)" -max-skew -1s
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket/docs/examples/pushverify"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pushhook", flag.ContinueOnError)
	fs.SetOutput(stderr)
	jwks := fs.String("jwks", "", "the marketplace's JWKS URL, https://<marketplace>/api/v1/push/jwks")
	org := fs.String("org", "", "your org's id: a delivery signed for another org is refused")
	url := fs.String("url", "", "this webhook's URL, exactly as your push configs name it")
	configs := fs.String("config", "", "your push config ids at this webhook, comma-separated (alerts: alerts:<org>)")
	listen := fs.String("listen", "", "serve a webhook at this address (host:port)")
	bodyFile := fs.String("body", "", "check one delivery: the file with its body")
	signature := fs.String("signature", "", "check one delivery: its AgentMarket-Signature header")
	maxSkew := fs.Duration("max-skew", 5*time.Minute, "how far from now a signature's iat may be (negative: not checked)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *jwks == "" || *org == "" || *url == "" || *configs == "" || (*listen == "") == (*bodyFile == "") {
		fmt.Fprintln(stderr, "pushhook needs -jwks, -org, -url and -config, and -listen or -body with -signature")
		fs.Usage()
		return 2
	}
	v := &pushverify.Verifier{JWKSURL: *jwks, Org: *org, URL: *url, Config: pushverify.ConfigIDs(strings.Split(*configs, ",")...), MaxSkew: *maxSkew}

	if *bodyFile != "" {
		body, err := os.ReadFile(*bodyFile)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		d, err := v.Verify(context.Background(), *signature, body)
		if err != nil {
			fmt.Fprintln(stdout, "NOT VERIFIED:", err)
			return 1
		}
		show(stdout, d, body)
		return 0
	}

	// A copy of a request is refused; a retry of a delivery printed
	// already is acknowledged without printing it again.
	v.Seen = &pushverify.Seen{}
	hook := v.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := pushverify.FromContext(r.Context())
		body, _ := io.ReadAll(r.Body)
		show(stdout, d, body)
		w.WriteHeader(http.StatusNoContent)
	}))
	log.Printf("webhook listening on %s, verifying against %s", *listen, *jwks)
	if err := http.ListenAndServe(*listen, hook); err != nil {
		fmt.Fprintln(stderr, err)
	}
	return 1
}

// show prints a verified delivery as one JSON line.
func show(w io.Writer, d *pushverify.Delivery, body []byte) {
	var shown any = string(body)
	if json.Valid(body) {
		shown = json.RawMessage(body)
	}
	out, _ := json.Marshal(map[string]any{"verified": true, "kid": d.KeyID, "iat": d.IssuedAt.UTC(), "delivery": d.DeliveryID,
		"task": d.TaskID, "listing": d.ListingID, "config": d.ConfigID, "org": d.Org, "body": shown})
	fmt.Fprintln(w, string(out))
}
