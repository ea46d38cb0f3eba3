package agentcard_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/agentmarket/agentmarket/listings/agentcard"
)

// Forms of a card that Parse accepts and reads as the same model: defaults,
// fallbacks, legacy and hybrid fields, unknown members, a byte order mark.

func TestParseAcceptedVariants(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		path    string
		value   any
		check   func(*agentcard.Card) bool
	}{
		{"grpc host:port", fixture10, "supportedInterfaces[2].url", "grpc.invoices.example.com:8443",
			func(c *agentcard.Card) bool { return c.Interfaces[2].URL == "grpc.invoices.example.com:8443" }},
		{"grpc ipv6 host:port", fixture03, "additionalInterfaces[1].url", "[2001:db8::1]:50051",
			func(c *agentcard.Card) bool { return c.Interfaces[1].URL == "[2001:db8::1]:50051" }},
		{"custom binding with ws url", fixture10, "supportedInterfaces[2]", map[string]any{
			"url": "wss://agent.example.com/a2a/websocket", "protocolBinding": "https://example.com/bindings/websocket/v1", "protocolVersion": "1.0",
		}, func(c *agentcard.Card) bool {
			return c.Interfaces[2].Binding == "https://example.com/bindings/websocket/v1"
		}},
		{"binding any case", fixture10, "supportedInterfaces[1].protocolBinding", "Http+Json",
			func(c *agentcard.Card) bool { return c.Interfaces[1].Binding == agentcard.BindingHTTPJSON }},
		{"interface version with patch", fixture10, "supportedInterfaces[0].protocolVersion", "1.0.1",
			func(c *agentcard.Card) bool { return c.Interfaces[0].ProtocolVersion == "1.0" }},
		{"future interface version", fixture10, "supportedInterfaces[1].protocolVersion", "1.1",
			func(c *agentcard.Card) bool {
				return slices.Equal(c.ProtocolVersions, []string{"1.0", "1.1", "0.3"})
			}},
		{"plain http for local agents", fixture10, "supportedInterfaces[0].url", "http://localhost:8080/a2a",
			func(c *agentcard.Card) bool { return c.Interfaces[0].URL == "http://localhost:8080/a2a" }},
		{"0.2 card", fixture03, "protocolVersion", "0.2.9",
			func(c *agentcard.Card) bool { return slices.Equal(c.ProtocolVersions, []string{"0.2"}) }},
		{"preferredTransport defaults to JSONRPC", fixture03, "preferredTransport", remove,
			func(c *agentcard.Card) bool { return c.Interfaces[0].Binding == agentcard.BindingJSONRPC }},
		{"preferredTransport grpc", fixture03, "preferredTransport", "GRPC",
			func(c *agentcard.Card) bool {
				// The main url now declares gRPC, so the JSON-RPC entry in
				// additionalInterfaces is no longer a duplicate.
				return len(c.Interfaces) == 4 && c.Interfaces[0].Binding == agentcard.BindingGRPC &&
					c.Interfaces[1].Binding == agentcard.BindingJSONRPC
			}},
		{"no security requirements", fixture10, "securityRequirements", remove,
			func(c *agentcard.Card) bool { return c.Security == nil }},
		{"empty tags", fixture10, "skills[0].tags", []any{},
			func(c *agentcard.Card) bool { return len(c.Skills[0].Tags) == 0 }},
		{"optional null", fixture10, "documentationUrl", nil,
			func(c *agentcard.Card) bool { return c.DocumentationURL == "" }},
		{"custom binding keeps an https url", fixture10, "supportedInterfaces[2].protocolBinding", "https://example.com/bindings/sse/v1",
			func(c *agentcard.Card) bool { return c.Interfaces[2].Binding == "https://example.com/bindings/sse/v1" }},
		{"names are trimmed", fixture10, "name", "  Invoice Agent \n",
			func(c *agentcard.Card) bool { return c.Name == "Invoice Agent" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			card := mustParse(t, edit(t, readFixture(t, tt.fixture), tt.path, tt.value))
			if !tt.check(card) {
				t.Errorf("unexpected card: %+v", card)
			}
		})
	}
}

func TestParseSecurityFallback(t *testing.T) {
	raw := edit(t, readFixture(t, fixture10), "securityRequirements", remove)
	raw = edit(t, raw, "security", []any{map[string]any{"google": []any{"openid"}}})
	card := mustParse(t, raw)
	if got, want := compactJSON(t, card.Security), `[{"google":["openid"]}]`; got != want {
		t.Errorf("Security = %s, want %s", got, want)
	}
}

func TestParseLegacyExtendedCardFlag(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		edits   map[string]any
		want    bool
	}{
		{"0.3 flag set", fixture03, nil, true},
		{"0.3 flag removed", fixture03, map[string]any{"supportsAuthenticatedExtendedCard": remove}, false},
		{"1.0 capability removed", fixture10, map[string]any{"capabilities.extendedAgentCard": remove}, false},
		{"1.0 with pre-1.0 top-level flag", fixture10, map[string]any{
			"capabilities.extendedAgentCard": remove, "supportsExtendedAgentCard": true,
		}, true},
		{"1.0 hybrid with 0.3 flag", fixture10, map[string]any{
			"capabilities.extendedAgentCard": false, "supportsAuthenticatedExtendedCard": true,
		}, true},
		{"1.0 ignores a malformed legacy flag", fixture10, map[string]any{
			"capabilities.extendedAgentCard": false, "supportsAuthenticatedExtendedCard": "yes",
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := readFixture(t, tt.fixture)
			for _, p := range slices.Sorted(maps.Keys(tt.edits)) {
				raw = edit(t, raw, p, tt.edits[p])
			}
			if got := mustParse(t, raw).Capabilities.ExtendedAgentCard; got != tt.want {
				t.Errorf("ExtendedAgentCard = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseHybridCardReadsAs10(t *testing.T) {
	raw := readFixture(t, fixture10)
	want := mustParse(t, raw)
	// What a 1.0 SDK adds for 0.3 clients; the 1.0 list already covers it.
	for path, v := range map[string]any{
		"url":                  "https://invoices.example.com/a2a/v03",
		"protocolVersion":      "0.3.0",
		"preferredTransport":   "JSONRPC",
		"additionalInterfaces": []any{map[string]any{"url": "https://invoices.example.com/a2a/v03", "transport": "JSONRPC"}},
	} {
		raw = edit(t, raw, path, v)
	}
	sameCard(t, mustParse(t, raw), want)
}

func TestParseUnknownFieldsIgnored(t *testing.T) {
	for _, fixture := range []string{fixture03, fixture10} {
		t.Run(fixture, func(t *testing.T) {
			raw := readFixture(t, fixture)
			want := mustParse(t, raw)
			for path, v := range map[string]any{
				"x-marketplace":                    map[string]any{"tier": "gold"},
				"skills[0].x-price":                12.5,
				"capabilities.futureFlag":          []any{1, 2},
				"capabilities.extensions[0].extra": nil,
				"provider.country":                 "NZ",
				"signatures[0].x":                  true,
			} {
				raw = edit(t, raw, path, v)
			}
			sameCard(t, mustParse(t, raw), want)
		})
	}
}

func TestParseByteOrderMark(t *testing.T) {
	raw := append([]byte("\xef\xbb\xbf"), readFixture(t, fixture10)...)
	if _, err := agentcard.Parse(raw); err != nil {
		t.Fatalf("Parse: %v", err)
	}
}
