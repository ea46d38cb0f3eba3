package httpfetch_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings/httpfetch"
)

// Traffic to any address but loopback is forbidden on the machines these
// tests run on, and an SSRF test whose guard is broken would send exactly
// such traffic. So every test that names a refused non-loopback address
// dials through one of the helpers below, which cannot leave loopback
// whatever the guard decides: DNS answers come from an in-memory resolver,
// and the last hook before connect refuses (and fails the test on) any
// non-loopback address.

// loopback is the Allow list of tests that talk to httptest servers.
func loopback(t *testing.T) httpfetch.Guard {
	t.Helper()
	allow, err := httpfetch.ParseCIDRs("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	return httpfetch.Guard{Allow: allow}
}

// loopbackOnly is a net.Dialer.Control that lets only loopback through. It
// runs after the guard (see Guard.DialContext), so it is reached with a
// non-loopback address only if the guard is broken; it then fails the test
// and refuses the connect, so that no packet is ever sent. (It runs on the
// dialer's goroutine, hence Errorf rather than Fatalf.)
func loopbackOnly(t *testing.T) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !ap.Addr().Unmap().IsLoopback() {
			t.Errorf("the guard let a dial to %s %s through", network, address)
			return errors.New("test safety net: refusing to connect outside loopback")
		}
		return nil
	}
}

// guardedTransport dials through g, resolving names with dns, and never
// connects outside loopback.
func guardedTransport(t *testing.T, g httpfetch.Guard, dns *fakeDNS) *http.Transport {
	tr := &http.Transport{
		DialContext: g.DialContext(&net.Dialer{Resolver: dns.resolver(), Control: loopbackOnly(t)}),
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// noDialTransport fails the test if anything is dialled at all: for URLs
// the fetcher must refuse before any dial.
func noDialTransport(t *testing.T) *http.Transport {
	return &http.Transport{
		DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
			t.Errorf("dialled %s %s; the fetcher should have refused the URL up front", network, addr)
			return nil, errors.New("test: dialling is not allowed here")
		},
	}
}

// fakeDNS is a resolver that answers from a map over in-memory pipes: no
// query ever reaches the machine's (non-loopback) name server.
type fakeDNS struct {
	hosts map[string][]netip.Addr
}

func newFakeDNS(hosts map[string]string) *fakeDNS {
	d := &fakeDNS{hosts: map[string][]netip.Addr{}}
	for name, addrs := range hosts {
		for _, a := range strings.Fields(addrs) {
			d.hosts[name] = append(d.hosts[name], netip.MustParseAddr(a))
		}
	}
	return d
}

func (d *fakeDNS) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: d.dial}
}

// dial ignores the configured server: a net.Conn that is not a PacketConn
// makes the Go resolver speak DNS over TCP framing on it.
func (d *fakeDNS) dial(context.Context, string, string) (net.Conn, error) {
	client, server := net.Pipe()
	go d.serve(server)
	return client, nil
}

func (d *fakeDNS) serve(c net.Conn) {
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
func (d *fakeDNS) answer(q []byte) []byte {
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
	addrs, known := d.hosts[strings.ToLower(strings.Join(labels, "."))]

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

// server is an httptest server on loopback that counts its requests.
type server struct {
	*httptest.Server
	mu   sync.Mutex
	hits []string
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits = append(s.hits, r.URL.Path)
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.hits...)
}

// wantFetchError checks that err is the fetcher's field-level error with
// the given code and a message containing each of parts.
func wantFetchError(t *testing.T, err error, code string, parts ...string) {
	t.Helper()
	var e *agentmarket.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want *agentmarket.Error %s", err, err, code)
	}
	if e.Kind != agentmarket.Invalid || e.Code != code {
		t.Fatalf("err = %s/%s %q, want %s/%s", e.Kind, e.Code, e.Message, agentmarket.Invalid, code)
	}
	if len(e.Fields) != 1 || e.Fields[0].Field != "card_url" || e.Fields[0].Rule == "" || e.Fields[0].Message != e.Message {
		t.Errorf("Fields = %+v, want one card_url field error carrying the message", e.Fields)
	}
	for _, p := range parts {
		if !strings.Contains(e.Message, p) {
			t.Errorf("message %q does not contain %q", e.Message, p)
		}
	}
}
