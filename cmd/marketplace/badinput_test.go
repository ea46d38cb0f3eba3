package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
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

// TestBadInput: what malformed or oversize input gets from the marketplace:
// the right status, the one error shape, field errors naming the field,
// and nothing stored.
func TestBadInput(t *testing.T) {
	mk := newMarket(t, map[string]string{})
	base, admin := mk.m.URL, mk.api.with(mk.buyer)

	json := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + mk.buyer}}
	name := fmt.Appendf(nil, `{"name":%q}`, strings.Repeat("k", 3<<20))
	if status, body := raw(t, "POST", base+"/api/v1/api-keys", json, name); status != 422 || !strings.Contains(body, `"field":"name","rule":"max_length"`) {
		t.Errorf("3 MiB key name: %d %.200s, want 422 name:max_length", status, body)
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
}
