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
// it. A blank value passes: whether the field is required is the caller's
// rule. It reports whether v passed.
func (f *Fields) Text(field, v string, max int) bool {
	switch {
	case !utf8.ValidString(v):
		f.Add(field, "utf8", "%s must be UTF-8 text", field)
	case hasControl(v):
		f.Add(field, "control_character", "%s must not contain control characters (line breaks, tabs, NUL)", field)
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
