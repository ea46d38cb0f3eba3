package agentmarket

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
)

// Tags are cost allocation labels (team=payments, project=kyc) on an API
// key or a contract, copied onto every usage row at call time. They are
// held in one canonical form, a JSON object with its keys sorted
// ({"project":"kyc","team":"payments"}; "" for none), so that they compare
// as strings, travel in any struct, and every store can read one tag with
// its own JSON function.
type Tags string

// Bounds and form of tags.
const (
	MaxTags        = 20
	MaxTagValueLen = 128
)

// tagKey is what a tag key may be: lower-case, so that team and Team are
// one key, and safe in a JSON path and a URL without escaping.
var tagKey = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)

// ValidTagKey reports whether k may be a tag key.
func ValidTagKey(k string) bool { return tagKey.MatchString(k) }

// ParseTags checks tags given as a map (field names the input field, e.g.
// "tags") and returns their canonical form; every broken rule is added to
// fe. No tags (nil or empty) is "".
func ParseTags(fe *Fields, field string, m map[string]string) Tags {
	if len(m) == 0 {
		return ""
	}
	if len(m) > MaxTags {
		fe.Add(field, "max_items", "at most %d tags", MaxTags)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name := fmt.Sprintf("%s.%s", field, k)
		if !ValidTagKey(k) {
			fe.Add(field, "tag_key", "tag key %q must be 1 to 64 lower-case letters, digits, '_', '.' or '-', starting with a letter", k)
			continue
		}
		if m[k] == "" {
			fe.Add(name, "required", "%s needs a value", name)
			continue
		}
		fe.Text(name, m[k], MaxTagValueLen)
	}
	b, _ := json.Marshal(m) // map keys are sorted: the canonical form
	return Tags(b)
}

// Map returns the tags as a map (nil for none).
func (t Tags) Map() map[string]string {
	if t == "" {
		return nil
	}
	var m map[string]string
	if json.Unmarshal([]byte(t), &m) != nil {
		return nil
	}
	return m
}

// Get returns one tag's value and whether it is set.
func (t Tags) Get(key string) (string, bool) {
	v, ok := t.Map()[key]
	return v, ok
}

// Merge returns t with over's tags added, over's winning on a key both
// have.
func (t Tags) Merge(over Tags) Tags {
	switch {
	case over == "":
		return t
	case t == "":
		return over
	}
	m := t.Map()
	for k, v := range over.Map() {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return Tags(b)
}
