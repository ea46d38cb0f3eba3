package listings

import (
	"context"
	"errors"
	"net/url"
	"strconv"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings/agentcard"
)

// A listing may run its agent at several endpoints (replicas, regions):
// the card's interfaces, and endpoints the seller adds beside the card
// (a replica the card does not name). The meter balances new tasks over
// the endpoints of the interface it calls (same binding, same A2A
// version), least-in-flight weighted by Weight, among those it has not
// ejected; a task's later calls go to the endpoint that created it
// (a2aproxy/balance.go).

// AgentEndpoint is one endpoint the seller set: a URL (one of the card's
// interfaces, whose weight it sets, or another of the same agent), the
// binding and version it speaks, and its share of new tasks.
type AgentEndpoint struct {
	URL             string
	Binding         string // agentcard.BindingJSONRPC or BindingHTTPJSON
	ProtocolVersion string // "0.3" or "1.0"
	Weight          int    // 1..MaxEndpointWeight
}

// Bounds of the endpoints a seller sets.
const (
	MaxAgentEndpoints = 16
	MaxEndpointWeight = 100
)

// AgentEndpointInput is how the API carries an endpoint. Binding and
// protocol_version may be left out: a card interface's URL takes the
// card's, another URL the card's preferred interface's (a replica of it).
type AgentEndpointInput struct {
	URL             string `json:"url"`
	Binding         string `json:"binding,omitempty"`
	ProtocolVersion string `json:"protocol_version,omitempty"`
	Weight          *int   `json:"weight,omitempty"`
}

// Input is e as the API shows it.
func (e AgentEndpoint) Input() AgentEndpointInput {
	w := e.Weight
	return AgentEndpointInput{URL: e.URL, Binding: e.Binding, ProtocolVersion: e.ProtocolVersion, Weight: &w}
}

// CodeEndpointsInvalid is the code of a refused endpoints list; a field
// error names each problem ("endpoints[1].url").
const CodeEndpointsInvalid = "invalid_endpoints"

// parseEndpoints checks a seller's endpoints against the card they go
// with, each problem as a field error, and judges every host with the
// SSRF guard as a card's interfaces are (checkEndpoints): the meter dials
// them with buyers' calls, and its dialer refuses the same addresses again
// at every connect.
func (s *Service) parseEndpoints(ctx context.Context, fe *agentmarket.Fields, in []AgentEndpointInput, card *agentcard.Card) ([]AgentEndpoint, error) {
	if len(in) > MaxAgentEndpoints {
		fe.Add("endpoints", "max", "at most %d endpoints", MaxAgentEndpoints)
		return nil, nil
	}
	var pref *agentcard.Interface
	if card != nil {
		if ps := ProbeEndpoints(card); len(ps) > 0 {
			pref = &ps[0]
		}
	}
	out := make([]AgentEndpoint, 0, len(in))
	seen := map[string]bool{}
	for i, e := range in {
		field := func(f string) string { return "endpoints[" + strconv.Itoa(i) + "]." + f }
		if !fe.Text(field("url"), e.URL, MaxCardURL) {
			continue
		}
		u, err := url.Parse(e.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			fe.Add(field("url"), "format", "%s must be an absolute http or https URL without credentials", field("url"))
			continue
		}
		if seen[e.URL] {
			fe.Add(field("url"), "unique", "%s is listed twice", field("url"))
			continue
		}
		seen[e.URL] = true
		ep := AgentEndpoint{URL: e.URL, Binding: e.Binding, ProtocolVersion: e.ProtocolVersion, Weight: 1}
		if e.Weight != nil {
			ep.Weight = *e.Weight
			if ep.Weight < 1 || ep.Weight > MaxEndpointWeight {
				fe.Add(field("weight"), "range", "%s must be between 1 and %d", field("weight"), MaxEndpointWeight)
			}
		}
		var of *agentcard.Interface
		if card != nil {
			for j := range card.Interfaces {
				if card.Interfaces[j].URL == e.URL {
					of = &card.Interfaces[j]
					break
				}
			}
		}
		if of == nil {
			of = pref
		}
		if ep.Binding == "" && of != nil {
			ep.Binding = of.Binding
		}
		if ep.ProtocolVersion == "" && of != nil {
			ep.ProtocolVersion = of.ProtocolVersion
		}
		if ep.Binding != agentcard.BindingJSONRPC && ep.Binding != agentcard.BindingHTTPJSON {
			fe.Add(field("binding"), "enum", "%s must be %q or %q", field("binding"), agentcard.BindingJSONRPC, agentcard.BindingHTTPJSON)
		}
		if ep.ProtocolVersion != "0.3" && ep.ProtocolVersion != "1.0" {
			fe.Add(field("protocol_version"), "enum", "%s must be \"0.3\" or \"1.0\"", field("protocol_version"))
		}
		if s.Endpoints == nil {
			return nil, agentmarket.Errorf(agentmarket.Internal, "endpoint_guard_missing", "listings.Service has no Endpoints guard: endpoints cannot be checked")
		}
		if err := s.Endpoints.CheckHost(ctx, u.Hostname()); err != nil {
			var ae *agentmarket.Error
			if !errors.As(err, &ae) || ae.Kind == agentmarket.Internal {
				return nil, err
			}
			fe.Add(field("url"), "public_address", "%s: %s", field("url"), ae.Message)
		}
		out = append(out, ep)
	}
	return out, nil
}

// RouteEndpoints are the endpoints the meter balances over for calls to
// iface (the card's interface it chose): every card interface and seller
// endpoint of the same binding and version, iface first, weighted by the
// seller's weights (1 where the seller set none). Nil when the seller set
// no endpoints: the meter then calls iface alone, as it always did.
func RouteEndpoints(card *agentcard.Card, set []AgentEndpoint, iface agentcard.Interface) []AgentEndpoint {
	if len(set) == 0 {
		return nil
	}
	weight := func(u string) (int, bool) {
		for _, e := range set {
			if e.URL == u {
				return e.Weight, true
			}
		}
		return 1, false
	}
	same := func(b, v string) bool { return b == iface.Binding && v == iface.ProtocolVersion }
	var out []AgentEndpoint
	has := func(u string) bool {
		for _, e := range out {
			if e.URL == u {
				return true
			}
		}
		return false
	}
	w, _ := weight(iface.URL)
	out = append(out, AgentEndpoint{URL: iface.URL, Binding: iface.Binding, ProtocolVersion: iface.ProtocolVersion, Weight: w})
	if card != nil {
		for _, in := range card.Interfaces {
			if same(in.Binding, in.ProtocolVersion) && !has(in.URL) {
				w, _ := weight(in.URL)
				out = append(out, AgentEndpoint{URL: in.URL, Binding: in.Binding, ProtocolVersion: in.ProtocolVersion, Weight: w})
			}
		}
	}
	for _, e := range set {
		if same(e.Binding, e.ProtocolVersion) && !has(e.URL) {
			out = append(out, e)
		}
	}
	return out
}
