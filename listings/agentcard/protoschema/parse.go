package protoschema

import (
	"fmt"
	"strings"
	"unicode"
)

// Parse reads the messages and enums of a proto3 file. It knows the
// subset of the language a2a.proto uses (top-level messages and enums,
// oneof, map, optional, repeated, field options; services are skipped) and
// refuses anything else rather than guess.
func Parse(src string) (*Schema, error) {
	toks, err := tokenize(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, s: &Schema{messages: map[string]*message{}, enums: map[string]map[string]bool{}, enumOrder: map[string][]string{}}}
	if err := p.file(); err != nil {
		return nil, err
	}
	for _, m := range p.s.messages {
		for _, f := range m.fields {
			if err := p.s.known(f.typ); err != nil {
				return nil, fmt.Errorf("message %s field %s: %w", m.name, f.name, err)
			}
		}
	}
	return p.s, nil
}

var scalars = map[string]bool{"string": true, "bool": true, "bytes": true, "int32": true, "sint32": true, "sfixed32": true,
	"uint32": true, "fixed32": true, "int64": true, "sint64": true, "sfixed64": true, "uint64": true, "fixed64": true,
	"float": true, "double": true, "google.protobuf.Value": true, "google.protobuf.Struct": true,
	"google.protobuf.Empty": true, "google.protobuf.Timestamp": true}

func (s *Schema) known(typ string) error {
	if _, ok := s.messages[typ]; ok || scalars[typ] || s.enums[typ] != nil {
		return nil
	}
	return fmt.Errorf("unknown type %s", typ)
}

type token struct {
	text string
	line int
}

func tokenize(src string) ([]token, error) {
	var out []token
	line := 1
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case strings.HasPrefix(src[i:], "//"):
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case strings.HasPrefix(src[i:], "/*"):
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("line %d: unterminated comment", line)
			}
			line += strings.Count(src[i:i+2+end], "\n")
			i += end + 4
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(src) && src[j] != c {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(src) {
				return nil, fmt.Errorf("line %d: unterminated string", line)
			}
			out = append(out, token{src[i : j+1], line})
			i = j + 1
		case isWord(rune(c)):
			j := i
			for j < len(src) && (isWord(rune(src[j])) || src[j] == '.') {
				j++
			}
			out = append(out, token{src[i:j], line})
			i = j
		case strings.ContainsRune("{}[]<>()=;,:-", rune(c)):
			out = append(out, token{string(c), line})
			i++
		default:
			return nil, fmt.Errorf("line %d: unexpected %q", line, c)
		}
	}
	return out, nil
}

func isWord(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

type parser struct {
	toks []token
	pos  int
	s    *Schema
}

func (p *parser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos].text
	}
	return ""
}

func (p *parser) next() string {
	t := p.peek()
	p.pos++
	return t
}

func (p *parser) errorf(format string, args ...any) error {
	line := 0
	if p.pos < len(p.toks) {
		line = p.toks[p.pos].line
	} else if len(p.toks) > 0 {
		line = p.toks[len(p.toks)-1].line
	}
	return fmt.Errorf("proto line %d: %s", line, fmt.Sprintf(format, args...))
}

func (p *parser) expect(want string) error {
	if got := p.next(); got != want {
		p.pos--
		return p.errorf("want %q, got %q", want, got)
	}
	return nil
}

// skipStatement skips to the end of a statement: its ';', or a balanced
// block.
func (p *parser) skipStatement() error {
	depth := 0
	for p.pos < len(p.toks) {
		switch p.next() {
		case "{":
			depth++
		case "}":
			depth--
			if depth == 0 {
				if p.peek() == ";" {
					p.pos++
				}
				return nil
			}
		case ";":
			if depth == 0 {
				return nil
			}
		}
	}
	return p.errorf("unexpected end of file")
}

func (p *parser) file() error {
	for p.pos < len(p.toks) {
		switch p.peek() {
		case "syntax", "package", "import", "option", "service":
			if err := p.skipStatement(); err != nil {
				return err
			}
		case "message":
			if err := p.message(); err != nil {
				return err
			}
		case "enum":
			if err := p.enum(); err != nil {
				return err
			}
		default:
			return p.errorf("unexpected %q at the top level", p.peek())
		}
	}
	return nil
}

func (p *parser) message() error {
	p.next()
	m := &message{name: p.next(), byKey: map[string]*field{}}
	if err := p.expect("{"); err != nil {
		return err
	}
	oneof := ""
	for {
		switch t := p.peek(); t {
		case "}":
			p.next()
			if oneof != "" {
				oneof = ""
				continue
			}
			p.s.messages[m.name] = m
			return nil
		case "oneof":
			if oneof != "" {
				return p.errorf("nested oneof")
			}
			p.next()
			oneof = p.next()
			if err := p.expect("{"); err != nil {
				return err
			}
		case "option", "reserved":
			if err := p.skipStatement(); err != nil {
				return err
			}
		case "message", "enum", "extend", "extensions", "group":
			return p.errorf("%s inside message %s is not supported", t, m.name)
		case "":
			return p.errorf("message %s does not end", m.name)
		default:
			f, err := p.field(oneof)
			if err != nil {
				return fmt.Errorf("message %s: %w", m.name, err)
			}
			m.fields = append(m.fields, f)
			for _, k := range []string{f.jsonName, f.name} {
				if other, dup := m.byKey[k]; dup && other != f {
					return p.errorf("message %s: two fields named %q", m.name, k)
				}
				m.byKey[k] = f
			}
		}
	}
}

func (p *parser) field(oneof string) (*field, error) {
	f := &field{oneof: oneof}
	switch p.peek() {
	case "repeated":
		p.next()
		f.repeated = true
	case "optional":
		p.next()
		f.optional = true
	case "map":
		p.next()
		if err := p.expect("<"); err != nil {
			return nil, err
		}
		f.key = p.next()
		if err := p.expect(","); err != nil {
			return nil, err
		}
		f.typ = p.next()
		if err := p.expect(">"); err != nil {
			return nil, err
		}
	}
	if f.typ == "" {
		f.typ = p.next()
	}
	f.name = p.next()
	f.jsonName = jsonName(f.name)
	if err := p.expect("="); err != nil {
		return nil, err
	}
	p.next() // the field number
	if p.peek() == "[" {
		if err := p.fieldOptions(f); err != nil {
			return nil, err
		}
	}
	return f, p.expect(";")
}

// fieldOptions reads [opt = value, ...]: json_name and the REQUIRED field
// behavior matter here.
func (p *parser) fieldOptions(f *field) error {
	p.next()
	for {
		var name []string
		for p.peek() != "=" {
			if p.peek() == "" {
				return p.errorf("field %s: options do not end", f.name)
			}
			name = append(name, p.next())
		}
		p.next()
		value := p.next()
		switch strings.Join(name, "") {
		case "(google.api.field_behavior)":
			if value == "REQUIRED" {
				f.required = true
			}
		case "json_name":
			f.jsonName = strings.Trim(value, `"'`)
		}
		switch p.next() {
		case "]":
			return nil
		case ",":
		default:
			p.pos--
			return p.errorf("field %s: want , or ] in its options", f.name)
		}
	}
}

func (p *parser) enum() error {
	p.next()
	name := p.next()
	values := map[string]bool{}
	if err := p.expect("{"); err != nil {
		return err
	}
	for p.peek() != "}" {
		switch p.peek() {
		case "option", "reserved":
			if err := p.skipStatement(); err != nil {
				return err
			}
			continue
		case "":
			return p.errorf("enum %s does not end", name)
		}
		v := p.next()
		values[v] = true
		p.s.enumOrder[name] = append(p.s.enumOrder[name], v)
		if err := p.skipStatement(); err != nil {
			return err
		}
	}
	p.next()
	p.s.enums[name] = values
	return nil
}
