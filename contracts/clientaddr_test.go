package contracts_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket/contracts"
)

// TestClientBehindTrustedProxies: X-Forwarded-For is read only from a
// trusted proxy, and then only its rightmost address that no trusted
// proxy holds (what the client wrote to the left is not believed); IPv6
// clients count per /64.
func TestClientBehindTrustedProxies(t *testing.T) {
	lb, err := contracts.ParseTrustedProxies("10.0.0.0/8, 192.0.2.1 fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		proxies contracts.TrustedProxies
		peer    string
		xff     []string
		want    string
	}{
		{"no proxies: the header is never read", nil, "203.0.113.9", []string{"198.51.100.7"}, "203.0.113.9"},
		{"spoofed from an untrusted peer", lb, "203.0.113.9", []string{"198.51.100.7"}, "203.0.113.9"},
		{"a trusted proxy", lb, "10.1.2.3", []string{"198.51.100.7"}, "198.51.100.7"},
		{"a chain of trusted proxies", lb, "10.1.2.3", []string{"198.51.100.7, 192.0.2.1", "10.9.9.9"}, "198.51.100.7"},
		{"what the client wrote is not believed", lb, "10.1.2.3", []string{"1.1.1.1, 10.0.0.1, 198.51.100.7, 10.0.0.2"}, "198.51.100.7"},
		{"a trusted proxy with no header", lb, "10.1.2.3", nil, "10.1.2.3"},
		{"every hop trusted", lb, "10.1.2.3", []string{"10.4.4.4, 10.5.5.5"}, "10.4.4.4"},
		{"garbage left of a trusted hop", lb, "10.1.2.3", []string{"not-an-ip, 10.5.5.5"}, "10.5.5.5"},
		{"an IPv4-mapped peer", lb, "::ffff:10.1.2.3", []string{"::ffff:198.51.100.7"}, "198.51.100.7"},
		{"an IPv6 proxy, an IPv6 client's /64", lb, "fd00::1", []string{"2001:db8:1:2:aaaa:bbbb:cccc:dddd"}, "2001:db8:1:2::/64"},
		{"an IPv6 peer's /64", nil, "2001:db8:1:2::99", nil, "2001:db8:1:2::/64"},
		{"a forwarded address with its port", lb, "10.1.2.3", []string{"198.51.100.7:41234"}, "198.51.100.7"},
		{"a forwarded IPv6 address with its port", lb, "10.1.2.3", []string{"[2001:db8:1:2::5]:41234"}, "2001:db8:1:2::/64"},
	} {
		got := tc.proxies.Client(netip.MustParseAddr(tc.peer), tc.xff)
		if got != tc.want {
			t.Errorf("%s: Client(%s, %q) = %s, want %s", tc.name, tc.peer, tc.xff, got, tc.want)
		}
	}
	// One /64 is one client; the next /64 another.
	if a, b := contracts.ClientKey(netip.MustParseAddr("2001:db8::1")), contracts.ClientKey(netip.MustParseAddr("2001:db8::ffff:1")); a != b {
		t.Errorf("one /64, two keys: %s %s", a, b)
	}
	if a, b := contracts.ClientKey(netip.MustParseAddr("2001:db8:0:1::1")), contracts.ClientKey(netip.MustParseAddr("2001:db8:0:2::1")); a == b {
		t.Errorf("two /64s, one key: %s", a)
	}
	for _, bad := range []string{"10.0.0.0/33", "10.0.0.x", "fe80::1%eth0", "example.com"} {
		if _, err := contracts.ParseTrustedProxies(bad); err == nil || !strings.Contains(err.Error(), "address range") {
			t.Errorf("ParseTrustedProxies(%q) = %v, want an error", bad, err)
		}
	}
}
