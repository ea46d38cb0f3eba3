package agentcard_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings/agentcard"
)

const (
	fixture03 = "testdata/card-v0.3.json"
	fixture10 = "testdata/card-v1.0.json"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func mustParse(t *testing.T, raw []byte) *agentcard.Card {
	t.Helper()
	card, err := agentcard.Parse(raw)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return card
}

// appError asserts that err is an Invalid *agentmarket.Error with code.
func appError(t *testing.T, err error, code string) *agentmarket.Error {
	t.Helper()
	var e *agentmarket.Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v (%T), want *agentmarket.Error", err, err)
	}
	if e.Kind != agentmarket.Invalid || e.Code != code {
		t.Fatalf("error kind/code = %s/%s, want %s/%s (%v)", e.Kind, e.Code, agentmarket.Invalid, code, e)
	}
	return e
}

type fieldRule struct{ Field, Rule string }

func fieldRules(e *agentmarket.Error) []fieldRule {
	var out []fieldRule
	for _, f := range e.Fields {
		out = append(out, fieldRule{f.Field, f.Rule})
	}
	return out
}

// compactJSON makes raw members comparable regardless of the fixture's
// indentation.
func compactJSON(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	if raw == nil {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("compact %s: %v", raw, err)
	}
	return b.String()
}

// checkRaw compares the as-received members, then clears them so the rest
// of the card can be compared with reflect.DeepEqual.
func checkRaw(t *testing.T, card *agentcard.Card, schemes map[string]string, security string, params []string, headers []string) {
	t.Helper()
	gotSchemes := map[string]string{}
	for k, v := range card.SecuritySchemes {
		gotSchemes[k] = compactJSON(t, v)
	}
	if !reflect.DeepEqual(gotSchemes, schemes) {
		t.Errorf("SecuritySchemes = %v, want %v", gotSchemes, schemes)
	}
	if got := compactJSON(t, card.Security); got != security {
		t.Errorf("Security = %s, want %s", got, security)
	}
	var gotParams []string
	for i := range card.Capabilities.Extensions {
		gotParams = append(gotParams, compactJSON(t, card.Capabilities.Extensions[i].Params))
		card.Capabilities.Extensions[i].Params = nil
	}
	if !slices.Equal(gotParams, params) {
		t.Errorf("extension params = %q, want %q", gotParams, params)
	}
	var gotHeaders []string
	for i := range card.Signatures {
		gotHeaders = append(gotHeaders, compactJSON(t, card.Signatures[i].Header))
		card.Signatures[i].Header = nil
	}
	if !slices.Equal(gotHeaders, headers) {
		t.Errorf("signature headers = %q, want %q", gotHeaders, headers)
	}
	card.SecuritySchemes = nil
	card.Security = nil
}

// canonicalRaw rewrites the as-received members with sorted keys and no
// insignificant space, so that cards parsed from re-encoded input compare
// equal to cards parsed from the fixture.
func canonicalRaw(t *testing.T, c *agentcard.Card) {
	t.Helper()
	canon := func(raw json.RawMessage) json.RawMessage {
		if raw == nil {
			return nil
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("raw member %s: %v", raw, err)
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for k, v := range c.SecuritySchemes {
		c.SecuritySchemes[k] = canon(v)
	}
	c.Security = canon(c.Security)
	for i := range c.Capabilities.Extensions {
		c.Capabilities.Extensions[i].Params = canon(c.Capabilities.Extensions[i].Params)
	}
	for i := range c.Signatures {
		c.Signatures[i].Header = canon(c.Signatures[i].Header)
	}
}

// sameCard compares two cards parsed from differently encoded input.
func sameCard(t *testing.T, got, want *agentcard.Card) {
	t.Helper()
	canonicalRaw(t, got)
	canonicalRaw(t, want)
	diffCard(t, got, want)
}

func diffCard(t *testing.T, got, want *agentcard.Card) {
	t.Helper()
	g, w := reflect.ValueOf(*got), reflect.ValueOf(*want)
	for i := range g.NumField() {
		if !reflect.DeepEqual(g.Field(i).Interface(), w.Field(i).Interface()) {
			t.Errorf("%s =\n\t%+v\nwant\n\t%+v", g.Type().Field(i).Name, g.Field(i).Interface(), w.Field(i).Interface())
		}
	}
}

func TestParseV03(t *testing.T) {
	card := mustParse(t, readFixture(t, fixture03))
	checkRaw(t, card,
		map[string]string{
			"google":  `{"type":"openIdConnect","openIdConnectUrl":"https://accounts.google.com/.well-known/openid-configuration"}`,
			"api-key": `{"type":"apiKey","in":"header","name":"X-API-Key"}`,
		},
		`[{"google":["openid","profile","email"]},{"api-key":[]}]`,
		[]string{`{"units":["input_tokens","output_tokens"]}`, ""},
		[]string{`{"kid":"key-1"}`},
	)
	want := &agentcard.Card{
		Name:             "GeoSpatial Route Planner Agent",
		Description:      "Provides advanced route planning, traffic analysis, and custom map generation services.",
		Version:          "1.2.0",
		ProtocolVersions: []string{"0.3"},
		Interfaces: []agentcard.Interface{
			{URL: "https://georoute-agent.example.com/a2a/v1", Binding: "JSONRPC", ProtocolVersion: "0.3", Field: "url"},
			{URL: "georoute-agent.example.com:443", Binding: "GRPC", ProtocolVersion: "0.3", Field: "additionalInterfaces[1].url"},
			{URL: "https://georoute-agent.example.com/a2a/json", Binding: "HTTP+JSON", ProtocolVersion: "0.3", Field: "additionalInterfaces[2].url"},
		},
		Capabilities: agentcard.Capabilities{
			Streaming:         true,
			PushNotifications: true,
			ExtendedAgentCard: true,
			Extensions: []agentcard.Extension{
				{URI: "https://agentmarket.example/ext/usage/v1", Description: "Reports token usage and cost in task metadata."},
				{URI: "https://developers.google.com/identity/protocols/oauth2", Description: "Google OAuth 2.0 authentication", Required: true},
			},
		},
		DefaultInputModes:  []string{"application/json", "text/plain"},
		DefaultOutputModes: []string{"application/json", "image/png"},
		Skills: []agentcard.Skill{
			{
				ID:          "route-optimizer-traffic",
				Name:        "Traffic-Aware Route Optimizer",
				Description: "Calculates the optimal driving route between two or more locations, taking into account real-time traffic conditions.",
				Tags:        []string{"maps", "routing", "navigation", "directions", "traffic"},
				Examples:    []string{"Plan a route from '1600 Amphitheatre Parkway, Mountain View, CA' to 'San Francisco International Airport' avoiding tolls."},
				InputModes:  []string{"application/json", "text/plain"},
				OutputModes: []string{"application/json", "application/vnd.geo+json", "text/html"},
			},
			{
				ID:          "custom-map-generator",
				Name:        "Personalized Map Generator",
				Description: "Creates custom map images or interactive map views based on user-defined points of interest.",
				Tags:        []string{"maps", "customization", "visualization", "cartography"},
				Examples:    []string{"Generate a map of my upcoming road trip with all planned stops highlighted."},
				InputModes:  []string{"application/json"},
				OutputModes: []string{"image/png", "image/jpeg", "application/json", "text/html"},
			},
		},
		Signatures: []agentcard.Signature{{
			Protected: "eyJhbGciOiJFUzI1NiIsInR5cCI6IkpPU0UiLCJraWQiOiJrZXktMSIsImprdSI6Imh0dHBzOi8vZXhhbXBsZS5jb20vYWdlbnQvandrcy5qc29uIn0",
			Signature: "QFdkNLNszlGj3z3u0YQGt_T9LixY3qtdQpZmsTdDHDe3fXV9y9-B3m2-XgCpzuhiLt8E0tV6HXoZKHv4GtHgKQ",
		}},
		Provider:         &agentcard.Provider{Organization: "Example Geo Services Inc.", URL: "https://www.examplegeoservices.com"},
		DocumentationURL: "https://docs.examplegeoservices.com/georoute-agent/api",
		IconURL:          "https://georoute-agent.example.com/icon.png",
	}
	diffCard(t, card, want)
}

func TestParseV10(t *testing.T) {
	card := mustParse(t, readFixture(t, fixture10))
	checkRaw(t, card,
		map[string]string{
			"bearer": `{"httpAuthSecurityScheme":{"scheme":"Bearer","bearerFormat":"JWT"}}`,
			"oauth":  `{"oauth2SecurityScheme":{"flows":{"clientCredentials":{"tokenUrl":"https://auth.ledger.example.com/token","scopes":{"invoices:read":"Read invoices"}}}}}`,
		},
		`[{"schemes":{"bearer":{"list":[]}}},{"schemes":{"oauth":{"list":["invoices:read"]}}}]`,
		[]string{`{"currency":"USD"}`},
		[]string{""},
	)
	want := &agentcard.Card{
		Name:             "Invoice Extraction Agent",
		Description:      "Extracts line items, totals and tax from invoices in PDF or image form.",
		Version:          "2.4.1",
		ProtocolVersions: []string{"1.0", "0.3"},
		Interfaces: []agentcard.Interface{
			{URL: "https://invoices.example.com/a2a/jsonrpc", Binding: "JSONRPC", ProtocolVersion: "1.0", Tenant: "acme", Field: "supportedInterfaces[0].url"},
			{URL: "https://invoices.example.com/a2a/rest", Binding: "HTTP+JSON", ProtocolVersion: "1.0", Field: "supportedInterfaces[1].url"},
			{URL: "https://grpc.invoices.example.com", Binding: "GRPC", ProtocolVersion: "1.0", Field: "supportedInterfaces[2].url"},
			{URL: "https://invoices.example.com/a2a/v03", Binding: "JSONRPC", ProtocolVersion: "0.3", Field: "supportedInterfaces[3].url"},
		},
		Capabilities: agentcard.Capabilities{
			Streaming:         true,
			ExtendedAgentCard: true,
			Extensions: []agentcard.Extension{
				{URI: "https://agentmarket.example/ext/usage/v1", Description: "Reports token usage and cost in task metadata.", Required: true},
			},
		},
		DefaultInputModes:  []string{"application/pdf", "image/png", "text/plain"},
		DefaultOutputModes: []string{"application/json"},
		Skills: []agentcard.Skill{
			{
				ID:          "extract-invoice",
				Name:        "Extract invoice",
				Description: "Returns the invoice header, line items and totals as JSON.",
				Tags:        []string{"invoices", "ocr", "finance"},
				Examples:    []string{"Extract the totals from this invoice."},
				InputModes:  []string{"application/pdf", "image/jpeg"},
				OutputModes: []string{"application/json"},
			},
			{
				ID:          "validate-vat",
				Name:        "Validate VAT",
				Description: "Checks VAT numbers and rates on an invoice against the issuing country's rules.",
				Tags:        []string{"finance", "tax", "vat"},
				OutputModes: []string{"application/json", "text/csv"},
			},
		},
		Signatures: []agentcard.Signature{{
			Protected: "eyJhbGciOiJFUzI1NiIsInR5cCI6IkpPU0UiLCJraWQiOiJsZWRnZXItMjAyNiJ9",
			Signature: "c2lnbmF0dXJlLW9mLXRoZS1jYW5vbmljYWwtY2FyZA",
		}},
		Provider:         &agentcard.Provider{Organization: "Example Ledger Ltd.", URL: "https://ledger.example.com"},
		DocumentationURL: "https://ledger.example.com/docs/invoice-agent",
		IconURL:          "https://ledger.example.com/invoice-agent.png",
	}
	diffCard(t, card, want)
}

// edit returns raw with the member at path (such as "skills[1].tags")
// replaced by value, or removed when value is the remove sentinel.
func edit(t *testing.T, raw []byte, path string, value any) []byte {
	t.Helper()
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	steps := pathStep.FindAllStringSubmatch(path, -1)
	cur := doc
	for i, s := range steps {
		last := i == len(steps)-1
		switch c := cur.(type) {
		case map[string]any:
			key := s[1]
			if last {
				if value == remove {
					if _, ok := c[key]; !ok {
						t.Fatalf("edit %s: no member %q", path, key)
					}
					delete(c, key)
				} else {
					c[key] = value
				}
			}
			cur = c[key]
		case []any:
			n, _ := strconv.Atoi(s[2])
			if n >= len(c) {
				t.Fatalf("edit %s: index %d out of range", path, n)
			}
			if last {
				c[n] = value
			}
			cur = c[n]
		default:
			t.Fatalf("edit %s: cannot step into %T", path, cur)
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var pathStep = regexp.MustCompile(`([^.\[\]]+)|\[(\d+)\]`)

type sentinel struct{}

var remove any = sentinel{}

func TestParseMissingRequired(t *testing.T) {
	tests := []struct {
		fixture string
		field   string
	}{
		{fixture03, "name"},
		{fixture03, "description"},
		{fixture03, "url"},
		{fixture03, "version"},
		{fixture03, "protocolVersion"},
		{fixture03, "capabilities"},
		{fixture03, "defaultInputModes"},
		{fixture03, "defaultOutputModes"},
		{fixture03, "skills"},
		{fixture03, "skills[1].id"},
		{fixture03, "skills[1].name"},
		{fixture03, "skills[1].description"},
		{fixture03, "skills[1].tags"},
		{fixture03, "additionalInterfaces[1].url"},
		{fixture03, "additionalInterfaces[1].transport"},
		{fixture03, "capabilities.extensions[1].uri"},
		{fixture03, "signatures[0].protected"},
		{fixture03, "signatures[0].signature"},
		{fixture03, "provider.organization"},
		{fixture03, "provider.url"},

		{fixture10, "name"},
		{fixture10, "description"},
		{fixture10, "supportedInterfaces"},
		{fixture10, "version"},
		{fixture10, "capabilities"},
		{fixture10, "defaultInputModes"},
		{fixture10, "defaultOutputModes"},
		{fixture10, "skills"},
		{fixture10, "skills[0].id"},
		{fixture10, "skills[0].name"},
		{fixture10, "skills[0].description"},
		{fixture10, "skills[0].tags"},
		{fixture10, "supportedInterfaces[2].url"},
		{fixture10, "supportedInterfaces[2].protocolBinding"},
		{fixture10, "supportedInterfaces[2].protocolVersion"},
		{fixture10, "capabilities.extensions[0].uri"},
		{fixture10, "signatures[0].protected"},
		{fixture10, "signatures[0].signature"},
		{fixture10, "provider.organization"},
		{fixture10, "provider.url"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture+"/"+tt.field, func(t *testing.T) {
			raw := readFixture(t, tt.fixture)
			for _, mut := range []struct {
				name  string
				value any
			}{{"missing", remove}, {"null", nil}, {"blank", " "}} {
				if mut.name == "blank" && !isStringField(tt.field) {
					continue
				}
				_, err := agentcard.Parse(edit(t, raw, tt.field, mut.value))
				e := appError(t, err, agentcard.CodeInvalid)
				got := fieldRules(e)
				want := []fieldRule{{tt.field, "required"}}
				if !slices.Equal(got, want) {
					t.Errorf("%s: fields = %v, want %v", mut.name, got, want)
				}
				if !strings.Contains(e.Fields[0].Message, `"`+tt.field+`"`) {
					t.Errorf("%s: message %q does not name the field", mut.name, e.Fields[0].Message)
				}
			}
		})
	}
}

func isStringField(path string) bool {
	switch path[strings.LastIndexAny(path, ".")+1:] {
	case "capabilities", "defaultInputModes", "defaultOutputModes", "skills", "tags", "supportedInterfaces":
		return false
	}
	return true
}

func TestParseRuleViolations(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		path    string
		value   any
		want    fieldRule
	}{
		{"name number", fixture10, "name", 42, fieldRule{"name", "type"}},
		{"skills object", fixture10, "skills", map[string]any{}, fieldRule{"skills", "type"}},
		{"skill not object", fixture10, "skills[1]", "validate-vat", fieldRule{"skills[1]", "type"}},
		{"tags string", fixture10, "skills[0].tags", "finance", fieldRule{"skills[0].tags", "type"}},
		{"tag number", fixture10, "skills[0].tags[1]", 7, fieldRule{"skills[0].tags[1]", "type"}},
		{"examples object", fixture10, "skills[0].examples", map[string]any{"a": "b"}, fieldRule{"skills[0].examples", "type"}},
		{"input mode number", fixture10, "defaultInputModes[2]", 1, fieldRule{"defaultInputModes[2]", "type"}},
		{"output mode null", fixture03, "skills[0].outputModes[0]", nil, fieldRule{"skills[0].outputModes[0]", "type"}},
		{"capabilities array", fixture03, "capabilities", []any{}, fieldRule{"capabilities", "type"}},
		{"streaming string", fixture10, "capabilities.streaming", "yes", fieldRule{"capabilities.streaming", "type"}},
		{"stateTransitionHistory number", fixture03, "capabilities.stateTransitionHistory", 1, fieldRule{"capabilities.stateTransitionHistory", "type"}},
		{"extension params string", fixture10, "capabilities.extensions[0].params", "x", fieldRule{"capabilities.extensions[0].params", "type"}},
		{"extension required string", fixture10, "capabilities.extensions[0].required", "true", fieldRule{"capabilities.extensions[0].required", "type"}},
		{"legacy extended card flag string", fixture03, "supportsAuthenticatedExtendedCard", "true", fieldRule{"supportsAuthenticatedExtendedCard", "type"}},
		{"interfaces empty", fixture10, "supportedInterfaces", []any{}, fieldRule{"supportedInterfaces", "required"}},
		{"interfaces object", fixture10, "supportedInterfaces", map[string]any{}, fieldRule{"supportedInterfaces", "type"}},
		{"interface url relative", fixture10, "supportedInterfaces[0].url", "/a2a/jsonrpc", fieldRule{"supportedInterfaces[0].url", "format"}},
		{"jsonrpc url not http", fixture10, "supportedInterfaces[0].url", "ftp://invoices.example.com/a2a", fieldRule{"supportedInterfaces[0].url", "format"}},
		{"rest url javascript", fixture10, "supportedInterfaces[1].url", "javascript:alert(1)", fieldRule{"supportedInterfaces[1].url", "format"}},
		{"grpc url garbage", fixture10, "supportedInterfaces[2].url", "not a target", fieldRule{"supportedInterfaces[2].url", "format"}},
		{"interface version word", fixture10, "supportedInterfaces[0].protocolVersion", "latest", fieldRule{"supportedInterfaces[0].protocolVersion", "format"}},
		{"interface version major only", fixture10, "supportedInterfaces[0].protocolVersion", "1", fieldRule{"supportedInterfaces[0].protocolVersion", "format"}},
		{"tenant number", fixture10, "supportedInterfaces[0].tenant", 3, fieldRule{"supportedInterfaces[0].tenant", "type"}},
		{"0.3 card claims 1.0", fixture03, "protocolVersion", "1.0.0", fieldRule{"protocolVersion", "enum"}},
		{"0.3 version garbage", fixture03, "protocolVersion", "v0.3", fieldRule{"protocolVersion", "format"}},
		{"main url relative", fixture03, "url", "a2a/v1", fieldRule{"url", "format"}},
		{"grpc with jsonrpc url", fixture03, "additionalInterfaces[1].transport", "JSONRPC", fieldRule{"additionalInterfaces[1].url", "format"}},
		{"additional interface not object", fixture03, "additionalInterfaces[0]", "https://georoute-agent.example.com/a2a/v1", fieldRule{"additionalInterfaces[0]", "type"}},
		{"security schemes array", fixture03, "securitySchemes", []any{}, fieldRule{"securitySchemes", "type"}},
		{"security scheme string", fixture03, "securitySchemes.google", "oidc", fieldRule{"securitySchemes.google", "type"}},
		{"security object", fixture03, "security", map[string]any{}, fieldRule{"security", "type"}},
		{"security requirements object", fixture10, "securityRequirements", map[string]any{}, fieldRule{"securityRequirements", "type"}},
		{"signature header string", fixture03, "signatures[0].header", "kid", fieldRule{"signatures[0].header", "type"}},
		{"signatures object", fixture03, "signatures", map[string]any{}, fieldRule{"signatures", "type"}},
		{"provider url javascript", fixture03, "provider.url", "javascript:alert(1)", fieldRule{"provider.url", "format"}},
		{"provider string", fixture03, "provider", "Example", fieldRule{"provider", "type"}},
		{"icon data url", fixture10, "iconUrl", "data:image/png;base64,AAAA", fieldRule{"iconUrl", "format"}},
		{"documentation url number", fixture10, "documentationUrl", 1, fieldRule{"documentationUrl", "type"}},
		{"duplicate skill id", fixture10, "skills[1].id", "extract-invoice", fieldRule{"skills[1].id", "unique"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := agentcard.Parse(edit(t, readFixture(t, tt.fixture), tt.path, tt.value))
			if tt.want == (fieldRule{}) {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			got := fieldRules(appError(t, err, agentcard.CodeInvalid))
			if want := []fieldRule{tt.want}; !slices.Equal(got, want) {
				t.Errorf("fields = %v, want %v", got, want)
			}
		})
	}
}

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

func TestParseNotJSON(t *testing.T) {
	tests := []struct {
		name, in, wantMsg string
	}{
		{"empty input", "", "not valid JSON"},
		{"truncated", "{\n  \"name\": \"x\",\n", "not valid JSON"},
		{"syntax error position", "{\n  \"name\": \"x\",\n  oops\n}", "line 3, column 3"},
		{"trailing garbage", `{} x`, "not valid JSON"},
		{"html error page", "<!doctype html><p>Not Found</p>", "line 1, column 1"},
		{"array", `[{"name":"x"}]`, "must be a JSON object, not array"},
		{"string", `"card"`, "must be a JSON object, not string"},
		{"number", `42`, "must be a JSON object, not number"},
		{"null", `null`, "must be a JSON object, not null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := agentcard.Parse([]byte(tt.in))
			e := appError(t, err, agentcard.CodeNotJSON)
			if !strings.Contains(e.Message, tt.wantMsg) {
				t.Errorf("message = %q, want it to contain %q", e.Message, tt.wantMsg)
			}
			if len(e.Fields) != 0 {
				t.Errorf("fields = %v, want none", e.Fields)
			}
		})
	}
}

func TestParseByteOrderMark(t *testing.T) {
	raw := append([]byte("\xef\xbb\xbf"), readFixture(t, fixture10)...)
	if _, err := agentcard.Parse(raw); err != nil {
		t.Fatalf("Parse: %v", err)
	}
}

func TestParseEmptyObject(t *testing.T) {
	_, err := agentcard.Parse([]byte(`{}`))
	e := appError(t, err, agentcard.CodeInvalid)
	want := []fieldRule{
		{"name", "required"},
		{"description", "required"},
		{"supportedInterfaces", "required"},
		{"version", "required"},
		{"capabilities", "required"},
		{"defaultInputModes", "required"},
		{"defaultOutputModes", "required"},
		{"skills", "required"},
	}
	if got := fieldRules(e); !slices.Equal(got, want) {
		t.Errorf("fields = %v, want %v", got, want)
	}
	if !strings.Contains(e.Message, "0.3 or 1.0") {
		t.Errorf("message = %q, want it to name both versions", e.Message)
	}
	// Neither shape: the seller must learn both ways to declare endpoints.
	msg := e.Fields[2].Message
	if !strings.Contains(msg, `"supportedInterfaces"`) || !strings.Contains(msg, `"url"`) {
		t.Errorf("supportedInterfaces message = %q, want it to name both options", msg)
	}
}

func TestParseCollectsAllProblems(t *testing.T) {
	raw := readFixture(t, fixture03)
	for path, v := range map[string]any{
		"name":                        remove,
		"url":                         "not-a-url",
		"skills[0].tags":              remove,
		"skills[1].inputModes[0]":     5,
		"capabilities.streaming":      "true",
		"additionalInterfaces[2].url": "/relative",
	} {
		raw = edit(t, raw, path, v)
	}
	_, err := agentcard.Parse(raw)
	e := appError(t, err, agentcard.CodeInvalid)
	got := fieldRules(e)
	slices.SortFunc(got, func(a, b fieldRule) int { return strings.Compare(a.Field, b.Field) })
	want := []fieldRule{
		{"additionalInterfaces[2].url", "format"},
		{"capabilities.streaming", "type"},
		{"name", "required"},
		{"skills[0].tags", "required"},
		{"skills[1].inputModes[0]", "type"},
		{"url", "format"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("fields = %v, want %v", got, want)
	}
	if !strings.Contains(e.Message, "0.3") {
		t.Errorf("message = %q, want it to name the detected version", e.Message)
	}
}

func TestHelpers(t *testing.T) {
	c03 := mustParse(t, readFixture(t, fixture03))
	c10 := mustParse(t, readFixture(t, fixture10))

	strTests := []struct {
		name string
		got  []string
		want []string
	}{
		{"0.3 SkillIDs", c03.SkillIDs(), []string{"route-optimizer-traffic", "custom-map-generator"}},
		{"1.0 SkillIDs", c10.SkillIDs(), []string{"extract-invoice", "validate-vat"}},
		{"0.3 Tags", c03.Tags(), []string{"cartography", "customization", "directions", "maps", "navigation", "routing", "traffic", "visualization"}},
		{"1.0 Tags", c10.Tags(), []string{"finance", "invoices", "ocr", "tax", "vat"}},
		{"0.3 InputModes", c03.InputModes(), []string{"application/json", "text/plain"}},
		{"0.3 OutputModes", c03.OutputModes(), []string{"application/json", "application/vnd.geo+json", "image/jpeg", "image/png", "text/html"}},
		{"1.0 InputModes", c10.InputModes(), []string{"application/pdf", "image/jpeg", "image/png", "text/plain"}},
		{"1.0 OutputModes", c10.OutputModes(), []string{"application/json", "text/csv"}},
		{"empty card Tags", (&agentcard.Card{}).Tags(), []string{}},
	}
	for _, tt := range strTests {
		if !slices.Equal(tt.got, tt.want) {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}

	ifTests := []struct {
		name     string
		card     *agentcard.Card
		bindings []string
		wantURL  string
		wantOK   bool
	}{
		{"any", c10, nil, "https://invoices.example.com/a2a/jsonrpc", true},
		{"rest", c10, []string{"HTTP+JSON"}, "https://invoices.example.com/a2a/rest", true},
		{"first of several in card order", c10, []string{"GRPC", "HTTP+JSON"}, "https://invoices.example.com/a2a/rest", true},
		{"case-insensitive", c03, []string{"grpc"}, "georoute-agent.example.com:443", true},
		{"none match", c03, []string{"https://example.com/bindings/websocket/v1"}, "", false},
		{"no interfaces", &agentcard.Card{}, nil, "", false},
	}
	for _, tt := range ifTests {
		got, ok := tt.card.PreferredInterface(tt.bindings...)
		if got.URL != tt.wantURL || ok != tt.wantOK {
			t.Errorf("PreferredInterface %s = %q, %v; want %q, %v", tt.name, got.URL, ok, tt.wantURL, tt.wantOK)
		}
	}

	extTests := []struct {
		card *agentcard.Card
		uri  string
		want bool
	}{
		{c03, "https://agentmarket.example/ext/usage/v1", true},
		{c10, "https://agentmarket.example/ext/usage/v1", true},
		{c10, "https://developers.google.com/identity/protocols/oauth2", false},
		{c10, "https://agentmarket.example/ext/usage/v2", false},
		{c10, "", false},
	}
	for _, tt := range extTests {
		if got := tt.card.HasExtension(tt.uri); got != tt.want {
			t.Errorf("HasExtension(%q) on %s = %v, want %v", tt.uri, tt.card.Name, got, tt.want)
		}
	}
}

func TestNormalizeBinding(t *testing.T) {
	tests := []struct{ in, want string }{
		{"jsonrpc", "JSONRPC"},
		{" JsonRpc ", "JSONRPC"},
		{"grpc", "GRPC"},
		{"http+json", "HTTP+JSON"},
		{"https://example.com/bindings/websocket/v1", "https://example.com/bindings/websocket/v1"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := agentcard.NormalizeBinding(tt.in); got != tt.want {
			t.Errorf("NormalizeBinding(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(readFixture(f, fixture03))
	f.Add(readFixture(f, fixture10))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"supportedInterfaces":[{"url":"h:1","protocolBinding":"grpc","protocolVersion":"1.0.0"}]}`))
	f.Add([]byte(`{"url":"x","protocolVersion":"0.3.0","additionalInterfaces":[null,{"url":1}]}`))
	f.Add([]byte(`[1,"x",null]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		card, err := agentcard.Parse(raw)
		if err != nil {
			var e *agentmarket.Error
			if !errors.As(err, &e) || e.Kind != agentmarket.Invalid {
				t.Fatalf("error = %#v, want an Invalid *agentmarket.Error", err)
			}
			switch e.Code {
			case agentcard.CodeNotJSON:
			case agentcard.CodeInvalid:
				if len(e.Fields) == 0 {
					t.Fatal("card_invalid without field errors")
				}
			default:
				t.Fatalf("unexpected code %q", e.Code)
			}
			return
		}
		if len(card.Interfaces) == 0 || len(card.ProtocolVersions) == 0 {
			t.Fatalf("valid card without interfaces: %+v", card)
		}
		_ = card.SkillIDs()
		_ = card.Tags()
		_ = card.InputModes()
		_ = card.OutputModes()
		_, _ = card.PreferredInterface("JSONRPC")
		_ = card.HasExtension("x")
	})
}
