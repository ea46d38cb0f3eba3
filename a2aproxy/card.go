package a2aproxy

import (
	"encoding/json"
	"fmt"

	"github.com/agentmarket/agentmarket/listings/agentcard"
)

// SecuritySchemeName names the marketplace's bearer scheme in proxied cards.
const SecuritySchemeName = "agentmarket"

// ProxiedCard is the seller's card as the buyer's orchestrator must see
// it: endpoints rewritten to the meter (JSON-RPC and HTTP+JSON, in each
// version the seller offers; the meter bridges to the agent's own), the security scheme replaced by the
// marketplace's bearer key, push notifications on only where the meter
// relays them (push) and the agent offers them, signatures dropped (they no longer match). Every other
// member is kept as the seller wrote it.
func ProxiedCard(raw []byte, card *agentcard.Card, endpoint string, push bool) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("card: %w", err)
	}
	set := func(k string, v any) {
		b, _ := json.Marshal(v)
		m[k] = b
	}
	versions := card.ProtocolVersions
	if _, ok := m["supportedInterfaces"]; ok {
		var ifaces []map[string]string
		for _, v := range versions {
			for _, b := range []string{agentcard.BindingJSONRPC, agentcard.BindingHTTPJSON} {
				ifaces = append(ifaces, map[string]string{"url": endpoint, "protocolBinding": b, "protocolVersion": v})
			}
		}
		set("supportedInterfaces", ifaces)
		set("securitySchemes", map[string]any{SecuritySchemeName: map[string]any{
			"httpAuthSecurityScheme": map[string]string{"scheme": "Bearer", "description": "An AgentMarket API key (amk_…) of your organisation."},
		}})
		// Scopes as a bare array, as the specification's sample card writes
		// them and the official Go SDK parses them (it rejects the proto's
		// {"list": []} form, and attaches credentials only for a named
		// requirement).
		set("securityRequirements", []any{map[string]any{"schemes": map[string]any{SecuritySchemeName: []string{}}}})
		delete(m, "security")
		// A 1.0 card may also carry 0.3 fields for old clients.
		if _, ok := m["url"]; ok {
			set("url", endpoint)
			set("preferredTransport", agentcard.BindingJSONRPC)
			delete(m, "additionalInterfaces")
		}
	} else {
		set("url", endpoint)
		set("preferredTransport", agentcard.BindingJSONRPC)
		set("additionalInterfaces", []map[string]string{
			{"url": endpoint, "transport": agentcard.BindingJSONRPC},
			{"url": endpoint, "transport": agentcard.BindingHTTPJSON},
		})
		set("securitySchemes", map[string]any{SecuritySchemeName: map[string]string{
			"type": "http", "scheme": "bearer", "description": "An AgentMarket API key (amk_…) of your organisation.",
		}})
		set("security", []any{map[string][]string{SecuritySchemeName: {}}})
	}
	if caps, ok := m["capabilities"]; ok {
		var c map[string]json.RawMessage
		if json.Unmarshal(caps, &c) == nil {
			c["pushNotifications"] = json.RawMessage(fmt.Sprint(push))
			b, _ := json.Marshal(c)
			m["capabilities"] = b
		}
	}
	delete(m, "signatures")
	return json.Marshal(m)
}
