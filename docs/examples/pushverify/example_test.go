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
// sample of docs/long-tasks.md.
const (
	sampleJWKS      = `{"keys":[{"use":"sig","kty":"EC","kid":"RIiUZuGJLz3Ak6mL-nnAHS8sTUUfbOKVaGkwET3VmMM","crv":"P-256","alg":"ES256","x":"ODKNiGkYpHb4L4ObxhypGvjNuGReqNhFII2Py9vGEkY","y":"nNBnqxwVnnya4FimqjAZxS2oAC2uh5qWF0txOljXJ-w"}]}`
	sampleSignature = "eyJhZ2VudG1hcmtldC1jb25maWciOiJjZmctMSIsImFnZW50bWFya2V0LWRlbGl2ZXJ5IjoiZGx2XzVkNDE0MDJhYmM0YjJhNzZiOTcxOWQ5MTEwMTdjNTkyIiwiYWdlbnRtYXJrZXQtbGlzdGluZyI6ImxzdF8zeHE1bWJkMms3ZmE0d3pwIiwiYWdlbnRtYXJrZXQtdGFzayI6InRhc2stNDIiLCJhbGciOiJFUzI1NiIsImlhdCI6MTc5NjExOTIwMywia2lkIjoiUklpVVp1R0pMejNBazZtTC1ubkFIUzhzVFVVZmJPS1ZhR2t3RVQzVm1NTSJ9..sZXR-gJBWiBXKr2zt8VAOF52zZs6ujvdT6rTFxuJeTiLa3idwlsNIZaazRY1SShcUA_asC7efFJFOsGf-X-Cyw"
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

	v := &pushverify.Verifier{JWKSURL: market.URL + "/api/v1/push/jwks", MaxSkew: -1}
	d, err := v.Verify(context.Background(), sampleSignature, []byte(sampleBody))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("verified:", d.DeliveryID, "task", d.TaskID, "on", d.ListingID, "config", d.ConfigID, "signed", d.IssuedAt.UTC().Format(time.RFC3339))

	// One byte changed, and it is not the meter's any more.
	_, err = v.Verify(context.Background(), sampleSignature, []byte(sampleBody+" "))
	fmt.Println("changed body:", err)
	// Output:
	// verified: dlv_5d41402abc4b2a76b9719d911017c592 task task-42 on lst_3xq5mbd2k7fa4wzp config cfg-1 signed 2026-12-01T10:00:03Z
	// changed body: the signature does not match the body
}

// A webhook that sees only verified deliveries.
func ExampleVerifier_Handler() {
	v := &pushverify.Verifier{JWKSURL: "https://market.example/api/v1/push/jwks"}
	http.Handle("/hook", v.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := pushverify.FromContext(r.Context())
		body, _ := io.ReadAll(r.Body) // the notification, in your A2A version
		log.Printf("delivery %s about task %s: %s", d.DeliveryID, d.TaskID, body)
		w.WriteHeader(http.StatusNoContent)
	})))
	// http.ListenAndServe(":8443", nil) (behind TLS)
}
