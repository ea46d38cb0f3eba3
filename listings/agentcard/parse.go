package agentcard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentmarket/agentmarket"
)

// Stable error codes of Parse.
const (
	CodeNotJSON = "card_not_json"
	CodeInvalid = "card_invalid"
)

// Parse parses and validates an agent card of protocol 0.3 or 1.0.
//
// A card with "supportedInterfaces" is read as 1.0, even when it also
// carries the 0.3 endpoint fields: SDKs serve such hybrid cards to reach
// old clients, and the 1.0 list is the complete one. A card with "url",
// "protocolVersion", "preferredTransport" or "additionalInterfaces" is read
// as 0.3. Unknown fields are ignored, as both versions require.
//
// Every error is an *agentmarket.Error of kind Invalid: CodeNotJSON when the
// input is not a JSON object, else CodeInvalid listing every broken rule at
// once, so a seller can fix the card in one round.
func Parse(raw []byte) (*Card, error) {
	top, err := decodeObject(raw)
	if err != nil {
		return nil, err
	}
	sh := shapeOf(top)
	var p parser
	card := p.card(top, sh)
	if err := p.errs.Err(CodeInvalid, invalidMessage[sh]); err != nil {
		return nil, err
	}
	return card, nil
}

type shape int

const (
	shapeUnknown shape = iota
	shape03
	shape10
)

var invalidMessage = map[shape]string{
	shapeUnknown: "agent card is not a valid A2A 0.3 or 1.0 card",
	shape03:      "agent card is not a valid A2A 0.3 card",
	shape10:      "agent card is not a valid A2A 1.0 card",
}

func shapeOf(top object) shape {
	if _, ok := top["supportedInterfaces"]; ok {
		return shape10
	}
	for _, k := range []string{"url", "protocolVersion", "preferredTransport", "additionalInterfaces"} {
		if _, ok := top[k]; ok {
			return shape03
		}
	}
	return shapeUnknown
}

// object is a JSON object whose members are decoded only once their type has
// been checked, so that one wrong member yields a field error instead of
// failing the whole decode.
type object map[string]json.RawMessage

var utf8BOM = []byte("\xef\xbb\xbf")

func decodeObject(raw []byte) (object, error) {
	// Some servers prefix the card with a byte order mark; it carries no
	// meaning, and rejecting it would only turn sellers away.
	raw = bytes.TrimPrefix(raw, utf8BOM)
	var top object
	err := json.Unmarshal(raw, &top)
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		line, col := position(raw, syntax.Offset)
		return nil, &agentmarket.Error{
			Kind:    agentmarket.Invalid,
			Code:    CodeNotJSON,
			Message: fmt.Sprintf("agent card is not valid JSON: %s (line %d, column %d)", syntax.Error(), line, col),
			Err:     err,
		}
	case errors.As(err, &typ):
		return nil, &agentmarket.Error{
			Kind:    agentmarket.Invalid,
			Code:    CodeNotJSON,
			Message: fmt.Sprintf("agent card must be a JSON object, not %s", typ.Value),
			Err:     err,
		}
	case err != nil:
		return nil, &agentmarket.Error{
			Kind:    agentmarket.Invalid,
			Code:    CodeNotJSON,
			Message: "agent card is not valid JSON: " + err.Error(),
			Err:     err,
		}
	case top == nil:
		return nil, agentmarket.Errorf(agentmarket.Invalid, CodeNotJSON, "agent card must be a JSON object, not null")
	}
	return top, nil
}

// position turns the decoder's offset into the 1-based line and column an
// editor shows, because sellers fix cards in editors, not hex dumps.
func position(raw []byte, offset int64) (line, col int) {
	// The offset counts the bytes read, the offending one included.
	i := int(min(max(offset-1, 0), int64(len(raw))))
	before := raw[:i]
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	return bytes.Count(before, []byte("\n")) + 1, utf8.RuneCount(before[lineStart:]) + 1
}

type parser struct {
	errs agentmarket.Fields
}

func (p *parser) card(top object, sh shape) *Card {
	c := &Card{
		Name:        p.str(top, "", "name", true),
		Description: p.str(top, "", "description", true),
	}
	switch sh {
	case shape03:
		c.Interfaces = p.interfaces03(top)
	case shape10:
		c.Interfaces = p.interfaces10(top)
	default:
		p.errs.Add("supportedInterfaces", "required",
			`"supportedInterfaces" is required (A2A 1.0); an A2A 0.3 card declares "url" and "protocolVersion" instead`)
	}
	c.ProtocolVersions = protocolVersions(c.Interfaces)
	c.Version = p.str(top, "", "version", true)
	c.Capabilities = p.capabilities(top, sh == shape03)
	c.DefaultInputModes = p.strs(top, "", "defaultInputModes", true)
	c.DefaultOutputModes = p.strs(top, "", "defaultOutputModes", true)
	c.Skills = p.skills(top)
	c.SecuritySchemes = p.securitySchemes(top)
	c.Security = p.security(top, sh)
	c.Signatures = p.signatures(top)
	c.Provider = p.provider(top)
	c.DocumentationURL = p.webURL(top, "", "documentationUrl", false)
	c.IconURL = p.webURL(top, "", "iconUrl", false)
	return c
}

func (p *parser) interfaces10(top object) []Interface {
	const list = "supportedInterfaces"
	items, ok := p.arr(top, "", list, true)
	if ok && len(items) == 0 {
		p.errs.Add(list, "required", "%q must list at least one interface", list)
	}
	var out []Interface
	for i, item := range items {
		path := index(list, i)
		o, ok := p.elemObj(item, path)
		if !ok {
			continue
		}
		in := Interface{
			URL:     p.str(o, path, "url", true),
			Binding: NormalizeBinding(p.str(o, path, "protocolBinding", true)),
			Tenant:  p.str(o, path, "tenant", false),
			Field:   at(path, "url"),
		}
		if v := p.str(o, path, "protocolVersion", true); v != "" {
			if mm, ok := majorMinor(v); ok {
				in.ProtocolVersion = mm
			} else {
				vp := at(path, "protocolVersion")
				p.errs.Add(vp, "format", "%q must be a major.minor version such as \"1.0\", not %q", vp, v)
			}
		}
		p.endpoint(at(path, "url"), in.URL, in.Binding)
		out = append(out, in)
	}
	return out
}

func (p *parser) interfaces03(top object) []Interface {
	var version string
	if v := p.str(top, "", "protocolVersion", true); v != "" {
		mm, ok := majorMinor(v)
		switch {
		case !ok:
			p.errs.Add("protocolVersion", "format", `"protocolVersion" must be a version such as "0.3.0", not %q`, v)
		case !strings.HasPrefix(mm, "0."):
			p.errs.Add("protocolVersion", "enum",
				`"protocolVersion" must be a 0.x version in a card with "url", not %q; an A2A 1.0 card lists its endpoints in "supportedInterfaces"`, v)
		default:
			version = mm
		}
	}

	var out []Interface
	add := func(path, u, binding string) {
		p.endpoint(path, u, binding)
		if u == "" || binding == "" {
			return
		}
		// 0.3 asks cards to repeat the main url in additionalInterfaces, so
		// the same endpoint usually appears twice.
		for _, in := range out {
			if in.URL == u && in.Binding == binding {
				return
			}
		}
		out = append(out, Interface{URL: u, Binding: binding, ProtocolVersion: version, Field: path})
	}

	mainURL := p.str(top, "", "url", true)
	transport := NormalizeBinding(p.str(top, "", "preferredTransport", false))
	if transport == "" {
		transport = BindingJSONRPC // the 0.3 default
	}
	add("url", mainURL, transport)

	const list = "additionalInterfaces"
	items, _ := p.arr(top, "", list, false)
	for i, item := range items {
		path := index(list, i)
		o, ok := p.elemObj(item, path)
		if !ok {
			continue
		}
		u := p.str(o, path, "url", true)
		b := NormalizeBinding(p.str(o, path, "transport", true))
		add(at(path, "url"), u, b)
	}
	return out
}

func protocolVersions(ins []Interface) []string {
	var out []string
	for _, in := range ins {
		if in.ProtocolVersion != "" && !slices.Contains(out, in.ProtocolVersion) {
			out = append(out, in.ProtocolVersion)
		}
	}
	return out
}

// endpoint checks that u can be reached over binding. JSON-RPC and HTTP+JSON
// are HTTP, so they need an http(s) URL; gRPC targets are often written as
// host:port; custom bindings name their own schemes (wss://, ...).
func (p *parser) endpoint(path, u, binding string) {
	if u == "" || binding == "" {
		return // already reported as required
	}
	switch binding {
	case BindingJSONRPC, BindingHTTPJSON:
		if !isHTTPURL(u) {
			p.errs.Add(path, "format", "%q must be an absolute http(s) URL for %s, not %q", path, binding, u)
		}
	case BindingGRPC:
		if !isHostPort(u) && !isAbsURL(u) {
			p.errs.Add(path, "format", "%q must be host:port or an absolute URL for GRPC, not %q", path, u)
		}
	default:
		if !isAbsURL(u) {
			p.errs.Add(path, "format", "%q must be an absolute URL, not %q", path, u)
		}
	}
}

func (p *parser) capabilities(top object, v03 bool) Capabilities {
	const path = "capabilities"
	var caps Capabilities
	if o, ok := p.obj(top, "", path, true); ok {
		caps.Streaming = p.bool(o, path, "streaming")
		caps.PushNotifications = p.bool(o, path, "pushNotifications")
		if v03 {
			caps.StateTransitionHistory = p.bool(o, path, "stateTransitionHistory")
			caps.ExtendedAgentCard = looseBool(o, "extendedAgentCard")
		} else {
			caps.ExtendedAgentCard = p.bool(o, path, "extendedAgentCard")
		}
		caps.Extensions = p.extensions(o, path)
	}
	// Before 1.0 the flag lived at the top level ("supportsAuthenticatedExtendedCard"
	// in 0.3, "supportsExtendedAgentCard" in 1.0 drafts), and the 1.0
	// migration guide tells clients to honour the old place during the
	// transition. Only 0.3 defines a member there, so only 0.3 is held to
	// its type.
	var legacy bool
	if v03 {
		legacy = p.bool(top, "", "supportsAuthenticatedExtendedCard")
	} else {
		legacy = looseBool(top, "supportsAuthenticatedExtendedCard")
	}
	caps.ExtendedAgentCard = caps.ExtendedAgentCard || legacy || looseBool(top, "supportsExtendedAgentCard")
	return caps
}

func (p *parser) extensions(caps object, parent string) []Extension {
	list := at(parent, "extensions")
	items, _ := p.arr(caps, parent, "extensions", false)
	var out []Extension
	for i, item := range items {
		path := index(list, i)
		o, ok := p.elemObj(item, path)
		if !ok {
			continue
		}
		out = append(out, Extension{
			URI:         p.str(o, path, "uri", true),
			Description: p.str(o, path, "description", false),
			Required:    p.bool(o, path, "required"),
			Params:      p.rawObj(o, path, "params"),
		})
	}
	return out
}

func (p *parser) skills(top object) []Skill {
	const list = "skills"
	items, _ := p.arr(top, "", list, true)
	var out []Skill
	seen := make(map[string]bool, len(items))
	for i, item := range items {
		path := index(list, i)
		o, ok := p.elemObj(item, path)
		if !ok {
			continue
		}
		s := Skill{
			ID:          p.str(o, path, "id", true),
			Name:        p.str(o, path, "name", true),
			Description: p.str(o, path, "description", true),
			Tags:        p.strs(o, path, "tags", true),
			Examples:    p.strs(o, path, "examples", false),
			InputModes:  p.strs(o, path, "inputModes", false),
			OutputModes: p.strs(o, path, "outputModes", false),
		}
		// Skill IDs key contracts and usage records, so a duplicate would
		// make them ambiguous.
		if s.ID != "" {
			if seen[s.ID] {
				ip := at(path, "id")
				p.errs.Add(ip, "unique", "%q repeats the skill id %q", ip, s.ID)
			}
			seen[s.ID] = true
		}
		out = append(out, s)
	}
	return out
}

func (p *parser) securitySchemes(top object) map[string]json.RawMessage {
	const path = "securitySchemes"
	o, ok := p.obj(top, "", path, false)
	if !ok {
		return nil
	}
	out := make(map[string]json.RawMessage, len(o))
	for _, name := range slices.Sorted(maps.Keys(o)) {
		if kindOf(o[name]) != kindObject {
			sp := member(path, name)
			p.errs.Add(sp, "type", "%q must be an object", sp)
			continue
		}
		out[name] = o[name]
	}
	return out
}

func (p *parser) security(top object, sh shape) json.RawMessage {
	// 1.0 names the member "securityRequirements", yet the 1.0
	// specification's own sample card still says "security", so a 1.0 card
	// without the new name is read under the old one.
	key := "security"
	if _, ok := top["securityRequirements"]; ok && sh != shape03 {
		key = "securityRequirements"
	}
	v, ok := p.field(top, "", key, kindArray, false)
	if !ok {
		return nil
	}
	return v
}

func (p *parser) signatures(top object) []Signature {
	const list = "signatures"
	items, _ := p.arr(top, "", list, false)
	var out []Signature
	for i, item := range items {
		path := index(list, i)
		o, ok := p.elemObj(item, path)
		if !ok {
			continue
		}
		out = append(out, Signature{
			Protected: p.str(o, path, "protected", true),
			Signature: p.str(o, path, "signature", true),
			Header:    p.rawObj(o, path, "header"),
		})
	}
	return out
}

func (p *parser) provider(top object) *Provider {
	const path = "provider"
	o, ok := p.obj(top, "", path, false)
	if !ok {
		return nil
	}
	return &Provider{
		Organization: p.str(o, path, "organization", true),
		URL:          p.webURL(o, path, "url", true),
	}
}

// webURL reads a URL the marketplace renders as a link or an image. Only
// http(s) is accepted, because other schemes (javascript:, data:) are how
// such fields become script injection in a listing page.
func (p *parser) webURL(o object, parent, key string, required bool) string {
	u := p.str(o, parent, key, required)
	if u != "" && !isHTTPURL(u) {
		path := at(parent, key)
		p.errs.Add(path, "format", "%q must be an absolute http(s) URL, not %q", path, u)
	}
	return u
}

// JSON type checks. Each reader reports a missing required member, or a
// member of the wrong type, and returns the zero value so parsing can go on
// and find the next problem. JSON null counts as absent, as in proto JSON.

type kind int

const (
	kindAbsent kind = iota
	kindNull
	kindString
	kindNumber
	kindBool
	kindArray
	kindObject
)

func (k kind) String() string {
	switch k {
	case kindString:
		return "a string"
	case kindNumber:
		return "a number"
	case kindBool:
		return "a boolean"
	case kindArray:
		return "an array"
	case kindObject:
		return "an object"
	}
	return "null"
}

func kindOf(v json.RawMessage) kind {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return kindAbsent
	}
	switch v[0] {
	case '"':
		return kindString
	case '{':
		return kindObject
	case '[':
		return kindArray
	case 't', 'f':
		return kindBool
	case 'n':
		return kindNull
	}
	return kindNumber
}

// field returns o[key] when it is present and of kind want.
func (p *parser) field(o object, parent, key string, want kind, required bool) (json.RawMessage, bool) {
	path := at(parent, key)
	v := o[key]
	switch k := kindOf(v); {
	case k == kindAbsent || k == kindNull:
		if required {
			p.errs.Add(path, "required", "%q is required", path)
		}
		return nil, false
	case k != want:
		p.errs.Add(path, "type", "%q must be %s", path, want)
		return nil, false
	}
	return v, true
}

func (p *parser) str(o object, parent, key string, required bool) string {
	path := at(parent, key)
	v, ok := p.field(o, parent, key, kindString, required)
	if !ok {
		return ""
	}
	var s string
	_ = json.Unmarshal(v, &s) // cannot fail: the scanner accepted a string
	s = strings.TrimSpace(s)
	if s == "" && required {
		p.errs.Add(path, "required", "%q must not be blank", path)
	}
	return s
}

func (p *parser) bool(o object, parent, key string) bool {
	v, ok := p.field(o, parent, key, kindBool, false)
	return ok && string(bytes.TrimSpace(v)) == "true"
}

// looseBool reads a member the card's version does not define but that
// cards of the transition carry; a wrong type there is not the seller's
// error under the version they follow.
func looseBool(o object, key string) bool {
	return string(bytes.TrimSpace(o[key])) == "true"
}

func (p *parser) obj(o object, parent, key string, required bool) (object, bool) {
	v, ok := p.field(o, parent, key, kindObject, required)
	if !ok {
		return nil, false
	}
	var out object
	_ = json.Unmarshal(v, &out) // cannot fail: the scanner accepted an object
	return out, true
}

// rawObj returns an optional object member exactly as received.
func (p *parser) rawObj(o object, parent, key string) json.RawMessage {
	v, _ := p.field(o, parent, key, kindObject, false)
	return v
}

func (p *parser) arr(o object, parent, key string, required bool) ([]json.RawMessage, bool) {
	v, ok := p.field(o, parent, key, kindArray, required)
	if !ok {
		return nil, false
	}
	var out []json.RawMessage
	_ = json.Unmarshal(v, &out) // cannot fail: the scanner accepted an array
	return out, true
}

func (p *parser) strs(o object, parent, key string, required bool) []string {
	path := at(parent, key)
	items, _ := p.arr(o, parent, key, required)
	var out []string
	for i, item := range items {
		if kindOf(item) != kindString {
			ip := index(path, i)
			p.errs.Add(ip, "type", "%q must be a string", ip)
			continue
		}
		var s string
		_ = json.Unmarshal(item, &s)
		out = append(out, strings.TrimSpace(s))
	}
	return out
}

func (p *parser) elemObj(item json.RawMessage, path string) (object, bool) {
	if kindOf(item) != kindObject {
		p.errs.Add(path, "type", "%q must be an object", path)
		return nil, false
	}
	var o object
	_ = json.Unmarshal(item, &o)
	return o, true
}

func at(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func index(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// member names a map entry; names that would read as path syntax are quoted.
func member(path, name string) string {
	if plainKey.MatchString(name) {
		return at(path, name)
	}
	return path + "[" + strconv.Quote(name) + "]"
}

// majorMinor reduces "0.3.0" or "1.0" to "0.3" or "1.0": only major.minor
// matters for compatibility (1.0 §3.6), yet 0.3 cards carry a patch number.
func majorMinor(v string) (string, bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 || (len(parts) == 3 && parts[2] == "") {
		return "", false
	}
	var nums [2]int
	for i := range nums {
		if parts[i] == "" || strings.Trim(parts[i], "0123456789") != "" {
			return "", false
		}
		n, err := strconv.Atoi(parts[i])
		if err != nil {
			return "", false
		}
		nums[i] = n
	}
	return strconv.Itoa(nums[0]) + "." + strconv.Itoa(nums[1]), true
}

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Scheme, "http") || strings.EqualFold(u.Scheme, "https")
}

func isAbsURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme != "" && u.Host != ""
}

func isHostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" || strings.ContainsAny(host, "/?#@ ") {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n > 0 && n <= 65535 && strings.Trim(port, "0123456789") == ""
}
