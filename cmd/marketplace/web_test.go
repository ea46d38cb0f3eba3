package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentmarket/agentmarket/cmd/internal/demoagent"
	"github.com/agentmarket/agentmarket/web/webtest"
)

// chromeOrSkip returns the Chromium to drive, skipping the test when there
// is none, unless the test script started Chromium and requires services.
func chromeOrSkip(t *testing.T) string {
	t.Helper()
	if p := webtest.ChromePath(); p != "" {
		return p
	}
	if os.Getenv("AGENTMARKET_TEST_REQUIRE_SERVICES") == "1" && strings.Contains(os.Getenv("AGENTMARKET_TEST_SERVICES"), "chromium") {
		t.Fatalf("no Chromium (%s unset, /usr/bin/chromium absent) but chromium is a required service", webtest.ChromePathEnv)
	}
	t.Skipf("no Chromium: browser test skipped (apt-get install -y chromium, or scripts/test.sh with chromium)")
	return ""
}

// TestWebUIEndToEnd drives the web UI as people would: a seller signs up
// and lists a demo agent by URL, a buyer signs up, subscribes and creates a
// key; the test calls the agent through the meter with that key, and the
// buyer's finance page shows what the call cost, as the usage API has it.
func TestWebUIEndToEnd(t *testing.T) {
	chrome := chromeOrSkip(t)
	agent := demoagent.New(demoagent.Config{Version: "0.3", ReportUsage: true, Name: "Browser Summarizer", RequireAuth: "seller-secret"})
	srv := agentServer(t, agent)
	m := startMarketplace(t, nil)
	if res, err := http.Get(m.URL + "/signin"); err != nil || res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		// Until the UI is wired into the marketplace, only a run that
		// requires every service (CI) fails here.
		if os.Getenv("AGENTMARKET_TEST_REQUIRE_SERVICES") == "1" {
			t.Fatalf("the web UI is not mounted at %s/signin (web.New(...).Mount(app)): %v %v", m.URL, res, err)
		}
		t.Skipf("the web UI is not mounted at %s/signin yet (web.New(...).Mount(app))", m.URL)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctx, stop, err := webtest.Browser(ctx, chrome, 1280, 900)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	defer func() { // before the browser stops; t.Fatal runs deferred calls too
		if t.Failed() {
			shot := filepath.Join("testdata", "failures", t.Name()+".png")
			sctx, c := context.WithTimeout(ctx, 5*time.Second)
			defer c()
			if err := webtest.Screenshot(sctx, shot); err == nil {
				t.Logf("screenshot of the page at failure: %s", shot)
			}
		}
	}()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			page, _ := chromedp.Run(ctx, chromedp.Location())
			t.Fatalf("%s (at %s): %v", what, page, err)
		}
	}
	start := time.Now()

	// The seller signs up and lists the agent by its URL, with a price plan
	// and the token the agent wants.
	must("open sign-up", webtest.Open(ctx, m.URL+"/signup"))
	must("fill sign-up", webtest.Fill(ctx, map[string]string{"#org_name": "Acme Agents", "#email": "owner@acme.example", "#password": "correct horse battery"}))
	must("sign up", webtest.Submit(ctx, `form[action="/signup"] button[type=submit]`, `p.notice`))
	must("open the listing form", webtest.Open(ctx, m.URL+"/seller/new"))
	must("fill the listing form", webtest.Fill(ctx, map[string]string{"#card_url": srv.URL + "/", "#monthly_fee": "10",
		"#input_price": "3", "#output_price": "15", "#compute_price": "3.6", "#task_price": "0.002", "#auth_value": "Bearer seller-secret"}))
	must("list the agent", webtest.Submit(ctx, `form[action="/seller/new"] button[type=submit]`, `.buy-box`))
	loc, err := chromedp.Run(ctx, chromedp.Location())
	must("read the listing's URL", err)
	listingID := strings.TrimPrefix(strings.SplitN(loc[strings.Index(loc, "/listings/"):], "?", 2)[0], "/listings/")
	notice, _ := webtest.Text(ctx, "p.notice")
	if !strings.HasPrefix(listingID, "lst_") || notice != "Your agent is listed." {
		t.Fatalf("after listing: at %s, notice %q", loc, notice)
	}
	must("sign out", webtest.SignOut(ctx, m.URL))

	// The buyer signs up, subscribes from the listing page and creates a key.
	must("open sign-up", webtest.Open(ctx, m.URL+"/signup"))
	must("fill sign-up", webtest.Fill(ctx, map[string]string{"#org_name": "Globex", "#email": "it@globex.example", "#password": "correct horse battery"}))
	must("sign up", webtest.Submit(ctx, `form[action="/signup"] button[type=submit]`, `p.notice`))
	must("open the listing", webtest.Open(ctx, m.URL+"/listings/"+listingID))
	must("subscribe", webtest.Submit(ctx, `form[action$="/subscribe"] button[type=submit]`, `[data-endpoint]`))
	endpoint, err := webtest.Text(ctx, "[data-endpoint]")
	must("read the endpoint", err)
	if want := m.URL + "/a2a/" + listingID; endpoint != want {
		t.Fatalf("endpoint shown %q, want %q", endpoint, want)
	}
	must("open keys", webtest.Open(ctx, m.URL+"/keys"))
	must("fill the key form", webtest.Fill(ctx, map[string]string{"#name": "orchestrator"}))
	must("create a key", webtest.Submit(ctx, `form[action="/keys"] button[type=submit]`, `#new-key`))
	key, err := webtest.Text(ctx, "#new-key")
	must("read the key", err)
	if !strings.HasPrefix(key, "amk_") {
		t.Fatalf("key shown %q", key)
	}

	// The orchestrator calls the agent through the meter with that key.
	res, rerr := rpc{t: t, url: endpoint, key: key}.call("message/send", msg03("Summarize the quarterly report for the board please", nil))
	if rerr != nil || get(res, "status", "state") != "completed" {
		t.Fatalf("call through the meter: %v %v", res, rerr)
	}

	// The usage API and the finance page agree on what it cost.
	api := client{t: t, base: m.URL, key: key}
	var cost int64
	deadline := time.Now().Add(15 * time.Second)
	for cost == 0 {
		r := api.do("GET", "/api/v1/usage?group_by=listing", nil)
		items, _ := r.JSON["items"].([]any)
		for _, it := range items {
			if row := it.(map[string]any); row["key"] == listingID {
				cost = int64(row["cost_micros"].(float64))
			}
		}
		if cost == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no usage for %s after 15s: %s", listingID, r.Body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	must("open finance", webtest.Open(ctx, m.URL+"/finance"))
	// To the cent, the exact cost on hover (the title).
	attr, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(fmt.Sprintf(`tr[data-key=%q] td.cost span.money`, listingID)), "title"))
	must("read the agent's exact cost", err)
	if exact, want := attr.Value, usd(cost); !attr.Exists || exact != want {
		t.Errorf("finance page's exact cost %q for the agent, usage API says %d micros (%s)", exact, cost, want)
	}
	shown, err := webtest.Text(ctx, fmt.Sprintf(`tr[data-key=%q] td.cost`, listingID))
	must("read the agent's cost", err)
	if !strings.HasPrefix(shown, "$") || strings.Count(shown, ".") != 1 || len(shown[strings.IndexByte(shown, '.')+1:]) != 2 {
		if shown != "under $0.01" {
			t.Errorf("finance page shows %q for the agent: not to the cent", shown)
		}
	}
	svg, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('svg.chart rect').length`))
	if err != nil || svg == 0 {
		t.Errorf("finance charts have no bars: %d, %v", svg, err)
	}
	t.Logf("browser flow took %s", time.Since(start).Round(time.Millisecond))
}

// usd writes micros as the UI shows dollars: at least cents, and every
// further digit the amount has.
func usd(micros int64) string {
	frac := strings.TrimRight(strconv.FormatInt(micros%1_000_000+1_000_000, 10)[1:], "0")
	for len(frac) < 2 {
		frac += "0"
	}
	whole := strconv.FormatInt(micros/1_000_000, 10)
	for i := len(whole) - 3; i > 0; i -= 3 {
		whole = whole[:i] + "," + whole[i:]
	}
	return "$" + whole + "." + frac
}
