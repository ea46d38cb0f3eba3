package agentmarket_test

import (
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket"
)

func TestParseTags(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   map[string]string
		want agentmarket.Tags
		errs string
	}{
		{"none", nil, "", ""},
		{"canonical: sorted keys", map[string]string{"team": "payments", "project": "kyc"}, `{"project":"kyc","team":"payments"}`, ""},
		{"values with any text", map[string]string{"cost-center": "EU / 42 \"north\""}, `{"cost-center":"EU / 42 \"north\""}`, ""},
		{"bad keys and values", map[string]string{"Team": "x", "9x": "y", "ok": "", "bad": "a\nb"},
			"", "tags:tag_key tags:tag_key tags.bad:control_character tags.ok:required"},
		{"too long a value", map[string]string{"team": strings.Repeat("é", 129)}, "", "tags.team:max_length"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fe agentmarket.Fields
			got := agentmarket.ParseTags(&fe, "tags", tc.in)
			var rules []string
			for _, f := range fe {
				rules = append(rules, f.Field+":"+f.Rule)
			}
			if strings.Join(rules, " ") != tc.errs {
				t.Errorf("errors %q, want %q", strings.Join(rules, " "), tc.errs)
			}
			if tc.errs == "" && got != tc.want {
				t.Errorf("tags %s, want %s", got, tc.want)
			}
		})
	}
	key := agentmarket.Tags(`{"project":"kyc","team":"payments"}`)
	contract := agentmarket.Tags(`{"env":"prod","team":"risk"}`)
	if got := contract.Merge(key); got != `{"env":"prod","project":"kyc","team":"payments"}` {
		t.Errorf("Merge = %s: the key's tags win", got)
	}
	if v, ok := key.Get("team"); !ok || v != "payments" {
		t.Errorf("Get(team) = %q, %v", v, ok)
	}
	if _, ok := key.Get("env"); ok {
		t.Errorf("Get(env) found a tag that is not there")
	}
	if agentmarket.Tags("").Merge("") != "" || key.Merge("") != key || agentmarket.Tags("").Merge(key) != key {
		t.Errorf("Merge with nothing changed something")
	}
}
