package main

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// demoPorts returns the first of n consecutive loopback ports that are
// free now, for --demo-port.
func demoPorts(t *testing.T, n int) int {
	t.Helper()
	for range 50 {
		first, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := first.Addr().(*net.TCPAddr).Port
		lns := []net.Listener{first}
		for i := 1; i < n; i++ {
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+i)))
			if err != nil {
				break
			}
			lns = append(lns, ln)
		}
		for _, ln := range lns {
			ln.Close()
		}
		if len(lns) == n {
			return p
		}
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0
}

// TestDemoRestart: a listing a user made from a demo agent's URL, as the
// README's tour does, still works after the marketplace restarts on the
// same data: the demo agents come back on the same ports.
func TestDemoRestart(t *testing.T) {
	env := map[string]string{
		"AGENTMARKET_DATA_DIR":          t.TempDir(),
		"AGENTMARKET_DEMO_PORT":         strconv.Itoa(demoPorts(t, 3)),
		"AGENTMARKET_FETCH_ALLOW_CIDRS": "",
	}
	m := startMarketplace(t, env, "--demo")
	waitOutput(t, m, "the operator ")
	api := client{t: t, base: m.URL}
	_, seller := signup(t, api, "Acme Agents", "owner@acme.example")
	_, buyer := signup(t, api, "Globex", "it@globex.example")

	found := api.with(seller).do("GET", "/api/v1/listings?q=Summarizer", nil)
	agentURL := regexp.MustCompile(`"url":"(http://127\.0\.0\.1:[0-9]+/?)"`).FindSubmatch(found.Body)
	if agentURL == nil || !strings.Contains(string(agentURL[1]), ":"+env["AGENTMARKET_DEMO_PORT"]) {
		t.Fatalf("the catalog shows no demo Summarizer on port %s: %s", env["AGENTMARKET_DEMO_PORT"], found.Body)
	}
	listed := api.with(seller).do("POST", "/api/v1/listings", map[string]any{"card_url": string(agentURL[1]),
		"pricing": map[string]any{"currency": "usd", "monthly_fee_micros": 1000000}})
	listing := listed.str("id")
	if listed.Status != 201 || listing == "" {
		t.Fatalf("list the demo agent: %d %s", listed.Status, listed.Body)
	}
	if r := api.with(buyer).do("POST", "/api/v1/subscriptions", map[string]any{"listing_id": listing}); r.Status != 201 {
		t.Fatalf("subscribe: %d %s", r.Status, r.Body)
	}
	call := func(m *started) {
		t.Helper()
		c := rpc{t: t, url: m.URL + "/a2a/" + listing, key: buyer}
		if res, rerr := c.call("message/send", msg03("Summarize the quarterly report for the board", nil)); rerr != nil || get(res, "status", "state") != "completed" {
			t.Fatalf("call the user's listing of the demo agent: %v %v", res, rerr)
		}
	}
	call(m)

	m.stop(t)
	again := startMarketplace(t, env, "--demo")
	waitOutput(t, again, "the operator ")
	call(again)
}

// TestDemoPortTaken: a demo agent's port that another program holds stops
// the start with an error that names the port and the setting.
func TestDemoPortTaken(t *testing.T) {
	first := demoPorts(t, 3)
	held, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(first+1)))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	vars := map[string]string{"AGENTMARKET_ADDR": "127.0.0.1:0", "AGENTMARKET_DATA_DIR": t.TempDir(),
		"AGENTMARKET_DEMO_PORT": strconv.Itoa(first), "AGENTMARKET_LOG_LEVEL": "warn"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	err = run(ctx, []string{"--demo"}, func(k string) string { return vars[k] }, &out)
	want := fmt.Sprintf("127.0.0.1:%d is taken", first+1)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--demo-port / AGENTMARKET_DEMO_PORT") {
		t.Fatalf("run = %v, want an error saying %s and naming the setting", err, want)
	}
	// The agents that did start are stopped: their ports are free again.
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(first)))
	if err != nil {
		t.Fatalf("the first demo agent's port is still taken after the failed start: %v", err)
	}
	ln.Close()
}

// webSignin posts a sign-in form of the web UI as a browser would (with
// the CSRF token of the sign-in page) and reports whether it opened a
// session.
func webSignin(t *testing.T, base, action string, form url.Values) bool {
	t.Helper()
	return webSession(t, base, action, form) != nil
}

// webSession is webSignin's client, holding the session it opened; nil
// when none.
func webSession(t *testing.T, base, action string, form url.Values) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get(base + "/signin")
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	page.ReadFrom(res.Body)
	res.Body.Close()
	token := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page.String())
	if token == nil {
		t.Fatalf("the sign-in page has no CSRF token:\n%s", page.String())
	}
	form.Set("csrf", html.UnescapeString(token[1]))
	res, err = c.PostForm(base+action, form)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, ck := range res.Cookies() {
		if ck.Name == "am_session" && ck.Value != "" && res.StatusCode == http.StatusSeeOther {
			return c
		}
	}
	return nil
}
