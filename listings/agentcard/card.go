// Package agentcard reads A2A Agent Cards of protocol 0.3 and 1.0 into one
// version-independent model, so that listings, search and the metering proxy
// never have to know which shape a seller published.
//
// The model keeps only what the product works with. Security schemes,
// security requirements and signatures are kept as received because their
// meaning differs between versions and a signature only verifies against the
// card's own bytes, which are stored elsewhere.
package agentcard

import (
	"encoding/json"
	"slices"
	"strings"
)

// The protocol bindings the A2A specification defines. Other bindings are
// allowed by 1.0 (identified by a URI) and are kept as written.
const (
	BindingJSONRPC  = "JSONRPC"
	BindingGRPC     = "GRPC"
	BindingHTTPJSON = "HTTP+JSON"
)

// Card is an agent card of any supported protocol version.
type Card struct {
	Name        string
	Description string
	Version     string // the agent's own version, not the protocol's

	// ProtocolVersions lists the distinct major.minor protocol versions the
	// agent offers, in the order of Interfaces, so the preferred one is first.
	ProtocolVersions []string

	// Interfaces lists the endpoints, preferred first.
	Interfaces []Interface

	Capabilities       Capabilities
	DefaultInputModes  []string
	DefaultOutputModes []string
	Skills             []Skill

	// SecuritySchemes and Security are kept as received: 0.3 uses
	// OpenAPI-style objects, 1.0 wraps each scheme in a typed member and
	// names the requirements "securityRequirements".
	SecuritySchemes map[string]json.RawMessage
	Security        json.RawMessage

	Signatures       []Signature
	Provider         *Provider
	DocumentationURL string
	IconURL          string
}

// Interface is one endpoint of an agent.
type Interface struct {
	URL string
	// Binding is "JSONRPC", "GRPC", "HTTP+JSON", or a custom binding as
	// written in the card.
	Binding string
	// ProtocolVersion is major.minor, such as "0.3" or "1.0".
	ProtocolVersion string
	// Tenant, when set, must be sent in every request to this interface.
	Tenant string
	// Field is where the card declares URL ("supportedInterfaces[1].url",
	// "url", "additionalInterfaces[0].url"), for errors about it.
	Field string
}

// Capabilities are the optional protocol features an agent declares.
type Capabilities struct {
	Streaming              bool
	PushNotifications      bool
	StateTransitionHistory bool // 0.3 only
	ExtendedAgentCard      bool
	Extensions             []Extension
}

// Extension is a protocol extension the agent supports.
type Extension struct {
	URI         string
	Description string
	Required    bool
	Params      json.RawMessage
}

// Skill is one thing the agent can do.
type Skill struct {
	ID          string
	Name        string
	Description string
	Tags        []string
	Examples    []string
	InputModes  []string
	OutputModes []string
}

// Signature is a JWS over the card, in the flattened JSON form of RFC 7515.
type Signature struct {
	Protected string
	Signature string
	Header    json.RawMessage
}

// Provider is the organisation that runs the agent.
type Provider struct {
	Organization string
	URL          string
}

// SkillIDs returns the skill IDs in card order.
func (c *Card) SkillIDs() []string {
	ids := make([]string, 0, len(c.Skills))
	for _, s := range c.Skills {
		ids = append(ids, s.ID)
	}
	return ids
}

// Tags returns the distinct tags of all skills, sorted.
func (c *Card) Tags() []string {
	var tags []string
	for _, s := range c.Skills {
		tags = append(tags, s.Tags...)
	}
	return distinctSorted(tags)
}

// InputModes returns every input media type the agent accepts: the defaults
// and the per-skill overrides, distinct and sorted.
func (c *Card) InputModes() []string {
	modes := slices.Clone(c.DefaultInputModes)
	for _, s := range c.Skills {
		modes = append(modes, s.InputModes...)
	}
	return distinctSorted(modes)
}

// OutputModes returns every output media type the agent produces: the
// defaults and the per-skill overrides, distinct and sorted.
func (c *Card) OutputModes() []string {
	modes := slices.Clone(c.DefaultOutputModes)
	for _, s := range c.Skills {
		modes = append(modes, s.OutputModes...)
	}
	return distinctSorted(modes)
}

// PreferredInterface returns the first interface, in the agent's order of
// preference, whose binding is one of bindings; any interface when bindings
// is empty. Known binding names match case-insensitively.
func (c *Card) PreferredInterface(bindings ...string) (Interface, bool) {
	for _, in := range c.Interfaces {
		if len(bindings) == 0 {
			return in, true
		}
		for _, b := range bindings {
			if NormalizeBinding(b) == in.Binding {
				return in, true
			}
		}
	}
	return Interface{}, false
}

// HasExtension reports whether the agent declares the extension uri.
func (c *Card) HasExtension(uri string) bool {
	for _, e := range c.Capabilities.Extensions {
		if e.URI == uri {
			return true
		}
	}
	return false
}

// NormalizeBinding returns the canonical spelling of a known binding or
// transport name, matched case-insensitively because 0.3 cards in the field
// spell them freely; any other name is returned trimmed but otherwise as
// written, since 1.0 custom bindings are URIs compared exactly.
func NormalizeBinding(b string) string {
	b = strings.TrimSpace(b)
	for _, known := range []string{BindingJSONRPC, BindingGRPC, BindingHTTPJSON} {
		if strings.EqualFold(b, known) {
			return known
		}
	}
	return b
}

func distinctSorted(ss []string) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
