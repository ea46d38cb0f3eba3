package listings

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings/agentcard"
)

// EndpointGuard judges the hosts of the endpoints a card declares, which
// the meter will dial (listings/httpfetch.Guard, the SSRF policy the
// meter's dialer applies again at every connect).
type EndpointGuard interface {
	// CheckHost returns nil when host, a literal IP or a name, is one the
	// marketplace may connect to: for a name, when every address it
	// resolves to now is, or when it does not resolve (there is nothing
	// to dial yet; the dialer judges it when it does). Its refusals are
	// *agentmarket.Error of kind Invalid whose message may be shown to the
	// seller.
	CheckHost(ctx context.Context, host string) error
}

// CodeEndpointRefused is the code of a card whose endpoints the
// marketplace will not connect to; a field error names each one
// ("card.supportedInterfaces[1].url").
const CodeEndpointRefused = "card_endpoint_refused"

// checkEndpoints refuses a card that names an endpoint on a host the
// guard refuses: the meter would dial it with buyers' calls. Every
// interface is judged, whatever its binding, each host once.
func (s *Service) checkEndpoints(ctx context.Context, card *agentcard.Card) error {
	if s.Endpoints == nil {
		return agentmarket.Errorf(agentmarket.Internal, "endpoint_guard_missing", "listings.Service has no Endpoints guard: cards cannot be checked")
	}
	var fe agentmarket.Fields
	var msgs []string
	judged := map[string]error{}
	for _, in := range card.Interfaces {
		host := endpointHost(in.URL)
		if host == "" {
			continue // nothing the meter could dial (a URN, say)
		}
		err, ok := judged[host]
		if !ok {
			err = s.Endpoints.CheckHost(ctx, host)
			judged[host] = err
		}
		if err == nil {
			continue
		}
		var ae *agentmarket.Error
		if !errors.As(err, &ae) || ae.Kind == agentmarket.Internal {
			return err
		}
		field := "card." + in.Field
		fe.Add(field, "public_address", "%s: %s", field, ae.Message)
		msgs = append(msgs, fe[len(fe)-1].Message)
	}
	// The message repeats the fields': a refresh keeps only the message
	// (the listing's health detail).
	return fe.Err(CodeEndpointRefused, "the card names endpoints the marketplace does not connect to: "+strings.Join(msgs, "; "))
}

// endpointHost is the host of an interface URL: an absolute URL's, or a
// gRPC target's (host:port); "" when it names none.
func endpointHost(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Hostname()
	}
	if host, _, err := net.SplitHostPort(raw); err == nil {
		return host
	}
	return ""
}
