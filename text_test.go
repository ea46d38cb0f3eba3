package agentmarket_test

import (
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket"
)

func TestText(t *testing.T) {
	cases := []struct {
		name, v string
		want    string // the rule broken, "" for none
	}{
		{"plain", "Acme Agents", ""},
		{"blank (required is the caller's rule)", "", ""},
		{"accents and CJK count as characters", strings.Repeat("é", 10) + "代理", ""},
		{"at the limit in characters, over it in bytes", strings.Repeat("é", 12), ""},
		{"one character over", strings.Repeat("x", 13), "max_length"},
		{"NUL", "Acme\x00", "control_character"},
		{"line break", "Acme\nInc", "control_character"},
		{"tab", "Acme\tInc", "control_character"},
		{"DEL", "Acme\x7f", "control_character"},
		{"C1 control", "Acme\u0085", "control_character"},
		{"escape sequence", "\x1b[31mred", "control_character"},
		{"invalid UTF-8", "Acme\xff", "utf8"},
		{"truncated UTF-8", "caf\xc3", "utf8"},
		{"a megabyte", strings.Repeat("a", 1<<20), "max_length"},
		{"right-to-left override", "Acme\u202e", "bidi_control"},
		{"left-to-right embedding", "\u202aAcme", "bidi_control"},
		{"first strong isolate", "Acme\u2068x", "bidi_control"},
		{"right-to-left mark", "Acme\u200f", "bidi_control"},
		{"Arabic letter mark", "\u061cAcme", "bidi_control"},
		{"right-to-left text itself is fine", "شركة الوكلاء", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var fe agentmarket.Fields
			ok := fe.Text("name", tc.v, 12)
			got := ""
			if len(fe) == 1 {
				got = fe[0].Rule
				if fe[0].Field != "name" {
					t.Errorf("field = %q, want name", fe[0].Field)
				}
			} else if len(fe) > 1 {
				t.Fatalf("%d errors for one field: %+v", len(fe), fe)
			}
			if got != tc.want || ok != (tc.want == "") {
				t.Errorf("Text = %v, rule %q; want rule %q", ok, got, tc.want)
			}
		})
	}
}

func TestStripBidiControls(t *testing.T) {
	if got := agentmarket.StripBidiControls("$0.00\u202e6036\u2066x\u2069"); got != "$0.006036x" {
		t.Errorf("StripBidiControls = %q", got)
	}
	if got := agentmarket.StripBidiControls("plain"); got != "plain" {
		t.Errorf("StripBidiControls(plain) = %q", got)
	}
}
