package main

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTrustedProxies (issue 28): the per-address limit of anonymous
// catalog reads counts the client behind a trusted load balancer by the
// rightmost X-Forwarded-For address the balancers did not write; without
// AGENTMARKET_TRUSTED_PROXIES (or from a peer not in it) the header is
// never believed, so a client cannot dodge the limit by writing one; IPv6
// clients count per /64.
func TestTrustedProxies(t *testing.T) {
	const limit = 3
	// The counts are per minute: start clear of the minute's end.
	if s := time.Now().Second(); s >= 45 {
		time.Sleep(time.Duration(61-s) * time.Second)
	}
	read := func(t *testing.T, base, xff string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", base+"/api/v1/listings", nil)
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	expect := func(t *testing.T, base, xff string, want int) {
		t.Helper()
		if got := read(t, base, xff); got != want {
			t.Errorf("GET with X-Forwarded-For %q = %d, want %d", xff, got, want)
		}
	}

	t.Run("untrusted peer", func(t *testing.T) {
		// The test's connections come from 127.0.0.1, not a trusted proxy.
		m := startMarketplace(t, map[string]string{"AGENTMARKET_ANONYMOUS_READS_PER_MINUTE": "3", "AGENTMARKET_TRUSTED_PROXIES": "10.0.0.0/8"})
		for i := range limit {
			expect(t, m.URL, "198.51.100."+string(rune('1'+i)), http.StatusOK)
		}
		expect(t, m.URL, "198.51.100.9", http.StatusTooManyRequests)
	})

	t.Run("trusted chain", func(t *testing.T) {
		m := startMarketplace(t, map[string]string{"AGENTMARKET_ANONYMOUS_READS_PER_MINUTE": "3", "AGENTMARKET_TRUSTED_PROXIES": "127.0.0.0/8, 10.0.0.0/8"})
		for range limit {
			expect(t, m.URL, "198.51.100.7, 10.0.0.2", http.StatusOK)
		}
		expect(t, m.URL, "198.51.100.7", http.StatusTooManyRequests)
		// What the client writes left of its own address changes nothing.
		expect(t, m.URL, "203.0.113.1, 198.51.100.7, 10.0.0.2", http.StatusTooManyRequests)
		// Another client behind the same balancer has its own count, as
		// has the balancer itself (no header).
		expect(t, m.URL, "198.51.100.8, 10.0.0.2", http.StatusOK)
		expect(t, m.URL, "", http.StatusOK)

		// IPv6: one /64 is one client.
		for i := range limit {
			expect(t, m.URL, "2001:db8:1:2::"+string(rune('a'+i)), http.StatusOK)
		}
		expect(t, m.URL, "2001:db8:1:2:ffff::1", http.StatusTooManyRequests)
		expect(t, m.URL, "2001:db8:1:3::a", http.StatusOK)

		// The audit log records the client's own address, not the
		// balancer's (nor its /64), and a forwarded port is no address.
		api := client{t: t, base: m.URL}
		req, _ := http.NewRequest("POST", m.URL+"/api/v1/signup", strings.NewReader(`{"org_name":"Initech","email":"it@initech.example","password":"correct horse battery"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-For", "[2001:db8:1:2::77]:41234, 10.0.0.2")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("signup = %d", res.StatusCode)
		}
		es := auditEntries(t, api.with(operatorKey(t, m)), "?action=org.create")
		var ips []string
		for _, e := range es {
			ip, _ := e["actor"].(map[string]any)["ip"].(string)
			ips = append(ips, ip)
		}
		if !slices.Contains(ips, "2001:db8:1:2::77") {
			t.Errorf("the sign-up's audit entries record the addresses %q, want 2001:db8:1:2::77", ips)
		}
	})
}
