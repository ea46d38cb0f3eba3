package pushverify_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/agentmarket/agentmarket/docs/examples/pushverify"
)

// A delivery the meter made (its body and AgentMarket-Signature header as
// the webhook got them), and the marketplace's JWKS at the time: the
// sample of docs/long-tasks.md. It is for org_7hq2kx4mzd5wa3bp's config
// cfg-1 at https://hooks.globex.example/agentmarket.
const (
	sampleJWKS      = `{"keys":[{"use":"sig","kty":"EC","kid":"T0QQ0AI-oJHmGoFBbn5zUwBICfcXvdrUN3rHxAmlftk","crv":"P-256","alg":"ES256","x":"5vMPIMTeXFQ6Ga0O3Y3bv9GTKecW_IDYhkLR0BnNLBQ","y":"I6agbPyJ43XEOPv3xEjgSKmpmu-TZTlwdNLWigvKF9w"}]}`
	sampleSignature = "eyJhZ2VudG1hcmtldC1jb25maWciOiJjZmctMSIsImFnZW50bWFya2V0LWRlbGl2ZXJ5IjoiZGx2XzVkNDE0MDJhYmM0YjJhNzZiOTcxOWQ5MTEwMTdjNTkyIiwiYWdlbnRtYXJrZXQtbGlzdGluZyI6ImxzdF8zeHE1bWJkMms3ZmE0d3pwIiwiYWdlbnRtYXJrZXQtdGFyZ2V0IjoiclExWkpCX2xaOWlvVnZDNzJ5WXRrZlpzR2NGaDN6YUpBdEFzQ0Q5OVY4YyIsImFnZW50bWFya2V0LXRhc2siOiJ0YXNrLTQyIiwiYWxnIjoiRVMyNTYiLCJhdWQiOiJvcmdfN2hxMmt4NG16ZDV3YTNicCIsImlhdCI6MTc5NjExOTIwMywia2lkIjoiVDBRUTBBSS1vSkhtR29GQmJuNXpVd0JJQ2ZjWHZkclVOM3JIeEFtbGZ0ayJ9..8nlinw3o4sm9GIh8mTED9js_tK-rJHXLs3OPRAnk02qxLdI8_II4umg-0RfsBFcTKqodzmOcRdIr6wGDmJnNbA"
	sampleBody      = `{"statusUpdate":{"taskId":"task-42","contextId":"ctx-1","status":{"state":"TASK_STATE_COMPLETED"}}}`
)

// sampleMarketplace serves the sample JWKS where a marketplace serves it.
func sampleMarketplace() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/push/jwks" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		io.WriteString(w, sampleJWKS)
	}))
}

// Verify a delivery kept from earlier (so its age is not checked).
func ExampleVerifier_Verify() {
	market := sampleMarketplace()
	defer market.Close()

	v := &pushverify.Verifier{
		JWKSURL: market.URL + "/api/v1/push/jwks",
		Org:     "org_7hq2kx4mzd5wa3bp",                     // your org
		URL:     "https://hooks.globex.example/agentmarket", // this webhook, as your configs name it
		Config:  pushverify.ConfigIDs("cfg-1"),              // your configs here
		MaxSkew: -1,
	}
	d, err := v.Verify(context.Background(), sampleSignature, []byte(sampleBody))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("verified:", d.DeliveryID, "task", d.TaskID, "on", d.ListingID, "config", d.ConfigID, "for", d.Org, "signed", d.IssuedAt.UTC().Format(time.RFC3339))

	// One byte changed, and it is not the meter's any more.
	_, err = v.Verify(context.Background(), sampleSignature, []byte(sampleBody+" "))
	fmt.Println("changed body:", err)

	// Genuine, but for another org's webhook: not for this one.
	other := &pushverify.Verifier{JWKSURL: v.JWKSURL, Org: "org_other", URL: v.URL, Config: v.Config, MaxSkew: -1}
	_, err = other.Verify(context.Background(), sampleSignature, []byte(sampleBody))
	fmt.Println("another org's verifier:", err)
	// Output:
	// verified: dlv_5d41402abc4b2a76b9719d911017c592 task task-42 on lst_3xq5mbd2k7fa4wzp config cfg-1 for org_7hq2kx4mzd5wa3bp signed 2026-12-01T10:00:03Z
	// changed body: the signature does not match the body
	// another org's verifier: the delivery is not for this webhook: signed for org "org_7hq2kx4mzd5wa3bp"
}

// A webhook that sees only verified deliveries.
func ExampleVerifier_Handler() {
	v := &pushverify.Verifier{JWKSURL: "https://market.example/api/v1/push/jwks",
		Org: "org_7hq2kx4mzd5wa3bp", URL: "https://hooks.globex.example/hook", Config: pushverify.ConfigIDs("cfg-1", "alerts:org_7hq2kx4mzd5wa3bp")}
	http.Handle("/hook", v.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := pushverify.FromContext(r.Context())
		body, _ := io.ReadAll(r.Body) // the notification, in your A2A version
		log.Printf("delivery %s about task %s: %s", d.DeliveryID, d.TaskID, body)
		w.WriteHeader(http.StatusNoContent)
	})))
	// http.ListenAndServe(":8443", nil) (behind TLS)
}
