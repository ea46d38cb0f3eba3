package agentcard_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket/listings/agentcard"
)

// Cards Parse refuses, each with the field-level problems it names.

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
