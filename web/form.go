package web

import (
	"errors"
	"strings"

	"github.com/agentmarket/agentmarket"
)

// fieldMsg is one error shown next to a form field (Field is the input's
// name and id) or, with no Field, at the top of the form.
type fieldMsg struct {
	Field   string
	Message string
}

// form is a form being shown again: what was typed and what was wrong.
type form struct {
	Values  map[string]string
	Errors  []fieldMsg
	Message string // the error's summary, e.g. "the listing is not valid"
	// Labels are the page's words for the API's field names that the
	// service's messages use ("target_id" → "the id"): absorb writes the
	// messages in them.
	Labels map[string]string
}

// Err returns the message for a field, "" when it has none.
func (f *form) Err(field string) string {
	var msgs []string
	for _, e := range f.Errors {
		if e.Field == field {
			msgs = append(msgs, e.Message)
		}
	}
	return strings.Join(msgs, " ")
}

// V returns a submitted value.
func (f *form) V(field string) string { return f.Values[field] }

// add records a problem with a field found before calling a service.
func (f *form) add(field, msg string) {
	f.Errors = append(f.Errors, fieldMsg{Field: field, Message: msg})
}

// absorb takes an Invalid or Conflict error's field errors into the form,
// each on the input that mapField names (nil keeps the API field name; ""
// puts it at the top), and reports whether err was such an error. Any
// other error is for the caller to return.
func (f *form) absorb(err error, mapField func(string) string) bool {
	var ae *agentmarket.Error
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.Kind {
	case agentmarket.Invalid, agentmarket.Conflict, agentmarket.TooLarge:
	default:
		return false
	}
	f.Message = inWords(ae.Message, f.Labels)
	for _, fe := range ae.Fields {
		name := fe.Field
		if mapField != nil {
			name = mapField(fe.Field)
		}
		f.Errors = append(f.Errors, fieldMsg{Field: name, Message: inWords(fe.Message, f.Labels)})
	}
	if len(ae.Fields) == 0 {
		f.Errors = append(f.Errors, fieldMsg{Message: f.Message})
	}
	return true
}

// inWords is a service's message in a page's words: each API field name
// of labels it mentions (a whole word) becomes the page's word for it,
// and the first letter a capital.
func inWords(msg string, labels map[string]string) string {
	if len(labels) == 0 {
		return msg
	}
	var b strings.Builder
	for i := 0; i < len(msg); {
		j := i
		for j < len(msg) && (msg[j] == '_' || msg[j] >= 'a' && msg[j] <= 'z' || msg[j] >= '0' && msg[j] <= '9') {
			j++
		}
		if j == i {
			b.WriteByte(msg[i])
			i++
			continue
		}
		w := msg[i:j]
		if l, ok := labels[w]; ok {
			w = l
		}
		b.WriteString(w)
		i = j
	}
	return capitalize(b.String())
}

// Form returns f, for templates that pass the form to the input helper.
func (f *form) Form() *form { return f }

// publicMessage is what a user may read of an error: its message, never
// the internal cause.
func publicMessage(err error) string {
	var ae *agentmarket.Error
	if errors.As(err, &ae) && ae.Kind != agentmarket.Internal {
		return ae.Message
	}
	return "internal error"
}
