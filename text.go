package agentmarket

import (
	"unicode"
	"unicode/utf8"
)

// Text is the one rule for what people type into a name field (an org's
// name, an e-mail, an API key's name, a URL or header they paste): valid
// UTF-8, no control characters (NUL, tabs, line breaks, DEL, the C1 range),
// and at most max characters, so at most 4×max bytes. Everything that
// stores such a field and shows it back checks it here, so a name cannot
// carry a terminal escape, break a CSV row, or fill every page that lists
// it, nor reorder what a page shows after it (a name ending in U+202E
// reverses the price beside it). A blank value passes: whether the field is required is the caller's
// rule. It reports whether v passed.
func (f *Fields) Text(field, v string, max int) bool {
	switch {
	case !utf8.ValidString(v):
		f.Add(field, "utf8", "%s must be UTF-8 text", field)
	case hasControl(v):
		f.Add(field, "control_character", "%s must not contain control characters (line breaks, tabs, NUL)", field)
	case HasBidiControl(v):
		f.Add(field, "bidi_control", "%s must not contain characters that reorder text (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C)", field)
	case utf8.RuneCountInString(v) > max:
		f.Add(field, "max_length", "%s must be at most %d characters", field, max)
	default:
		return true
	}
	return false
}

func hasControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) {
			return true
		}
	}
	return false
}

// HasBidiControl reports whether s holds a character that changes the
// direction of the text around it: the embeddings and overrides
// (U+202A–U+202E), the isolates (U+2066–U+2069), the marks (U+200E, U+200F,
// U+061C). Shown beside other text, they reorder it (a price read
// backwards).
func HasBidiControl(s string) bool {
	for _, r := range s {
		if isBidiControl(r) {
			return true
		}
	}
	return false
}

func isBidiControl(r rune) bool {
	return (r >= '\u202A' && r <= '\u202E') || (r >= '\u2066' && r <= '\u2069') || r == '\u200E' || r == '\u200F' || r == '\u061C'
}

// StripBidiControls is s without the characters HasBidiControl finds: for
// text stored before the rule, and text that comes from elsewhere (an
// agent's card), where it is shown or exported.
func StripBidiControls(s string) string {
	if !HasBidiControl(s) {
		return s
	}
	b := make([]rune, 0, len(s))
	for _, r := range s {
		if !isBidiControl(r) {
			b = append(b, r)
		}
	}
	return string(b)
}
