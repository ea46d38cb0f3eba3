package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/a2aproxy"
)

// invokes calls the 0.3 agent over JSON-RPC and the 1.0 agent over
// HTTP+JSON with key, and says how the meter answered each: "ok", or the
// refusal's code (JSON-RPC) and status (HTTP+JSON).
func (mk *market) invokes(t *testing.T, key string, n int) (jsonrpc, rest string) {
	t.Helper()
	res, e := (rpc{t: t, url: mk.ep03, key: key}).call("message/send", msg03(fmt.Sprintf("matrix %d", n), nil))
	switch {
	case e != nil && strings.Contains(fmt.Sprint(e["message"]), "may not invoke listings"):
		jsonrpc = fmt.Sprintf("refused %v", e["code"])
	case e != nil:
		jsonrpc = fmt.Sprintf("error %v", e)
	case res != nil:
		jsonrpc = "ok"
	}
	status, body, _ := restCall(t, key, "POST", mk.ep10+"/message:send", "1.0",
		map[string]any{"message": map[string]any{"messageId": fmt.Sprintf("matrix-%d", n), "role": "ROLE_USER", "parts": []any{map[string]any{"text": "hello"}}}})
	switch {
	case status == 200:
		rest = "ok"
	case strings.Contains(fmt.Sprint(body), "may not invoke listings"):
		rest = fmt.Sprintf("refused %d", status)
	default:
		rest = fmt.Sprintf("error %d %v", status, body)
	}
	return jsonrpc, rest
}

// TestInvokeRolesMatrix: every role of a subscribed buyer org against the
// meter, in both bindings. By default admin and buyer keys invoke, finance
// and seller keys are refused (-32041, HTTP 403 on HTTP+JSON); only the
// org's admin widens it, per role, and the meter applies the change within
// its cache TTL, and the narrowing back too.
func TestInvokeRolesMatrix(t *testing.T) {
	mk := newMarket(t, map[string]string{})
	api := mk.api.with(mk.buyer)
	keys := map[string]string{"admin": mk.buyer}
	for _, role := range []string{"buyer", "finance", "seller"} {
		_, keys[role] = mintKey(t, api, map[string]any{"name": role + " key", "role": role})
	}
	refused := fmt.Sprintf("refused %d", a2aproxy.CodeNotEntitled)
	n := 0
	check := func(what string, want map[string]bool) {
		t.Helper()
		for _, role := range []string{"admin", "buyer", "finance", "seller"} {
			n++
			jsonrpc, rest := mk.invokes(t, keys[role], n)
			wantRPC, wantREST := refused, "refused 403"
			if want[role] {
				wantRPC, wantREST = "ok", "ok"
			}
			if jsonrpc != wantRPC || rest != wantREST {
				t.Errorf("%s: a %s key invokes: JSON-RPC %s, HTTP+JSON %s; want %s, %s", what, role, jsonrpc, rest, wantRPC, wantREST)
			}
		}
	}
	// untilRole waits out the meter's cache for a role's change.
	untilRole := func(role string, ok bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			n++
			jsonrpc, _ := mk.invokes(t, keys[role], n)
			if (jsonrpc == "ok") == ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("a %s key still answers %s 10 s after the change", role, jsonrpc)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	check("by default", map[string]bool{"admin": true, "buyer": true})
	if r := api.do("GET", "/api/v1/org/invoke-roles", nil); r.Status != 200 || string(r.Body) != `{"roles":["admin","buyer"]}` {
		t.Errorf("default invoke roles: %d %s", r.Status, r.Body)
	}

	// Only an admin widens it.
	for _, role := range []string{"buyer", "finance", "seller"} {
		if r := api.with(keys[role]).do("PATCH", "/api/v1/org/invoke-roles", map[string]any{"roles": []string{role}}); r.Status != 403 {
			t.Errorf("a %s key widens the invoke roles: %d %s, want 403", role, r.Status, r.Body)
		}
	}
	if r := api.do("PATCH", "/api/v1/org/invoke-roles", map[string]any{"roles": []string{"auditor"}}); r.Status != 422 || r.code() != "invalid_invoke_roles" {
		t.Errorf("an unknown role: %d %s, want 422 invalid_invoke_roles", r.Status, r.Body)
	}
	if r := api.do("PATCH", "/api/v1/org/invoke-roles", map[string]any{"roles": []string{"finance"}}); r.Status != 200 || string(r.Body) != `{"roles":["admin","buyer","finance"]}` {
		t.Fatalf("widen to finance: %d %s", r.Status, r.Body)
	}
	if r := api.with(keys["finance"]).do("GET", "/api/v1/org/invoke-roles", nil); r.Status != 200 || string(r.Body) != `{"roles":["admin","buyer","finance"]}` {
		t.Errorf("invoke roles as finance reads them: %d %s", r.Status, r.Body)
	}
	untilRole("finance", true)
	check("finance widened", map[string]bool{"admin": true, "buyer": true, "finance": true})

	// Another org's setting is its own: the seller org's widening does
	// not reach the buyer org's seller key.
	if r := api.with(mk.seller).do("PATCH", "/api/v1/org/invoke-roles", map[string]any{"roles": []string{"seller"}}); r.Status != 200 {
		t.Fatalf("the seller org widens to seller: %d %s", r.Status, r.Body)
	}
	time.Sleep(2500 * time.Millisecond) // past the meter's 2 s cache
	check("the other org widened to seller", map[string]bool{"admin": true, "buyer": true, "finance": true})

	if r := api.do("PATCH", "/api/v1/org/invoke-roles", map[string]any{"roles": []string{"admin", "buyer", "seller"}}); r.Status != 200 || string(r.Body) != `{"roles":["admin","seller","buyer"]}` {
		t.Fatalf("swap finance for seller: %d %s", r.Status, r.Body)
	}
	untilRole("finance", false)
	untilRole("seller", true)
	check("seller widened, finance narrowed back", map[string]bool{"admin": true, "buyer": true, "seller": true})
	// Admin and buyer cannot be narrowed away.
	if r := api.do("PATCH", "/api/v1/org/invoke-roles", map[string]any{"roles": []string{}}); r.Status != 200 || string(r.Body) != `{"roles":["admin","buyer"]}` {
		t.Fatalf("back to the default: %d %s", r.Status, r.Body)
	}
	untilRole("seller", false)
	check("back to the default", map[string]bool{"admin": true, "buyer": true})
}
