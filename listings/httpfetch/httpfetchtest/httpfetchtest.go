// Package httpfetchtest keeps tests of the SSRF guard on loopback.
//
// Traffic to any address but loopback is forbidden on the machines the
// tests run on, and a test of the guard whose guard is broken would send
// exactly such traffic. So such tests resolve names with DNS, an in-memory
// resolver (no query reaches the machine's name server), and dial through
// Dialer, whose last hook before connect refuses (and fails the test on)
// any address outside loopback: whatever the code under test decides, no
// packet leaves the host.
package httpfetchtest

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/agentmarket/agentmarket/listings/httpfetch"
)

// DNS answers A and AAAA queries from a map it holds, NXDOMAIN for names
// it does not know. Set changes an answer, for DNS rebinding. It is safe
// for concurrent use.
type DNS struct {
	mu    sync.Mutex
	hosts map[string][]netip.Addr
}

// NewDNS returns a resolver's answers: name → space-separated addresses.
func NewDNS(hosts map[string]string) *DNS {
	d := &DNS{hosts: map[string][]netip.Addr{}}
	for name, addrs := range hosts {
		d.Set(name, addrs)
	}
	return d
}

// Set makes name resolve to addrs (space-separated) from now on.
func (d *DNS) Set(name, addrs string) {
	var out []netip.Addr
	for _, a := range strings.Fields(addrs) {
		out = append(out, netip.MustParseAddr(a))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hosts[strings.ToLower(name)] = out
}

// Resolver is a Go resolver that asks d: its connections to "the name
// server" are in-memory pipes to d. Names in /etc/hosts (localhost) are
// still answered from there.
func (d *DNS) Resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: d.dial}
}

// dial ignores the configured server: a net.Conn that is not a PacketConn
// makes the Go resolver speak DNS over TCP framing on it.
func (d *DNS) dial(context.Context, string, string) (net.Conn, error) {
	client, server := net.Pipe()
	go d.serve(server)
	return client, nil
}

func (d *DNS) serve(c net.Conn) {
	defer c.Close()
	for {
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		resp := d.answer(q)
		if resp == nil {
			return
		}
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(resp))), resp...)); err != nil {
			return
		}
	}
}

// answer builds the response to one query: A/AAAA records from the map,
// NXDOMAIN for unknown names.
func (d *DNS) answer(q []byte) []byte {
	if len(q) < 12 {
		return nil
	}
	i := 12
	var labels []string
	for i < len(q) && q[i] != 0 {
		n := int(q[i])
		if i+1+n > len(q) {
			return nil
		}
		labels = append(labels, string(q[i+1:i+1+n]))
		i += 1 + n
	}
	if i+5 > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i+1:])
	question := q[12 : i+5] // name, zero label, type, class
	d.mu.Lock()
	addrs, known := d.hosts[strings.ToLower(strings.Join(labels, "."))]
	d.mu.Unlock()

	var rdata [][]byte
	for _, a := range addrs {
		if (qtype == 1 && a.Is4()) || (qtype == 28 && a.Is6()) {
			rdata = append(rdata, a.AsSlice())
		}
	}
	var rcode byte
	if !known {
		rcode = 3 // NXDOMAIN
	}
	resp := append([]byte(nil), q[0], q[1]) // ID
	resp = append(resp, 0x85, 0x80|rcode)   // QR AA RD, RA
	resp = binary.BigEndian.AppendUint16(resp, 1)
	resp = binary.BigEndian.AppendUint16(resp, uint16(len(rdata)))
	resp = append(resp, 0, 0, 0, 0)
	resp = append(resp, question...)
	for _, rd := range rdata {
		resp = append(resp, 0xc0, 12) // pointer to the question's name
		resp = binary.BigEndian.AppendUint16(resp, qtype)
		resp = binary.BigEndian.AppendUint16(resp, 1) // IN
		resp = binary.BigEndian.AppendUint32(resp, 60)
		resp = binary.BigEndian.AppendUint16(resp, uint16(len(rd)))
		resp = append(resp, rd...)
	}
	return resp
}

// LoopbackOnly is a net.Dialer.Control that lets only loopback through.
// Under a guard (httpfetch.Guard.DialContext runs it after the guard) it
// is reached with another address only if the guard is broken; it then
// fails the test and refuses the connect, so that no packet is ever sent.
// (It runs on the dialer's goroutine, hence Errorf rather than Fatalf.)
func LoopbackOnly(t testing.TB) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !ap.Addr().Unmap().IsLoopback() {
			t.Errorf("a dial to %s %s got past the guard", network, address)
			return errors.New("test safety net: refusing to connect outside loopback")
		}
		return nil
	}
}

// Dialer is a base dialer for the code under test: names resolved by dns
// (nil: only literal addresses and /etc/hosts names resolve), nothing
// connected outside loopback.
func Dialer(t testing.TB, dns *DNS) *net.Dialer {
	if dns == nil {
		dns = NewDNS(nil)
	}
	return &net.Dialer{Resolver: dns.Resolver(), Control: LoopbackOnly(t)}
}

// Loopback is the guard of tests whose agents listen on loopback: the
// strict policy with 127.0.0.0/8 allowed (what the tests set
// AGENTMARKET_FETCH_ALLOW_CIDRS to), names resolved by dns (nil: none
// resolves, and no query leaves the process).
func Loopback(dns *DNS) httpfetch.Guard {
	if dns == nil {
		dns = NewDNS(nil)
	}
	return httpfetch.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Resolver: dns.Resolver()}
}
