package contracts

import (
	"fmt"
	"net/netip"
	"strings"
)

// TrustedProxies are the load balancers and reverse proxies in front of
// the marketplace (AGENTMARKET_TRUSTED_PROXIES): behind them every
// connection comes from a proxy, and the client's address is in the
// X-Forwarded-For header the proxies append to. Empty: the header is
// never read (anyone can write it), and the connection's peer is the
// client.
type TrustedProxies []netip.Prefix

// ParseTrustedProxies reads a list of address ranges (CIDR prefixes) or
// addresses, separated by commas or spaces, like "10.0.0.0/8, fd00::/8".
func ParseTrustedProxies(s string) (TrustedProxies, error) {
	var out TrustedProxies
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("%q is neither an address range like 10.0.0.0/8 or fd00::/8 nor an address", f)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not an address range like 10.0.0.0/8 or fd00::/8", f)
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func (t TrustedProxies) trusts(a netip.Addr) bool {
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ClientAddr is the address a request came from: peer, the connection's
// remote address, unless peer is a trusted proxy; then the rightmost
// address of forwardedFor (the X-Forwarded-For headers' values, in order)
// that is not a trusted proxy. Only that one was written by a trusted
// proxy: whatever is left of it the client wrote itself, and is not
// believed. When every address is trusted (or an entry is not an
// address), the last trusted one read.
func (t TrustedProxies) ClientAddr(peer netip.Addr, forwardedFor []string) netip.Addr {
	client := peer.Unmap().WithZone("")
	if len(t) == 0 || !t.trusts(client) {
		return client
	}
	for i := len(forwardedFor) - 1; i >= 0; i-- {
		hops := strings.Split(forwardedFor[i], ",")
		for j := len(hops) - 1; j >= 0; j-- {
			h := strings.TrimSpace(hops[j])
			if h == "" {
				continue
			}
			a, err := netip.ParseAddr(h)
			if err != nil {
				// Some balancers forward the client's port too
				// ("203.0.113.7:41234", "[2001:db8::1]:41234").
				ap, perr := netip.ParseAddrPort(h)
				if perr != nil {
					return client
				}
				a = ap.Addr()
			}
			client = a.Unmap().WithZone("")
			if !t.trusts(client) {
				return client
			}
		}
	}
	return client
}

// ClientKey is what one client's requests are counted under: its IPv4
// address, or the /64 of its IPv6 address (one subscriber's network: a
// single host may rotate through 2^64 addresses of it).
func ClientKey(a netip.Addr) string {
	a = a.Unmap()
	if a.Is6() {
		return netip.PrefixFrom(a, 64).Masked().String()
	}
	return a.String()
}

// Client is the key (ClientKey) of the client a request came from (see
// ClientAddr); peer is the connection's remote address, as the transport
// gives it.
func (t TrustedProxies) Client(peer netip.Addr, forwardedFor []string) string {
	return ClientKey(t.ClientAddr(peer, forwardedFor))
}
