package stripe_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/agentmarket/agentmarket/billing/stripe"
)

const (
	apiBaseEnv = "AGENTMARKET_TEST_STRIPE_API_BASE"
	keyEnv     = "AGENTMARKET_TEST_STRIPE_SECRET_KEY"
	requireEnv = "AGENTMARKET_TEST_REQUIRE_SERVICES"
)

// call is one request as Stripe received it.
type call struct {
	Method, Path string
	// Form is the request's parameters, decoded (body and query).
	Form url.Values
	// Key is the Idempotency-Key header.
	Key    string
	Status int
}

// String renders a call on one line, parameters sorted.
func (c call) String() string {
	keys := make([]string, 0, len(c.Form))
	for k := range c.Form {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s -> %d  Idempotency-Key: %s", c.Method, c.Path, c.Status, c.Key)
	for _, k := range keys {
		fmt.Fprintf(&b, "\n      %s=%s", k, strings.Join(c.Form[k], ","))
	}
	return b.String()
}

// recorder is an http.RoundTripper that records every request and
// forwards it to the server behind next.
type recorder struct {
	next http.RoundTripper
	// echoItems fills a created subscription's items.data from the
	// request's items, as Stripe does and stateless stripe-mock does not
	// (it answers with one fixture item of a fixture price).
	echoItems bool

	mu    sync.Mutex
	calls []call
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("recorder: request body is not a form: %v", err)
	}
	for k, vs := range req.URL.Query() {
		form[k] = append(form[k], vs...)
	}
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	resp, err := r.next.RoundTrip(out)
	c := call{Method: req.Method, Path: req.URL.Path, Form: form, Key: req.Header.Get("Idempotency-Key")}
	if err == nil {
		c.Status = resp.StatusCode
		if r.echoItems && req.Method == http.MethodPost && strings.HasPrefix(req.URL.Path, "/v1/subscriptions") && form.Get("items[0][price]")+form.Get("items[0][id]") != "" &&
			resp.StatusCode == http.StatusOK {
			resp, err = echoItems(resp, form)
		}
	}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	return resp, err
}

// echoItems replaces the response's items.data with one item per
// requested price (items deleted by id are left out), with ids
// si_echo_<index>.
func echoItems(resp *http.Response, form url.Values) (*http.Response, error) {
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	var sub map[string]any
	if err := json.Unmarshal(raw, &sub); err != nil {
		return nil, fmt.Errorf("recorder: subscription response: %v", err)
	}
	var data []any
	for i := 0; form.Get(fmt.Sprintf("items[%d][price]", i))+form.Get(fmt.Sprintf("items[%d][id]", i)) != ""; i++ {
		price := form.Get(fmt.Sprintf("items[%d][price]", i))
		if price == "" {
			continue // an item deleted by id
		}
		data = append(data, map[string]any{
			"id": fmt.Sprintf("si_echo_%d", i), "object": "subscription_item",
			"price": map[string]any{"id": price, "object": "price"}, "subscription": sub["id"],
		})
	}
	sub["items"] = map[string]any{"object": "list", "data": data, "has_more": false}
	raw, err = json.Marshal(sub)
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(raw))
	resp.ContentLength = int64(len(raw))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// take returns the calls recorded since the last take.
func (r *recorder) take() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

// mockProvider returns a Provider on the stripe-mock that scripts/test.sh
// started, and the recorder its requests go through. Without one the test
// skips, or fails under AGENTMARKET_TEST_REQUIRE_SERVICES=1.
func mockProvider(t *testing.T) (*stripe.Provider, *recorder) {
	t.Helper()
	base, key := os.Getenv(apiBaseEnv), os.Getenv(keyEnv)
	if base == "" || key == "" {
		if os.Getenv(requireEnv) == "1" {
			t.Fatalf("%s and %s must be set when %s=1: run the tests through scripts/test.sh with stripe in AGENTMARKET_TEST_SERVICES",
				apiBaseEnv, keyEnv, requireEnv)
		}
		t.Skipf("%s or %s not set: stripe-mock tests skipped (scripts/test.sh sets them)", apiBaseEnv, keyEnv)
	}
	rec := &recorder{next: http.DefaultTransport, echoItems: true}
	cfg := stripe.Config{SecretKey: key, APIBase: base, HTTPClient: &http.Client{Transport: rec}}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	return stripe.New(cfg), rec
}

// fakeStripe is a stand-in Stripe API for what stripe-mock cannot show
// (errors, the amounts of prices): handle answers each request. stripe-go's
// retries are off.
func fakeStripe(t *testing.T, handle func(w http.ResponseWriter, r *http.Request)) (*stripe.Provider, *recorder) {
	t.Helper()
	return fakeProvider(t, fakeServer(t, handle), -1)
}

// fakeServer serves handle until the test ends and returns its URL.
func fakeServer(t *testing.T, handle func(w http.ResponseWriter, r *http.Request)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(handle))
	t.Cleanup(srv.Close)
	return srv.URL
}

// fakeProvider is a Provider on base whose requests are recorded.
func fakeProvider(t *testing.T, base string, retries int) (*stripe.Provider, *recorder) {
	t.Helper()
	rec := &recorder{next: http.DefaultTransport}
	cfg := stripe.Config{SecretKey: "sk_test_fake", APIBase: base, HTTPClient: &http.Client{Transport: rec}, MaxNetworkRetries: retries}
	return stripe.New(cfg), rec
}

// okJSON answers every request with a minimal object of the path's kind.
func okJSON(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/"), "/")
	fmt.Fprintf(w, `{"id": "%s_fake_%d"}`, strings.TrimSuffix(parts[0], "s"), len(r.URL.Path))
}

// want is an expected call: its parameters must be exactly these, and
// its status Status (0: 200).
type want struct {
	Method, Path, Key string
	Form              map[string]string
	Status            int
}

// checkCalls compares recorded calls with the expected ones, each call's
// parameters in full: a missing or an extra parameter is an error.
func checkCalls(t *testing.T, got []call, wants []want) {
	t.Helper()
	if len(got) != len(wants) {
		t.Errorf("got %d calls, want %d", len(got), len(wants))
	}
	for i := 0; i < len(got) && i < len(wants); i++ {
		g, w := got[i], wants[i]
		if g.Method != w.Method || g.Path != w.Path || g.Key != w.Key {
			t.Errorf("call %d: got %s %s key %q, want %s %s key %q", i, g.Method, g.Path, g.Key, w.Method, w.Path, w.Key)
		}
		if ws := max(w.Status, http.StatusOK); g.Status != ws {
			t.Errorf("call %d (%s %s): status %d, want %d", i, g.Method, g.Path, g.Status, ws)
		}
		for k, vs := range g.Form {
			wv, ok := w.Form[k]
			switch {
			case !ok:
				t.Errorf("call %d (%s %s): unexpected parameter %s=%s", i, g.Method, g.Path, k, strings.Join(vs, ","))
			case len(vs) != 1 || vs[0] != wv:
				t.Errorf("call %d (%s %s): %s=%s, want %s", i, g.Method, g.Path, k, strings.Join(vs, ","), wv)
			}
		}
		for k, wv := range w.Form {
			if _, ok := g.Form[k]; !ok {
				t.Errorf("call %d (%s %s): missing parameter %s=%s", i, g.Method, g.Path, k, wv)
			}
		}
	}
	if t.Failed() {
		for i, g := range got {
			t.Logf("recorded call %d: %s", i, g)
		}
	}
}

// merge joins parameter maps, later ones winning.
func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// baseURL and secretKey are stripe-mock's, once mockProvider has checked
// they are set.
func baseURL(*testing.T) string   { return os.Getenv(apiBaseEnv) }
func secretKey(*testing.T) string { return os.Getenv(keyEnv) }
