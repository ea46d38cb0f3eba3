package web

import (
	"fmt"
	"html/template"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket"
)

// inputField is one labelled input, rendered by the "input" template with
// its hint and error tied to it for screen readers.
type inputField struct {
	Name, Label, Type, Value, Err, Hint  string
	Autocomplete, InputMode, Placeholder string
	Required, Plain                      bool
}

// input builds an inputField from a form; opts are "hint=…", "ac=…",
// "mode=…", "ph=…", "required" and "plain" (no "optional" marker, for
// forms where every input is optional).
func input(f *form, name, label, typ string, opts ...string) inputField {
	in := inputField{Name: name, Label: label, Type: typ}
	if f != nil {
		in.Value, in.Err = f.V(name), f.Err(name)
	}
	for _, o := range opts {
		k, v, _ := strings.Cut(o, "=")
		switch k {
		case "hint":
			in.Hint = v
		case "ac":
			in.Autocomplete = v
		case "mode":
			in.InputMode = v
		case "ph":
			in.Placeholder = v
		case "required":
			in.Required = true
		case "plain":
			in.Plain = true
		}
	}
	if typ == "password" {
		in.Value = "" // never sent back
	}
	return in
}

func describedBy(in inputField) string {
	var ids []string
	if in.Hint != "" {
		ids = append(ids, in.Name+"-hint")
	}
	if in.Err != "" {
		ids = append(ids, in.Name+"-error")
	}
	return strings.Join(ids, " ")
}

var funcs = template.FuncMap{
	"micros":      formatMicros,
	"money":       moneyHTML,
	"minor":       formatMinor,
	"count":       formatCount,
	"dur":         formatDuration,
	"input":       input,
	"int64":       func(n int) int64 { return int64(n) },
	"describedBy": describedBy,
	"hasPrefix":   strings.HasPrefix,
	"lower":       strings.ToLower,
	// plain is text without the characters that reorder what follows it,
	// where <bdi> cannot go (an <option>, a <title>).
	"plain": agentmarket.StripBidiControls,
	"words": statusText,
	"add":   func(a, b int) int { return a + b },
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	},
	"join":    strings.Join,
	"capital": capitalize,
	"short": func(h string) string {
		if len(h) > 12 {
			return h[:12]
		}
		return h
	},
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	},
	"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"day": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02")
	},
}

// parsePages parses each page template together with the layout.
func parsePages() map[string]*template.Template {
	base := template.Must(template.New("base").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts.html"))
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(path.Base(n), ".html")
		if name == "layout" || name == "parts" {
			continue
		}
		pages[name] = template.Must(template.Must(base.Clone()).ParseFS(templateFS, n))
	}
	return pages
}

// capitalize upper-cases the first letter of an ASCII sentence.
func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// statusText is a status as a page says it: words, not the API's
// identifier ("pending_review" is "waiting for review", "past_due" "past
// due").
func statusText(v any) string {
	s := fmt.Sprint(v)
	if s == "pending_review" {
		return "waiting for review"
	}
	return strings.ReplaceAll(s, "_", " ")
}
