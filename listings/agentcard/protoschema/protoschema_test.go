package protoschema_test

import (
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket/listings/agentcard/protoschema"
)

const card = `{
  "name": "Translator", "description": "Translates.", "version": "1.2.0",
  "supportedInterfaces": [{"url": "https://a.example/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
  "capabilities": {"streaming": true, "extensions": [{"uri": "https://x.example/ext", "params": {"a": [1, null]}}]},
  "securitySchemes": {"key": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
  "securityRequirements": [{"schemes": {"key": {"list": []}, "oauth": {}}}],
  "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
  "skills": [{"id": "t", "name": "T", "description": "T.", "tags": ["x"]}]
}`

func TestCheck(t *testing.T) {
	s, err := protoschema.A2A()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, typ, doc string
		want           []string // substrings of the violations; none: valid
	}{
		{"a valid card", "AgentCard", card, nil},
		{"proto names", "AgentCard", strings.NewReplacer(`"securityRequirements"`, `"security_requirements"`, `"defaultInputModes"`, `"default_input_modes"`).Replace(card), nil},
		{"scopes as a bare array", "AgentCard", strings.Replace(card, `{"list": []}`, `[]`, 1),
			[]string{`$.securityRequirements[0].schemes.key: want a StringList object, got an array`}},
		{"scopes as null", "AgentCard", strings.Replace(card, `{"list": []}`, `null`, 1),
			[]string{`$.securityRequirements[0].schemes.key: want a StringList object, got null`}},
		{"a 0.3 member", "AgentCard", strings.Replace(card, `"name"`, `"url": "https://a.example", "name"`, 1),
			[]string{`$: AgentCard has no field "url"`}},
		{"a required field missing", "AgentCard", strings.Replace(card, `"version": "1.2.0",`, ``, 1),
			[]string{`$: AgentCard lacks the required field "version"`}},
		{"a field under both names", "AgentCard", strings.Replace(card, `"name"`, `"default_input_modes": [], "name"`, 1),
			[]string{`field default_input_modes is given twice`}},
		{"two members of a oneof", "SecurityScheme", `{"httpAuthSecurityScheme": {"scheme": "Bearer"}, "mtlsSecurityScheme": {}}`,
			[]string{`oneof scheme has two members`}},
		{"a wrong scalar", "AgentSkill", `{"id": "t", "name": "T", "description": "T.", "tags": "x"}`,
			[]string{`$.tags: want an array, got a string`}},
		{"an enum by name", "TaskStatus", `{"state": "TASK_STATE_COMPLETED", "timestamp": "2026-05-01T10:00:00.5Z"}`, nil},
		{"an enum by number", "TaskStatus", `{"state": 3}`, nil},
		{"a 0.3 enum value", "TaskStatus", `{"state": "completed"}`, []string{`"completed" is not a value of TaskState`}},
		{"a bad timestamp", "TaskStatus", `{"state": 3, "timestamp": "yesterday"}`, []string{`$.timestamp: want an RFC 3339 timestamp`}},
		{"int32 as a string", "ListTasksRequest", `{"pageSize": "50"}`, nil},
		{"int32 out of range", "ListTasksRequest", `{"pageSize": 3000000000}`, []string{`$.pageSize: want an integer`}},
		{"bytes", "Part", `{"raw": "aGVsbG8=", "mediaType": "text/plain"}`, nil},
		{"bytes that are not base64", "Part", `{"raw": "hello!"}`, []string{`$.raw: want base64 bytes`}},
		{"a part with two contents", "Part", `{"text": "a", "url": "https://a.example"}`, []string{`oneof content has two members`}},
	}
	for _, tc := range tests {
		err := s.Check(tc.typ, []byte(tc.doc))
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v, want valid", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: valid, want %q", tc.name, tc.want)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want %q", tc.name, err, w)
			}
		}
	}
	if err := s.Check("NoSuchMessage", []byte(`{}`)); err == nil {
		t.Error("Check of an unknown message succeeded")
	}
}

func TestParseRefusesWhatItDoesNotKnow(t *testing.T) {
	for _, src := range []string{
		`message A { message B { string x = 1; } }`,
		`message A { Unknown u = 1; }`,
		`message A { string x = 1 `,
		`extend Foo { string x = 1; }`,
	} {
		if _, err := protoschema.Parse(src); err == nil {
			t.Errorf("Parse(%q) succeeded", src)
		}
	}
}
