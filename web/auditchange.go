package web

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// The audit log's Change column says what changed in words; the raw
// before and after stay one click away (the chain hashes those bytes).

var (
	// enumValue is a value of a closed set as the API spells it.
	enumValue = regexp.MustCompile(`^[a-z]+(?:_[a-z]+)+$`)
	// idValue is an id (agentmarket.NewID's form).
	idValue = regexp.MustCompile(`^[a-z]{1,4}_[a-z0-9]{6,}$`)
)

// fieldChange is one top-level field of an audited object that changed.
type fieldChange struct {
	Field, From, To string
	// FromID, ToID: the value is an id, shown as code.
	FromID, ToID bool
}

// auditChanges lists the fields of the object that differ between before
// and after (JSON objects; "null" for none), in the after's order, with
// their values in words. created/removed: the object came or went.
func auditChanges(before, after json.RawMessage) (changes []fieldChange, created, removed bool) {
	b, bok := jsonObject(before)
	a, aok := jsonObject(after)
	switch {
	case !bok && aok:
		return nil, true, false
	case bok && !aok:
		return nil, false, true
	case !bok || !aok:
		return nil, false, false
	}
	keys := a.keys // then the fields the after no longer has
	for _, k := range b.keys {
		if _, ok := a.vals[k]; !ok {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		if bytes.Equal(b.vals[k], a.vals[k]) || strings.EqualFold(k, "updatedat") || strings.EqualFold(k, "updated_at") {
			continue
		}
		c := fieldChange{Field: fieldWords(k), From: valueWords(k, b.vals[k]), To: valueWords(k, a.vals[k])}
		c.FromID, c.ToID = idValue.MatchString(c.From), idValue.MatchString(c.To)
		changes = append(changes, c)
	}
	return changes, false, false
}

type object struct {
	keys []string
	vals map[string]json.RawMessage
}

// jsonObject reads raw as a JSON object, its keys in order.
func jsonObject(raw json.RawMessage) (object, bool) {
	o := object{vals: map[string]json.RawMessage{}}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return o, false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return o, false
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return o, false
		}
		if _, dup := o.vals[k]; !dup {
			o.keys = append(o.keys, k)
		}
		o.vals[k] = v
	}
	return o, true
}

// fieldWords is a field name in words: "MonthlyBudgetMicros" and
// "monthly_budget_micros" are "monthly budget".
func fieldWords(k string) string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(k)
	for i, r := range rs {
		switch {
		case r == '_' || r == '-' || r == '.':
			flush()
			continue
		case unicode.IsUpper(r) && len(cur) > 0 && (unicode.IsLower(cur[len(cur)-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])):
			flush()
		}
		cur = append(cur, r)
	}
	flush()
	if n := len(words); n > 1 && words[n-1] == "micros" {
		words = words[:n-1]
	}
	if n := len(words); n > 1 && words[n-1] == "id" {
		words[n-1] = "ID"
	}
	return strings.Join(words, " ")
}

// valueWords is a JSON value as the Change column shows it: strings
// bare, amounts in micros as units, nothing as "none", the rest as JSON
// (shortened).
func valueWords(k string, v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return "none"
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		if enumValue.MatchString(s) {
			return statusText(s) // "past_due" is "past due"
		}
		return truncate(s, 80)
	}
	if lk := strings.ToLower(k); strings.HasSuffix(lk, "micros") {
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return formatMicros(n, "")
		}
	}
	return truncate(string(v), 80)
}
