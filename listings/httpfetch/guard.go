// Package httpfetch fetches agent cards over HTTP(S) without letting a
// caller-supplied URL reach the marketplace's own network (SSRF).
//
// The SSRF policy lives in Guard, which is independent of card fetching so
// that webhook delivery can reuse it. Guard is enforced where it cannot be
// bypassed: in the dialer's Control hook, which sees the address the
// connection is about to use after DNS resolution, so neither a hostname
// that resolves to 10.0.0.1 nor a DNS-rebinding answer that changes between
// a check and the connect gets through.
package httpfetch

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/agentmarket/agentmarket"
)

// CodeURLRefused is the code of Guard's refusals.
const CodeURLRefused = "url_refused"

// Guard is the SSRF policy: it refuses every address that is not a public
// unicast address, unless the address is inside one of the Allow ranges.
// The zero Guard is the strict production policy.
type Guard struct {
	// Allow lists ranges that are reachable despite the rules, for example
	// 127.0.0.0/8 in tests or a partner's private range on-premises. It is
	// configured from AGENTMARKET_FETCH_ALLOW_CIDRS through ParseCIDRs.
	Allow []netip.Prefix
	// Resolver resolves names for CheckHost, and for the dialers
	// DialContext returns whose base has none; nil means
	// net.DefaultResolver. Tests set an in-memory one.
	Resolver *net.Resolver
}

// ParseCIDRs parses a comma- or space-separated list of prefixes
// ("10.0.0.0/8, fc00::/7"). A bare address means that address alone (/32 or
// /128). Prefixes are masked, so "10.1.2.3/8" means 10.0.0.0/8. The empty
// string is an empty list.
func ParseCIDRs(s string) ([]netip.Prefix, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	var out []netip.Prefix
	for _, f := range fields {
		if strings.Contains(f, "/") {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, fmt.Errorf("allowed CIDR %q is not a valid prefix (want e.g. 127.0.0.0/8 or fc00::/7): %w", f, err)
			}
			out = append(out, p.Masked())
			continue
		}
		ip, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("allowed CIDR %q is neither a prefix nor an IP address (want e.g. 127.0.0.0/8 or ::1): %w", f, err)
		}
		if ip.Zone() != "" {
			// A zone names an interface of one host; a range that holds
			// only on some interface is not something a policy can express.
			return nil, fmt.Errorf("allowed CIDR %q has an IPv6 zone, which is not allowed", f)
		}
		out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
	}
	return out, nil
}

// Check returns nil when ip may be connected to, and otherwise an
// *agentmarket.Error of kind Invalid and code "url_refused" whose message
// names the address and the reason, e.g. "10.0.0.1 is a private address".
func (g Guard) Check(ip netip.Addr) error {
	if !ip.IsValid() {
		return refused("the empty address is not an IP address")
	}
	if why := g.refusal(ip); why != "" {
		return refused(ip.String() + " is " + why)
	}
	return nil
}

// Control has the signature of net.Dialer.Control. The dialer calls it
// after it has resolved the host and created the socket, right before
// connect, with the numeric address: checking there is what makes the
// policy hold against hostnames and DNS rebinding.
func (g Guard) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		// Only IP networks are expected here; anything else (a Unix
		// socket path, say) is not a remote address the policy can judge.
		return refused(fmt.Sprintf("%s address %q is not an IP address and port", network, address))
	}
	return g.Check(ap.Addr())
}

// DialContext returns base's DialContext with the guard installed as the
// dialer's control hook. base is copied, not modified; nil means a zero
// net.Dialer. A control hook base already has still runs, after the guard
// has passed the address. The guard is installed as ControlContext because
// net.Dialer ignores Control when ControlContext is set.
func (g Guard) DialContext(base *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	if base != nil {
		d = *base
	}
	if d.Resolver == nil {
		d.Resolver = g.Resolver
	}
	// Freeze the allow list: a caller mutating its slice later must not
	// change the policy of dialers already handed out.
	g.Allow = slices.Clone(g.Allow)
	next, nextCtx := d.Control, d.ControlContext
	d.Control = nil
	d.ControlContext = func(ctx context.Context, network, address string, c syscall.RawConn) error {
		if err := g.Control(network, address, c); err != nil {
			return err
		}
		switch {
		case nextCtx != nil:
			return nextCtx(ctx, network, address, c)
		case next != nil:
			return next(network, address, c)
		}
		return nil
	}
	return d.DialContext
}

// CheckHost judges a host before anything is dialled, for the people who
// type URLs: a literal IP by itself, a name by every address it resolves
// to now, all of which must pass Check. A refusal is an
// *agentmarket.Error of kind Invalid and code url_refused whose message
// says why for a literal IP but, for a name, never what it resolved to
// (the answer would map the marketplace's own network). A name that does
// not resolve now passes: nothing can be dialled there, and what it
// resolves to later is judged then. CheckHost is advice, not the policy:
// a name can resolve elsewhere later, so the dialers judge the address
// again at every connect.
func (g Guard) CheckHost(ctx context.Context, host string) error {
	if ip, err := netip.ParseAddr(host); err == nil {
		return g.Check(ip)
	}
	r := g.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	ips, _ := r.LookupNetIP(ctx, "ip", host)
	for _, ip := range ips {
		if g.Check(ip) != nil {
			return refused(fmt.Sprintf("host %q resolves to an address the marketplace does not connect to (only public addresses are reachable)", host))
		}
	}
	return nil
}

// lookupTimeout bounds CheckHost's name resolution.
const lookupTimeout = 5 * time.Second

func refused(msg string) error {
	return &agentmarket.Error{Kind: agentmarket.Invalid, Code: CodeURLRefused, Message: msg}
}

// refusal returns why ip is refused ("a private address"), or "" when it
// is allowed.
func (g Guard) refusal(ip netip.Addr) string {
	// Zones do not change where a packet goes between hosts, and
	// netip.Prefix.Contains never matches a zoned address.
	ip = ip.WithZone("")
	if g.allowed(ip) {
		return ""
	}
	if ip.Is4In6() {
		// The kernel dials ::ffff:a.b.c.d as IPv4 a.b.c.d.
		v4 := ip.Unmap()
		if why := g.refusal(v4); why != "" {
			return fmt.Sprintf("an IPv4-mapped address of %s, which is %s", v4, why)
		}
		return ""
	}
	for _, r := range rules {
		if !r.prefix.Contains(ip) {
			continue
		}
		if r.embedded == nil {
			return r.why
		}
		// A translation or tunnel prefix reaches the IPv4 address it
		// carries, so it is exactly as allowed as that address.
		inner := r.embedded(ip.As16())
		if why := g.refusal(inner); why != "" {
			return fmt.Sprintf("%s embedding %s, which is %s", r.why, inner, why)
		}
		return ""
	}
	if ip.Is6() && !globalUnicast.Contains(ip) {
		// Defence in depth: all public IPv6 unicast is in 2000::/3, so
		// whatever a future RFC carves out elsewhere is refused by default.
		return "a reserved address (outside 2000::/3)"
	}
	return ""
}

func (g Guard) allowed(ip netip.Addr) bool {
	for _, p := range g.Allow {
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			// Let "::ffff:127.0.0.0/104" mean what it says for IPv4 too.
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// rule is one special-purpose range. The first matching rule decides, so
// single addresses come before the ranges that hold them.
type rule struct {
	prefix netip.Prefix
	why    string
	// embedded, when set, extracts the IPv4 address a translation or
	// tunnelling prefix carries; the rule then refuses only what that
	// address would be refused for.
	embedded func(b [16]byte) netip.Addr
}

var globalUnicast = netip.MustParsePrefix("2000::/3")

var rules = []rule{
	// IPv4, after the IANA special-purpose address registry.
	{prefix: pfx("0.0.0.0/32"), why: "the unspecified address"},
	{prefix: pfx("0.0.0.0/8"), why: `a "this network" address`},
	{prefix: pfx("10.0.0.0/8"), why: "a private address"},
	// Alibaba Cloud's metadata service sits inside the CGNAT range.
	{prefix: pfx("100.100.100.200/32"), why: "a cloud metadata address"},
	{prefix: pfx("100.64.0.0/10"), why: "a shared (carrier-grade NAT) address"},
	{prefix: pfx("127.0.0.0/8"), why: "a loopback address"},
	// AWS, GCP, Azure, Oracle and others serve instance credentials here.
	{prefix: pfx("169.254.169.254/32"), why: "a cloud metadata address"},
	{prefix: pfx("169.254.0.0/16"), why: "a link-local address"},
	// Azure's WireServer: public-looking, but reachable only from inside
	// Azure, where it serves the host agent's configuration.
	{prefix: pfx("168.63.129.16/32"), why: "a cloud metadata address"},
	{prefix: pfx("172.16.0.0/12"), why: "a private address"},
	{prefix: pfx("192.0.0.0/24"), why: "an IETF protocol assignment address"},
	{prefix: pfx("192.0.2.0/24"), why: "a documentation address"},
	{prefix: pfx("192.168.0.0/16"), why: "a private address"},
	// Also used by VPN clients and "fake-IP" DNS proxies for local routes.
	{prefix: pfx("198.18.0.0/15"), why: "a benchmarking address"},
	{prefix: pfx("198.51.100.0/24"), why: "a documentation address"},
	{prefix: pfx("203.0.113.0/24"), why: "a documentation address"},
	{prefix: pfx("224.0.0.0/4"), why: "a multicast address"},
	{prefix: pfx("255.255.255.255/32"), why: "the broadcast address"},
	{prefix: pfx("240.0.0.0/4"), why: "a reserved address"},

	// IPv6. IPv4-mapped addresses (::ffff:0:0/96) are unmapped before
	// these rules are consulted.
	{prefix: pfx("::/128"), why: "the unspecified address"},
	{prefix: pfx("::1/128"), why: "a loopback address"},
	{prefix: pfx("::/96"), why: "an IPv4-compatible address (deprecated)"},
	{prefix: pfx("::ffff:0:0:0/96"), why: "an IPv4-translated address"},
	{prefix: pfx("64:ff9b::/96"), why: "a NAT64 address", embedded: last32},
	{prefix: pfx("64:ff9b:1::/48"), why: "a local-use NAT64 address"},
	{prefix: pfx("100::/64"), why: "a discard-only address"},
	{prefix: pfx("2001:2::/48"), why: "a benchmarking address"},
	{prefix: pfx("2001:db8::/32"), why: "a documentation address"},
	{prefix: pfx("3fff::/20"), why: "a documentation address"},
	// Teredo carries the client's IPv4 address inverted in the last 32 bits.
	{prefix: pfx("2001::/32"), why: "a Teredo address", embedded: func(b [16]byte) netip.Addr {
		return netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
	}},
	{prefix: pfx("2002::/16"), why: "a 6to4 address", embedded: func(b [16]byte) netip.Addr {
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
	}},
	// The AWS Nitro metadata service's IPv6 endpoint.
	{prefix: pfx("fd00:ec2::254/128"), why: "a cloud metadata address"},
	{prefix: pfx("fc00::/7"), why: "a private address"},
	{prefix: pfx("fe80::/10"), why: "a link-local address"},
	{prefix: pfx("fec0::/10"), why: "a site-local address (deprecated)"},
	{prefix: pfx("ff00::/8"), why: "a multicast address"},
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func last32(b [16]byte) netip.Addr { return netip.AddrFrom4([4]byte(b[12:16])) }
