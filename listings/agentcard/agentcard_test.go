package agentcard_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
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
