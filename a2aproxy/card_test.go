package a2aproxy_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/agentmarket/agentmarket/a2aproxy"
	"github.com/agentmarket/agentmarket/listings/agentcard"
	"github.com/agentmarket/agentmarket/listings/agentcard/protoschema"
)

// sellerCard is a 1.0 card with security requirements at the top and in a
// skill, their scopes written as scopes (an array, as a2a-go writes them)
// or as the proto's StringList ({"list": [...]}, as ProtoJSON SDKs do).
func sellerCard(scopes string) []byte {
	return []byte(strings.ReplaceAll(`{
  "name": "Geo", "description": "Plans routes.", "version": "1.2.0",
  "supportedInterfaces": [{"url": "https://geo.example/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
  "capabilities": {"streaming": true},
  "securitySchemes": {"google": {"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://accounts.google.com/.well-known/openid-configuration"}}},
  "securityRequirements": [{"schemes": {"google": SCOPES}}],
  "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
  "skills": [{"id": "route", "name": "Route", "description": "Plans a route.", "tags": ["maps"],
              "securityRequirements": [{"schemes": {"google": SCOPES}}]}]
}`, "SCOPES", scopes))
}

// TestProxiedCardSecurity: a proxied 1.0 card's security requirement names
// the meter's scheme in the form its reader parses. Asked for A2A 1.0, it
// is the proto's StringList, and the whole card passes the 1.0 JSON
// schema (derived from a2a.proto, protoschema). Asked for no version, it
// follows the seller's card, and is the bare array the official Go SDK
// (a2a-go v2.3.1) parses when the seller's card has none or has that.
// Skills' own requirements name the seller's schemes and are dropped.
func TestProxiedCardSecurity(t *testing.T) {
	schema, err := protoschema.A2A()
	if err != nil {
		t.Fatal(err)
	}
	const ep = "https://meter.example/a2a/lst_1"
	plain := []byte(`{"name": "Echo", "description": "Echoes.", "version": "1",
	  "supportedInterfaces": [{"url": "https://echo.example/a2a", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}],
	  "capabilities": {}, "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
	  "skills": [{"id": "echo", "name": "Echo", "description": "Echoes.", "tags": ["test"]}]}`)
	for _, tc := range []struct {
		name      string
		seller    []byte
		protoJSON bool
		want      string // the scopes written
	}{
		{"no requirement, 1.0 asked", plain, true, `{"list":[]}`},
		{"no requirement, no version asked", plain, false, `[]`},
		{"arrays, 1.0 asked", sellerCard(`["openid"]`), true, `{"list":[]}`},
		{"arrays, no version asked", sellerCard(`["openid"]`), false, `[]`},
		{"StringLists, 1.0 asked", sellerCard(`{"list": ["openid"]}`), true, `{"list":[]}`},
		{"StringLists, no version asked", sellerCard(`{"list": ["openid"]}`), false, `{"list":[]}`},
	} {
		card, err := agentcard.Parse(tc.seller)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		out, err := a2aproxy.ProxiedCard(tc.seller, card, ep, false, tc.protoJSON)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got struct {
			SecurityRequirements []struct {
				Schemes map[string]json.RawMessage `json:"schemes"`
			} `json:"securityRequirements"`
			Skills []map[string]json.RawMessage `json:"skills"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.SecurityRequirements) != 1 || len(got.SecurityRequirements[0].Schemes) != 1 ||
			string(got.SecurityRequirements[0].Schemes[a2aproxy.SecuritySchemeName]) != tc.want {
			t.Errorf("%s: securityRequirements %s, want [{schemes: {%s: %s}}]", tc.name, mustJSON(got.SecurityRequirements), a2aproxy.SecuritySchemeName, tc.want)
		}
		for _, sk := range got.Skills {
			if _, ok := sk["securityRequirements"]; ok {
				t.Errorf("%s: a skill kept the seller's security requirements: %s", tc.name, out)
			}
		}
		if tc.protoJSON {
			if err := schema.Check("AgentCard", out); err != nil {
				t.Errorf("%s: the proxied card fails the A2A 1.0 JSON schema:\n%v\n%s", tc.name, err, out)
			}
		}
		if tc.want == `[]` {
			var sdk a2a.AgentCard
			if err := json.Unmarshal(out, &sdk); err != nil {
				t.Errorf("%s: the official Go SDK cannot parse the proxied card: %v", tc.name, err)
			} else if len(sdk.SecurityRequirements) != 1 || sdk.SecurityRequirements[0][a2aproxy.SecuritySchemeName] == nil {
				t.Errorf("%s: the SDK reads requirements %v, want the meter's scheme", tc.name, sdk.SecurityRequirements)
			}
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
