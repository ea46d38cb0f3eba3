package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/a2aproxy"
)

// stripeCall is one request the marketplace made to Stripe.
type stripeCall struct {
	Method, Path, Key string
	Form              url.Values
}

// stripeRecorder stands between the marketplace and stripe-mock: it
// records every call and, because stripe-mock keeps no state, gives each
// created price its own id and echoes a subscription's items back, as
// Stripe itself does.
type stripeRecorder struct {
	mu     sync.Mutex
	calls  []stripeCall
	prices int
	subs   int
	items  int
	srv    *httptest.Server
}

func newStripeRecorder(t *testing.T) *stripeRecorder {
	base := os.Getenv("AGENTMARKET_TEST_STRIPE_API_BASE")
	if base == "" {
		if os.Getenv("AGENTMARKET_TEST_REQUIRE_SERVICES") == "1" {
			t.Fatal("AGENTMARKET_TEST_STRIPE_API_BASE is not set: run the tests through scripts/test.sh")
		}
		t.Skip("AGENTMARKET_TEST_STRIPE_API_BASE not set: Stripe tests skipped (scripts/test.sh starts stripe-mock)")
	}
	r := &stripeRecorder{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		form, _ := url.ParseQuery(string(body))
		up, _ := http.NewRequest(req.Method, base+req.URL.RequestURI(), bytes.NewReader(body))
		up.Header = req.Header.Clone()
		res, err := http.DefaultClient.Do(up)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		r.mu.Lock()
		r.calls = append(r.calls, stripeCall{req.Method, req.URL.Path, req.Header.Get("Idempotency-Key"), form})
		if res.StatusCode == 200 && req.Method == "POST" {
			var obj map[string]any
			if json.Unmarshal(raw, &obj) == nil {
				switch req.URL.Path {
				case "/v1/prices":
					r.prices++
					obj["id"] = fmt.Sprintf("price_test_%d", r.prices)
				case "/v1/subscriptions":
					r.subs++
					obj["id"] = fmt.Sprintf("sub_test_%d", r.subs)
					r.echoItems(obj, form)
				default:
					// An update that replaces items (a plan change):
					// Stripe answers with the items the subscription
					// now has.
					if strings.HasPrefix(req.URL.Path, "/v1/subscriptions/") && form.Get("items[0][id]") != "" {
						obj["id"] = strings.TrimPrefix(req.URL.Path, "/v1/subscriptions/")
						r.echoItems(obj, form)
					}
				}
				raw, _ = json.Marshal(obj)
			}
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(res.StatusCode)
		w.Write(raw)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// echoItems sets a subscription's items to one per price the request
// names (items deleted by id are left out), each with a new id
// si_test_<n>: the first subscription's are si_test_0 to si_test_4.
func (r *stripeRecorder) echoItems(obj map[string]any, form url.Values) {
	var data []any
	for i := 0; form.Get(fmt.Sprintf("items[%d][price]", i))+form.Get(fmt.Sprintf("items[%d][id]", i)) != ""; i++ {
		price := form.Get(fmt.Sprintf("items[%d][price]", i))
		if price == "" {
			continue
		}
		data = append(data, map[string]any{"id": fmt.Sprintf("si_test_%d", r.items), "object": "subscription_item",
			"price": map[string]any{"id": price, "object": "price"}})
		r.items++
	}
	obj["items"] = map[string]any{"object": "list", "data": data, "has_more": false}
}

func (r *stripeRecorder) take() []stripeCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

const webhookSecret = "whsec_test_agentmarket"

// signedEvent is a Stripe event as Stripe would deliver it, signed with
// the endpoint secret (t=…,v1=HMAC-SHA256("t.payload")).
func signedEvent(id, typ, subscription string, created time.Time) ([]byte, string) {
	return signedObject(id, typ, map[string]any{"id": "in_" + id, "object": "invoice", "subscription": subscription}, created)
}

// signedObject is a signed Stripe event carrying obj.
func signedObject(id, typ string, obj map[string]any, created time.Time) ([]byte, string) {
	payload, _ := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "api_version": "2024-06-20",
		"created": created.Unix(), "data": map[string]any{"object": obj}})
	ts := fmt.Sprint(time.Now().Unix())
	mac := hmac.New(sha256.New, []byte(webhookSecret))
	mac.Write([]byte(ts + "." + string(payload)))
	return payload, "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

func (c client) webhook(payload []byte, sig string) response {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.base+"/api/v1/webhooks/stripe", bytes.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Stripe-Signature", sig)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	out := response{Status: res.StatusCode}
	out.Body, _ = io.ReadAll(res.Body)
	json.Unmarshal(out.Body, &out.JSON)
	return out
}

// TestStripeEndToEnd: list → subscribe → call → webhooks → cancel, with
// the marketplace talking to stripe-mock; every Stripe call is recorded
// and checked, and the contract's state follows the webhooks through to
// the meter.
func TestStripeEndToEnd(t *testing.T) {
	rec := newStripeRecorder(t)
	env := map[string]string{
		"AGENTMARKET_STRIPE_SECRET_KEY":     "sk_test_123",
		"AGENTMARKET_STRIPE_API_BASE":       rec.srv.URL,
		"AGENTMARKET_STRIPE_WEBHOOK_SECRET": webhookSecret,
		"AGENTMARKET_BILLING_GRACE":         "1s",
		"AGENTMARKET_PLATFORM_FEE_PERCENT":  "12.5",
	}
	mk := newMarket(t, env) // lists two agents, subscribes the buyer to both
	calls := rec.take()
	// At start the marketplace reads the balance: Stripe answers and takes the key.
	if len(calls) == 0 || calls[0].Method+" "+calls[0].Path != "GET /v1/balance" {
		t.Fatalf("the first Stripe call is not the start's ping (GET /v1/balance): %v", calls)
	}
	calls = calls[1:]

	// listing → subscribe, call by call (two subscriptions: one product
	// and five prices per listing, one customer, one subscription each).
	var got []string
	for _, c := range calls {
		got = append(got, c.Method+" "+c.Path)
	}
	want := []string{
		"POST /v1/products", "POST /v1/prices", "POST /v1/prices", "POST /v1/prices", "POST /v1/prices", "POST /v1/prices",
		"POST /v1/customers", "POST /v1/subscriptions",
		"POST /v1/products", "POST /v1/prices", "POST /v1/prices", "POST /v1/prices", "POST /v1/prices", "POST /v1/prices",
		"POST /v1/subscriptions",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("Stripe calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantKey := func(c stripeCall, key string) {
		t.Helper()
		if c.Key != key {
			t.Errorf("%s %s: Idempotency-Key %q, want %q", c.Method, c.Path, c.Key, key)
		}
	}
	wantKey(calls[0], "am1/listing/"+mk.id03+"/plan/1/product")
	wantKey(calls[1], "am1/listing/"+mk.id03+"/plan/1/price/flat_fee")
	wantKey(calls[6], "am1/org/"+mk.buyerOrg+"/customer")
	sub := mk.subs[mk.id03]
	wantKey(calls[7], "am1/contract/"+sub+"/subscription")
	if f := calls[1].Form; f.Get("unit_amount") != "4900" || f.Get("recurring[interval]") != "month" || f.Get("currency") != "usd" {
		t.Errorf("flat price: %v", f)
	}
	if f := calls[7].Form; f.Get("items[0][price]") != "price_test_1" || f.Get("items[4][price]") != "price_test_5" || f.Get("metadata[agentmarket_contract_id]") != sub {
		t.Errorf("subscription: %v", f)
	}

	// A call through the meter works while the contract is active.
	b03 := rpc{t: t, url: mk.ep03, key: mk.buyer}
	if _, e := b03.call("message/send", msg03("billed work", nil)); e != nil {
		t.Fatalf("call: %v", e)
	}

	// Webhooks: forged refused, payment failed applied once, past due
	// still works, suspended after the grace, paid restores.
	api := mk.api
	payload, sig := signedEvent("evt_1", "invoice.payment_failed", "sub_test_1", time.Now())
	if r := api.webhook(payload, strings.Replace(sig, "v1=", "v1=00", 1)); r.Status != 400 {
		t.Errorf("forged signature: %d %s", r.Status, r.Body)
	}
	if r := api.webhook(payload, sig); r.Status != 200 || r.JSON["applied"] != true {
		t.Fatalf("payment failed: %d %s", r.Status, r.Body)
	}
	if r := api.webhook(payload, sig); r.Status != 200 || r.JSON["applied"] != false {
		t.Errorf("the same event again: %d %s", r.Status, r.Body)
	}
	status := func() string {
		return mk.api.with(mk.buyer).do("GET", "/api/v1/subscriptions/"+sub, nil).str("status")
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10s", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("suspended after the grace", func() bool { return status() == "suspended" })
	waitFor("the meter refuses the suspended contract", func() bool {
		_, e := b03.call("message/send", msg03("more work", nil))
		return e != nil && e["code"] == float64(a2aproxy.CodeNotEntitled)
	})
	payload, sig = signedEvent("evt_2", "invoice.paid", "sub_test_1", time.Now().Add(time.Second))
	if r := api.webhook(payload, sig); r.Status != 200 || r.JSON["applied"] != true {
		t.Fatalf("paid: %d %s", r.Status, r.Body)
	}
	waitFor("active again", func() bool { return status() == "active" })
	// The audit log holds each transition, the webhook's marked so and
	// the grace sweeper's made by no one.
	var moves []string
	for _, e := range auditEntries(t, api.with(operatorKey(t, mk.m)), "?object_id="+sub+"&action=subscription.transition") {
		moves = append(moves, fmt.Sprintf("%v→%v %v %v", get(e, "before", "Status"), get(e, "after", "Status"), e["via"], e["actor"]))
	}
	if got, want := strings.Join(moves, ", "), "active→past_due stripe_webhook map[ip:127.0.0.1], past_due→suspended <nil> map[], suspended→active stripe_webhook map[ip:127.0.0.1]"; got != want {
		t.Errorf("the audit log's transitions:\n got %s\nwant %s", got, want)
	}
	waitFor("the meter accepts again", func() bool {
		_, e := b03.call("message/send", msg03("welcome back", nil))
		return e == nil
	})
	// A stale event (older than the last applied) changes nothing.
	payload, sig = signedEvent("evt_0", "invoice.payment_failed", "sub_test_1", time.Now().Add(-time.Hour))
	if r := api.webhook(payload, sig); r.Status != 200 || r.JSON["applied"] != false || status() != "active" {
		t.Errorf("stale event: %d %s, status %s", r.Status, r.Body, status())
	}

	// Cancel: the usage since the last report goes to Stripe, then the
	// subscription is canceled.
	rec.take()
	if r := mk.api.with(mk.buyer).do("DELETE", "/api/v1/subscriptions/"+sub, nil); r.Status != 200 {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	var usage, del int
	for _, c := range rec.take() {
		switch {
		case c.Method == "POST" && strings.HasPrefix(c.Path, "/v1/subscription_items/") && strings.HasSuffix(c.Path, "/usage_records"):
			usage++
			if c.Form.Get("action") != "increment" || !strings.HasPrefix(c.Key, "am1/contract/"+sub+"/usage/") {
				t.Errorf("usage record: %s %v", c.Key, c.Form)
			}
		case c.Method == "DELETE" && c.Path == "/v1/subscriptions/sub_test_1":
			del++
			if c.Key != "am1/contract/"+sub+"/cancel" {
				t.Errorf("cancel key %q", c.Key)
			}
		}
	}
	if usage == 0 || del != 1 {
		t.Errorf("on cancel: %d usage records, %d cancellations; want the usage reported, then one cancellation", usage, del)
	}
}
