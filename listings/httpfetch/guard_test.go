package httpfetch_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings/httpfetch"
	"github.com/agentmarket/agentmarket/listings/httpfetch/httpfetchtest"
)

// Addresses here are only checked, never dialled.
func TestGuardCheck(t *testing.T) {
	tests := []struct {
		addr  string
		allow string
		want  string // the refusal message; "" means allowed
	}{
		// Public unicast passes.
		{addr: "8.8.8.8"},
		{addr: "1.1.1.1"},
		{addr: "11.0.0.1"},
		{addr: "172.15.255.255"},
		{addr: "172.32.0.1"},
		{addr: "100.63.255.255"},
		{addr: "100.128.0.1"},
		{addr: "169.255.0.1"},
		{addr: "192.169.0.1"},
		{addr: "223.255.255.254"},
		{addr: "2001:4860:4860::8888"},
		{addr: "2606:4700::1111"},
		{addr: "::ffff:8.8.8.8"},
		{addr: "64:ff9b::808:808"},         // NAT64 of 8.8.8.8
		{addr: "2002:808:808::1"},          // 6to4 of 8.8.8.8
		{addr: "2001:0:0:0:0:0:f7f7:f7f7"}, // Teredo client 8.8.8.8

		// IPv4 special-purpose ranges.
		{addr: "10.0.0.1", want: "10.0.0.1 is a private address"},
		{addr: "10.255.255.255", want: "10.255.255.255 is a private address"},
		{addr: "172.16.0.1", want: "172.16.0.1 is a private address"},
		{addr: "172.31.255.255", want: "172.31.255.255 is a private address"},
		{addr: "192.168.1.1", want: "192.168.1.1 is a private address"},
		{addr: "127.0.0.1", want: "127.0.0.1 is a loopback address"},
		{addr: "127.255.255.254", want: "127.255.255.254 is a loopback address"},
		{addr: "0.0.0.0", want: "0.0.0.0 is the unspecified address"},
		{addr: "0.1.2.3", want: `0.1.2.3 is a "this network" address`},
		{addr: "169.254.169.254", want: "169.254.169.254 is a cloud metadata address"},
		{addr: "169.254.0.1", want: "169.254.0.1 is a link-local address"},
		{addr: "100.100.100.200", want: "100.100.100.200 is a cloud metadata address"},
		{addr: "168.63.129.16", want: "168.63.129.16 is a cloud metadata address"},
		{addr: "100.64.0.1", want: "100.64.0.1 is a shared (carrier-grade NAT) address"},
		{addr: "100.127.255.255", want: "100.127.255.255 is a shared (carrier-grade NAT) address"},
		{addr: "192.0.0.8", want: "192.0.0.8 is an IETF protocol assignment address"},
		{addr: "192.0.2.1", want: "192.0.2.1 is a documentation address"},
		{addr: "198.18.0.1", want: "198.18.0.1 is a benchmarking address"},
		{addr: "224.0.0.1", want: "224.0.0.1 is a multicast address"},
		{addr: "239.255.255.250", want: "239.255.255.250 is a multicast address"},
		{addr: "255.255.255.255", want: "255.255.255.255 is the broadcast address"},
		{addr: "240.0.0.1", want: "240.0.0.1 is a reserved address"},

		// IPv6 special-purpose ranges.
		{addr: "::", want: ":: is the unspecified address"},
		{addr: "::1", want: "::1 is a loopback address"},
		{addr: "fc00::1", want: "fc00::1 is a private address"},
		{addr: "fd12:3456::1", want: "fd12:3456::1 is a private address"},
		{addr: "fd00:ec2::254", want: "fd00:ec2::254 is a cloud metadata address"},
		{addr: "fe80::1", want: "fe80::1 is a link-local address"},
		{addr: "fe80::1%eth0", want: "fe80::1%eth0 is a link-local address"},
		{addr: "fec0::1", want: "fec0::1 is a site-local address (deprecated)"},
		{addr: "ff02::1", want: "ff02::1 is a multicast address"},
		{addr: "2001:db8::1", want: "2001:db8::1 is a documentation address"},
		{addr: "100::1", want: "100::1 is a discard-only address"},
		{addr: "::10.0.0.1", want: "::a00:1 is an IPv4-compatible address (deprecated)"},
		{addr: "64:ff9b:1::1", want: "64:ff9b:1::1 is a local-use NAT64 address"},
		{addr: "4000::1", want: "4000::1 is a reserved address (outside 2000::/3)"},

		// IPv4 inside IPv6.
		{addr: "::ffff:10.0.0.1", want: "::ffff:10.0.0.1 is an IPv4-mapped address of 10.0.0.1, which is a private address"},
		{addr: "::ffff:127.0.0.1", want: "::ffff:127.0.0.1 is an IPv4-mapped address of 127.0.0.1, which is a loopback address"},
		{addr: "::ffff:169.254.169.254", want: "::ffff:169.254.169.254 is an IPv4-mapped address of 169.254.169.254, which is a cloud metadata address"},
		{addr: "64:ff9b::a00:1", want: "64:ff9b::a00:1 is a NAT64 address embedding 10.0.0.1, which is a private address"},
		{addr: "64:ff9b::a9fe:a9fe", want: "64:ff9b::a9fe:a9fe is a NAT64 address embedding 169.254.169.254, which is a cloud metadata address"},
		{addr: "2002:7f00:1::", want: "2002:7f00:1:: is a 6to4 address embedding 127.0.0.1, which is a loopback address"},
		{addr: "2002:a00:1::1", want: "2002:a00:1::1 is a 6to4 address embedding 10.0.0.1, which is a private address"},
		{addr: "2001:0:4136:e378:8000:63bf:f5ff:fffe", want: "2001:0:4136:e378:8000:63bf:f5ff:fffe is a Teredo address embedding 10.0.0.1, which is a private address"},

		// Allow overrides the rules, and only for what it covers.
		{addr: "127.0.0.1", allow: "127.0.0.0/8"},
		{addr: "::ffff:127.0.0.1", allow: "127.0.0.0/8"},
		{addr: "::1", allow: "127.0.0.0/8", want: "::1 is a loopback address"},
		{addr: "10.0.0.1", allow: "127.0.0.0/8", want: "10.0.0.1 is a private address"},
		{addr: "10.0.0.1", allow: "10.0.0.0/8"},
		{addr: "64:ff9b::a00:1", allow: "10.0.0.0/8"},
		{addr: "10.0.0.1", allow: "::ffff:10.0.0.0/104"},
		{addr: "169.254.169.254", allow: "169.254.169.254"},
		{addr: "169.254.169.253", allow: "169.254.169.254", want: "169.254.169.253 is a link-local address"},
		{addr: "fe80::1%eth0", allow: "fe80::/10"},
		{addr: "192.168.1.1", allow: "10.0.0.0/8, 192.168.0.0/16"},
	}
	for _, tt := range tests {
		t.Run(tt.addr+"/allow="+tt.allow, func(t *testing.T) {
			allow, err := httpfetch.ParseCIDRs(tt.allow)
			if err != nil {
				t.Fatal(err)
			}
			err = httpfetch.Guard{Allow: allow}.Check(netip.MustParseAddr(tt.addr))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Check(%s) = %v, want allowed", tt.addr, err)
				}
				return
			}
			var e *agentmarket.Error
			if !errors.As(err, &e) {
				t.Fatalf("Check(%s) = %v, want *agentmarket.Error", tt.addr, err)
			}
			if e.Kind != agentmarket.Invalid || e.Code != "url_refused" || e.Message != tt.want {
				t.Errorf("Check(%s) = %s/%s %q, want invalid/url_refused %q", tt.addr, e.Kind, e.Code, e.Message, tt.want)
			}
		})
	}
}

func TestGuardCheckInvalidAddr(t *testing.T) {
	if err := (httpfetch.Guard{}).Check(netip.Addr{}); agentmarket.CodeOf(err) != "url_refused" {
		t.Errorf("Check(zero Addr) = %v, want url_refused", err)
	}
}

// Control receives numeric addresses from the dialer; none is dialled here.
func TestGuardControl(t *testing.T) {
	g := httpfetch.Guard{}
	tests := []struct {
		network, address string
		want             string // "" means allowed
	}{
		{"tcp4", "8.8.8.8:443", ""},
		{"tcp6", "[2001:4860:4860::8888]:443", ""},
		{"tcp4", "10.0.0.1:80", "10.0.0.1 is a private address"},
		{"tcp4", "169.254.169.254:80", "169.254.169.254 is a cloud metadata address"},
		{"tcp6", "[::1]:8080", "::1 is a loopback address"},
		{"tcp6", "[fe80::1%eth0]:80", "fe80::1%eth0 is a link-local address"},
		{"tcp6", "[::ffff:10.0.0.1]:80", "::ffff:10.0.0.1 is an IPv4-mapped address of 10.0.0.1, which is a private address"},
		{"unix", "/run/docker.sock", `unix address "/run/docker.sock" is not an IP address and port`},
		{"tcp", "example.com:80", `tcp address "example.com:80" is not an IP address and port`},
	}
	for _, tt := range tests {
		err := g.Control(tt.network, tt.address, nil)
		got := ""
		if err != nil {
			var e *agentmarket.Error
			if !errors.As(err, &e) || e.Code != "url_refused" {
				t.Errorf("Control(%s, %s) = %v, want url_refused", tt.network, tt.address, err)
				continue
			}
			got = e.Message
		}
		if got != tt.want {
			t.Errorf("Control(%s, %s) refused with %q, want %q", tt.network, tt.address, got, tt.want)
		}
	}
}

// TestGuardDialContext dials names through the in-memory resolver: the
// guard must judge the resolved address right before connect, and the base
// dialer's own hook must run only after the guard has passed the address.
func TestGuardDialContext(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	dns := httpfetchtest.NewDNS(map[string]string{
		"agent.test":    "127.0.0.1",
		"intranet.test": "10.0.0.1",
		"metadata.test": "169.254.169.254",
	})
	tests := []struct {
		name    string
		guard   httpfetch.Guard
		host    string
		want    string // refusal message; "" means the dial succeeds
		reached bool   // whether the base dialer's Control runs
	}{
		{"allowed loopback name", loopback(t), "agent.test", "", true},
		{"loopback name without allow", httpfetch.Guard{}, "agent.test", "127.0.0.1 is a loopback address", false},
		{"localhost without allow", httpfetch.Guard{}, "localhost", " is a loopback address", false},
		{"name resolving to private", loopback(t), "intranet.test", "10.0.0.1 is a private address", false},
		{"name resolving to metadata", loopback(t), "metadata.test", "169.254.169.254 is a cloud metadata address", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var seen []string
			safety := httpfetchtest.LoopbackOnly(t)
			base := &net.Dialer{
				Resolver: dns.Resolver(),
				// Chained after the guard: records what got past it, and
				// is the safety net that keeps the test on loopback.
				ControlContext: func(_ context.Context, network, address string, c syscall.RawConn) error {
					mu.Lock()
					seen = append(seen, address)
					mu.Unlock()
					return safety(network, address, c)
				},
			}
			conn, err := tt.guard.DialContext(base)(context.Background(), "tcp4", net.JoinHostPort(tt.host, port))
			if conn != nil {
				conn.Close()
			}
			if tt.want == "" {
				if err != nil {
					t.Fatalf("dial %s: %v", tt.host, err)
				}
			} else {
				var e *agentmarket.Error
				if !errors.As(err, &e) || e.Code != "url_refused" || !strings.Contains(e.Message, tt.want) {
					t.Fatalf("dial %s = %v, want url_refused containing %q", tt.host, err, tt.want)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if reached := len(seen) > 0; reached != tt.reached {
				t.Errorf("base Control reached = %v (with %v), want %v", reached, seen, tt.reached)
			}
		})
	}
}

// The guard must survive a base dialer that sets Control, and must not
// see later changes to the caller's Allow slice.
func TestGuardDialContextKeepsBaseControlAndFreezesAllow(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	called := false
	g := loopback(t)
	dial := g.DialContext(&net.Dialer{Control: func(network, address string, c syscall.RawConn) error {
		called = true
		return nil
	}})
	g.Allow[0] = netip.MustParsePrefix("192.0.2.0/24") // must not affect dial
	conn, err := dial(context.Background(), "tcp4", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	conn.Close()
	if !called {
		t.Error("the base dialer's Control was not called")
	}
}

func TestParseCIDRs(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string // substring naming the bad entry
	}{
		{in: "", want: nil},
		{in: "  , ", want: nil},
		{in: "127.0.0.0/8", want: []string{"127.0.0.0/8"}},
		{in: "127.0.0.1", want: []string{"127.0.0.1/32"}},
		{in: "::1", want: []string{"::1/128"}},
		{in: "10.1.2.3/8", want: []string{"10.0.0.0/8"}},
		{in: "10.0.0.0/8,192.168.0.0/16", want: []string{"10.0.0.0/8", "192.168.0.0/16"}},
		{in: " 10.0.0.0/8 ::1\tfc00::/7,, 169.254.169.254\n", want: []string{"10.0.0.0/8", "::1/128", "fc00::/7", "169.254.169.254/32"}},
		{in: "10.0.0.0/33", wantErr: `"10.0.0.0/33"`},
		{in: "localhost", wantErr: `"localhost"`},
		{in: "127.0.0.0/8,bogus", wantErr: `"bogus"`},
		{in: "127.0.0.0/8;10.0.0.0/8", wantErr: `"127.0.0.0/8;10.0.0.0/8"`},
		{in: "fe80::1%eth0", wantErr: `"fe80::1%eth0"`},
		{in: "300.0.0.1", wantErr: `"300.0.0.1"`},
	}
	for _, tt := range tests {
		got, err := httpfetch.ParseCIDRs(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseCIDRs(%q) error = %v, want one naming %s", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseCIDRs(%q): %v", tt.in, err)
			continue
		}
		var gotS []string
		for _, p := range got {
			gotS = append(gotS, p.String())
		}
		if !slices.Equal(gotS, tt.want) {
			t.Errorf("ParseCIDRs(%q) = %v, want %v", tt.in, gotS, tt.want)
		}
	}
}

// CheckHost judges what a seller typed before anything is dialled: literal
// addresses with the reason, names by every address they resolve to,
// without saying which address a refused name resolved to. A name that
// does not resolve passes: there is nothing to dial yet.
func TestGuardCheckHost(t *testing.T) {
	dns := httpfetchtest.NewDNS(map[string]string{
		"agent.test":    "127.0.0.1",
		"public.test":   "93.184.216.34",
		"intranet.test": "10.0.0.1",
		"metadata.test": "169.254.169.254",
		"mixed.test":    "93.184.216.34 192.168.1.1",
		"imds6.test":    "fd00:ec2::254",
	})
	strict := httpfetch.Guard{Resolver: dns.Resolver()}
	allowLoop := loopback(t)
	allowLoop.Resolver = dns.Resolver()
	tests := []struct {
		guard    httpfetch.Guard
		host     string
		wantCode string // "" means allowed
		wantMsg  string
	}{
		{strict, "public.test", "", ""},
		{strict, "93.184.216.34", "", ""},
		{allowLoop, "agent.test", "", ""},
		{allowLoop, "127.0.0.1", "", ""},
		{strict, "agent.test", "url_refused", `host "agent.test" resolves to an address the marketplace does not connect to`},
		{strict, "127.0.0.1", "url_refused", "127.0.0.1 is a loopback address"},
		{strict, "::1", "url_refused", "::1 is a loopback address"},
		{strict, "10.0.0.1", "url_refused", "10.0.0.1 is a private address"},
		{strict, "169.254.169.254", "url_refused", "169.254.169.254 is a cloud metadata address"},
		{allowLoop, "intranet.test", "url_refused", `host "intranet.test" resolves to an address`},
		{allowLoop, "metadata.test", "url_refused", `host "metadata.test" resolves to an address`},
		{allowLoop, "mixed.test", "url_refused", `host "mixed.test" resolves to an address`},
		{allowLoop, "imds6.test", "url_refused", `host "imds6.test" resolves to an address`},
		{strict, "localhost", "url_refused", `host "localhost" resolves to an address`},
		{strict, "nowhere.test", "", ""}, // nothing to dial now; the dialer judges it later
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			err := tt.guard.CheckHost(context.Background(), tt.host)
			if tt.wantCode == "" {
				if err != nil {
					t.Fatalf("CheckHost(%s) = %v, want allowed", tt.host, err)
				}
				return
			}
			var e *agentmarket.Error
			if !errors.As(err, &e) || e.Kind != agentmarket.Invalid || e.Code != tt.wantCode || !strings.Contains(e.Message, tt.wantMsg) {
				t.Fatalf("CheckHost(%s) = %v, want %s containing %q", tt.host, err, tt.wantCode, tt.wantMsg)
			}
			for _, leak := range []string{"10.0.0.1", "169.254", "192.168", "fd00", "127.0.0.1"} {
				if !strings.Contains(tt.host, leak) && strings.Contains(e.Message, leak) {
					t.Errorf("message %q tells what %s resolved to", e.Message, tt.host)
				}
			}
		})
	}
}

// A guard's Resolver also resolves for the dialers it returns whose base
// has none: the check and the connect see the same names.
func TestGuardDialContextUsesItsResolver(t *testing.T) {
	dns := httpfetchtest.NewDNS(map[string]string{"intranet.test": "10.0.0.1"})
	g := httpfetch.Guard{Resolver: dns.Resolver()}
	dial := g.DialContext(&net.Dialer{Control: httpfetchtest.LoopbackOnly(t)})
	_, err := dial(context.Background(), "tcp", "intranet.test:80")
	var e *agentmarket.Error
	if !errors.As(err, &e) || e.Code != "url_refused" || !strings.Contains(e.Message, "10.0.0.1 is a private address") {
		t.Fatalf("dial intranet.test = %v, want the guard's refusal of 10.0.0.1", err)
	}
}
