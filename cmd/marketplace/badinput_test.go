package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/a2aproxy"
)

// raw sends one request as given and returns status and body.
func raw(t *testing.T, method, url string, header http.Header, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url[:min(len(url), 80)], err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// errorCode is the code of an API error body, "" when the body is not one.
func errorCode(body string) string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	json.Unmarshal([]byte(body), &e)
	return e.Error.Code
}

// oversizeHeaders checks that URLs and headers past the limit are answered
// 431 in the API's error shape, on any path, signed in or not.
func oversizeHeaders(t *testing.T, base string, paths ...string) {
	t.Helper()
	long := strings.Repeat("x", 5000)
	for _, p := range paths {
		if status, body := raw(t, "GET", base+p+"?q="+long, nil, nil); status != 431 || errorCode(body) != "headers_too_large" {
			t.Errorf("GET %s with a 5000-byte URL: %d %s, want 431 headers_too_large", p, status, body)
		}
		if status, body := raw(t, "GET", base+p, http.Header{"X-Padding": {long}}, nil); status != 431 || errorCode(body) != "headers_too_large" {
			t.Errorf("GET %s with a 5000-byte header: %d %s, want 431 headers_too_large", p, status, body)
		}
	}
}

// TestBadInput: what malformed or oversize input gets from the marketplace
// (with its embedded meter): the right status, the one error shape, field
// errors naming the field, and nothing stored.
func TestBadInput(t *testing.T) {
	mk := newMarket(t, map[string]string{})
	base, admin := mk.m.URL, mk.api.with(mk.buyer)
	oversizeHeaders(t, base, "/api/v1/listings", "/healthz", "/", "/a2a/"+mk.id03+"/.well-known/agent-card.json")

	// Bodies: the control plane takes up to 1 MiB and answers 413 beyond.
	json := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + mk.buyer}}
	name := func(n int) []byte { return fmt.Appendf(nil, `{"name":%q}`, strings.Repeat("k", n)) }
	overhead := len(name(0))
	if status, body := raw(t, "POST", base+"/api/v1/api-keys", json, name(3<<20)); status != 413 || errorCode(body) != "body_too_large" {
		t.Errorf("3 MiB key request: %d %.200s, want 413 body_too_large", status, body)
	}
	if status, body := raw(t, "POST", base+"/api/v1/api-keys", json, name(1<<20-overhead+1)); status != 413 || errorCode(body) != "body_too_large" {
		t.Errorf("1 MiB + 1 byte key request: %d %.200s, want 413 body_too_large", status, body)
	}
	if status, body := raw(t, "POST", base+"/api/v1/api-keys", json, name(1<<20-overhead)); status != 422 || !strings.Contains(body, `"field":"name","rule":"max_length"`) {
		t.Errorf("1 MiB key request: %d %.200s, want 422 name:max_length", status, body)
	}
	if status, body := raw(t, "POST", base+"/signup", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}},
		[]byte("org_name="+strings.Repeat("x", 1<<20)+"&email=a%40b.example&password=correct+horse")); status != 413 {
		t.Errorf("1 MiB sign-up form: %d %.200s, want 413", status, body)
	}

	// Names: a length bound, no control characters, UTF-8 only.
	for _, tc := range []struct {
		name, path string
		body       string
		want       string
	}{
		{"key name of 101 characters", "/api/v1/api-keys", `{"name":"` + strings.Repeat("é", 101) + `"}`, "name:max_length"},
		{"key name with NUL", "/api/v1/api-keys", `{"name":"bot\u0000"}`, "name:control_character"},
		{"key name with an escape sequence", "/api/v1/api-keys", `{"name":"\u001b[2Jbot"}`, "name:control_character"},
		{"org name with NUL", "/api/v1/signup", `{"org_name":"Evil\u0000Corp","email":"e@evil.example","password":"correct horse battery"}`, "org_name:control_character"},
		{"org name with a line break", "/api/v1/signup", `{"org_name":"Evil\nCorp","email":"e@evil.example","password":"correct horse battery"}`, "org_name:control_character"},
		{"e-mail with NUL", "/api/v1/signup", `{"org_name":"Evil","email":"e\u0000@evil.example","password":"correct horse battery"}`, "email:control_character"},
		{"e-mail of 300 characters", "/api/v1/signup", `{"org_name":"Evil","email":"` + strings.Repeat("e", 290) + `@x.example","password":"correct horse battery"}`, "email:max_length"},
		{"upstream credentials with NUL", "/api/v1/listings", `{"card_url":"http://127.0.0.1:1/","pricing":{"currency":"usd"},"upstream_auth":{"header":"X-Key","value":"k\u0000"}}`, "upstream_auth.value:control_character"},
	} {
		r := mk.api.with(mk.seller).do("POST", tc.path, tc.body)
		if r.Status != 422 || strings.Join(r.errorFields(), " ") != tc.want {
			t.Errorf("%s: %d %s, want 422 %s", tc.name, r.Status, r.Body, tc.want)
		}
	}
	if status, body := raw(t, "POST", base+"/api/v1/api-keys", json, []byte("{\"name\":\"bot\xff\"}")); status != 422 || errorCode(body) != "invalid_utf8" {
		t.Errorf("key request that is not UTF-8: %d %s, want 422 invalid_utf8", status, body)
	}
	keys := admin.do("GET", "/api/v1/api-keys", nil)
	if items, _ := keys.JSON["items"].([]any); keys.Status != 200 || len(items) != 1 || len(keys.Body) > 2000 {
		t.Errorf("GET /api-keys after the refusals: %d, %d bytes, want only the first key: %.300s", keys.Status, len(keys.Body), keys.Body)
	}

	// Paging: absurd pages are refused with a field error, never wrapped
	// round to the first page.
	for _, q := range []string{"page=9223372036854775807", "page=9223372036854775807&page_size=100", "page=10001", "page=-1", "page_size=101", "page=99999999999999999999"} {
		r := admin.do("GET", "/api/v1/listings?"+q, nil)
		if r.Status != 422 || len(r.errorFields()) != 1 || !strings.HasPrefix(r.errorFields()[0], "page") {
			t.Errorf("listings?%s: %d %s, want 422 with a page field error", q, r.Status, r.Body)
		}
	}
	if r := admin.do("GET", "/api/v1/listings?page=10000&page_size=100", nil); r.Status != 200 || r.JSON["items"] == nil || len(r.JSON["items"].([]any)) != 0 {
		t.Errorf("the last page: %d %s, want 200 and no items", r.Status, r.Body)
	}
	for _, q := range []string{"limit=9223372036854775807", "limit=99999999999999999999", "limit=ten"} {
		if r := admin.do("GET", "/api/v1/push-deliveries?"+q, nil); r.Status != 422 || len(r.errorFields()) != 1 || !strings.HasPrefix(r.errorFields()[0], "limit:") {
			t.Errorf("push-deliveries?%s: %d %s, want 422 limit", q, r.Status, r.Body)
		}
	}

	// The meter's routes keep their own, per-listing body limit, answered
	// in JSON-RPC, even where a listing allows more than the control plane.
	big := func(n int) map[string]any {
		return msg03("pad", map[string]any{"metadata": map[string]any{"pad": strings.Repeat("p", n)}})
	}
	b03 := rpc{t: t, url: mk.ep03, key: mk.buyer}
	if _, e := b03.call("message/send", big(1<<20)); e == nil || e["code"] != float64(a2aproxy.CodeRequestTooLarge) {
		t.Errorf("1 MiB call under the default 1 MiB limit: %v, want %d", e, a2aproxy.CodeRequestTooLarge)
	}
	if r := mk.api.with(mk.seller).do("PATCH", "/api/v1/listings/"+mk.id03, map[string]any{"limits": map[string]any{"max_request_bytes": 2 << 20}}); r.Status != 200 {
		t.Fatalf("raise the listing's limit: %d %s", r.Status, r.Body)
	}
	deadline := time.Now().Add(5 * time.Second) // the meter's listing cache
	for {
		// The demo agent takes at most 1 MiB itself: its refusal, not the
		// meter's, shows that the meter forwarded the body.
		_, e := b03.call("message/send", big(3<<19))
		if e != nil && e["code"] != float64(a2aproxy.CodeRequestTooLarge) && strings.Contains(fmt.Sprint(e["message"]), "exceeds 1048576") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("1.5 MiB call to a listing that allows 2 MiB: %v, want the agent's own refusal", e)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, e := b03.call("message/send", big(2<<20)); e == nil || e["code"] != float64(a2aproxy.CodeRequestTooLarge) {
		t.Errorf("2 MiB call to a listing that allows 2 MiB: %v, want %d", e, a2aproxy.CodeRequestTooLarge)
	}
}
