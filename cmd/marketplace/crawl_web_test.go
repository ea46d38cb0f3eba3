package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/agentmarket/agentmarket/web/webtest"
)

// Bounds of TestWebCrawl, per role: pages read by following links, and
// form buttons pressed.
const (
	crawlMaxPages = 60
	crawlMaxForms = 50
)

// TestWebCrawl (issue 28): in Chromium, each party of the demo (the
// buyer, the seller, the operator, then the buyer again) signs in,
// follows every link its console pages offer (to this site) and presses
// every form button they offer, once each, from a fresh load of the page.
// No page answers 5xx, no link leads to an error page, and no button the
// page offered answers with the console's error page ("That did not
// work", "Something went wrong", "Not allowed"…): a form sent incomplete
// answers with its own page and the fields' errors, and a form the page
// offers ready to send (the browser's own checks pass) is taken (no 4xx).
// No page shows the API's words, machine ids where names belong, or money
// past the cent (checkWords). Buttons that end the session (sign out,
// revoke keys) are pressed last.
func TestWebCrawl(t *testing.T) {
	env := map[string]string{"AGENTMARKET_DEMO_PORT": strconv.Itoa(demoPorts(t, 3)), "AGENTMARKET_FETCH_ALLOW_CIDRS": ""}
	m := startMarketplace(t, env, "--demo")
	waitOutput(t, m, "the operator ")
	// A task, so that the buyer's pages link to one.
	key, err := os.ReadFile(filepath.Join(m.DataDir, "demo-buyer.key"))
	if err != nil {
		t.Fatal(err)
	}
	listing := regexp.MustCompile(`Summarizer +A2A 0\.3[^:]*: \S+/a2a/(\S+)`).FindStringSubmatch(m.Output.String())
	if listing == nil {
		t.Fatalf("no demo Summarizer in the banner:\n%s", m.Output)
	}
	c := rpc{t: t, url: m.URL + "/a2a/" + listing[1], key: strings.TrimSpace(string(key))}
	if res, rerr := c.call("message/send", msg03("Summarize the quarterly report for the board", nil)); rerr != nil || get(res, "status", "state") != "completed" {
		t.Fatalf("call the demo Summarizer: %v %v", res, rerr)
	}

	roles := []struct {
		name   string
		signIn func(ctx context.Context) error
		start  string
	}{
		{"buyer", func(ctx context.Context) error { return webtest.SignIn(ctx, m.URL, demoBuyerEmail, demoPassword) }, "/buyer"},
		{"seller", func(ctx context.Context) error { return webtest.SignIn(ctx, m.URL, demoSellerEmail, demoPassword) }, "/seller"},
		{"operator", func(ctx context.Context) error { return webtest.SignInKey(ctx, m.URL, operatorKey(t, m)) }, "/operator"},
		// Once more, after the seller retired and the operator suspended
		// what their pages offered: the buyer's subscriptions to listings
		// that left the catalog.
		{"buyer-after", func(ctx context.Context) error { return webtest.SignIn(ctx, m.URL, demoBuyerEmail, demoPassword) }, "/buyer"},
	}
	for _, role := range roles {
		t.Run(role.name, func(t *testing.T) {
			b := newBrowser(t)
			b.must("sign in", role.signIn(b.ctx))
			forms := crawlLinks(t, b, m.URL, []string{m.URL + "/", m.URL + role.start})
			pressForms(t, b, forms, func() error { return role.signIn(b.ctx) })
		})
	}
}

// crawlForm is a button to press and the page that offers it.
type crawlForm struct {
	webtest.Form
	page string
}

// crawlLinks reads the pages reachable from start by links, at most
// crawlMaxPages, failing on an error page or a 5xx; it returns the form
// buttons they offer, each once.
func crawlLinks(t *testing.T, b *browser, base string, start []string) []crawlForm {
	t.Helper()
	queue, seen, from := append([]string(nil), start...), map[string]bool{}, map[string]string{}
	for _, u := range start {
		seen[pageKind(u)] = true
	}
	var forms []crawlForm
	offered := map[string]bool{}
	pages := 0
	for len(queue) > 0 && pages < crawlMaxPages {
		u := queue[0]
		queue = queue[1:]
		b.must("load "+u, webtest.Load(b.ctx, u))
		p, err := webtest.ReadPage(b.ctx)
		b.must("read "+u, err)
		pages++
		if p.Status >= 500 || p.ErrorTitle != "" {
			t.Errorf("%s (a link of %s): %d %q %s", u, from[u], p.Status, p.ErrorTitle, p.Message)
			continue
		}
		checkWords(t, u, p.Text)
		for _, l := range p.Links {
			if seen[pageKind(l.URL)] || !strings.HasPrefix(l.URL, base+"/") || strings.HasPrefix(l.URL, base+"/a2a/") {
				continue
			}
			seen[pageKind(l.URL)] = true
			if l.Download {
				status, err := webtest.FetchStatus(b.ctx, l.URL)
				if err != nil || status >= 400 {
					t.Errorf("%s offers %s, which answers %d (%v)", u, l.URL, status, err)
				}
				continue
			}
			queue, from[l.URL] = append(queue, l.URL), u
		}
		for _, f := range p.Forms {
			path := strings.TrimPrefix(f.Action, base)
			if offered[f.Key] || path == "/signout" || strings.HasPrefix(path, "/signin") || path == "/signup" {
				continue
			}
			offered[f.Key] = true
			forms = append(forms, crawlForm{Form: f, page: u})
		}
	}
	t.Logf("%d pages read (%d more not), %d form buttons found", pages, len(queue), len(forms))
	if len(queue) > 0 {
		t.Errorf("%d pages left unread past the crawl's bound of %d: raise it", len(queue), crawlMaxPages)
	}
	return forms
}

var digits = regexp.MustCompile(`[0-9]+`)

// pageKind is u with the digits of its query's values blanked: the
// months before and after a month (and the pages of a list) are one kind
// of page, read once, while tabs (?status=published) are each their own.
func pageKind(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	q := p.Query()
	for k, vs := range q {
		for i, v := range vs {
			vs[i] = digits.ReplaceAllString(v, "9")
		}
		q[k] = vs
	}
	p.RawQuery = q.Encode()
	return p.String()
}

// pressForms presses each button from a fresh load of its page (when the
// page still offers it), at most crawlMaxForms; those that revoke go last.
func pressForms(t *testing.T, b *browser, forms []crawlForm, signIn func() error) {
	t.Helper()
	sort.SliceStable(forms, func(i, j int) bool {
		return !strings.Contains(forms[i].Action, "/revoke") && strings.Contains(forms[j].Action, "/revoke")
	})
	pressed := 0
	for _, f := range forms {
		if pressed == crawlMaxForms {
			break
		}
		b.must("load "+f.page, webtest.Load(b.ctx, f.page))
		if p, _ := webtest.ReadPage(b.ctx); !signedIn(p) {
			b.must("sign in again", signIn())
			b.must("load "+f.page, webtest.Load(b.ctx, f.page))
		}
		found, err := webtest.Press(b.ctx, f.Form)
		b.must("press "+f.Key, err)
		if !found {
			continue // an earlier button changed what the page offers
		}
		pressed++
		p, err := webtest.ReadPage(b.ctx)
		b.must("read the answer to "+f.Key, err)
		u, _ := url.Parse(p.URL)
		switch {
		case p.Status >= 500 || p.ErrorTitle != "":
			t.Errorf("%s offers %q (%s %s); pressed, it answers %d %q at %s: %s", f.page, f.Label, f.Method, f.Action, p.Status, p.ErrorTitle, u.Path, p.Message)
		case f.Ready && p.Status >= 400:
			// Sent as the page offered it, with its own values: the
			// server must take it.
			t.Errorf("%s offers %q (%s %s) ready to send; sent, it answers %d at %s", f.page, f.Label, f.Method, f.Action, p.Status, u.Path)
		}
		checkWords(t, f.page+" after "+f.Label, p.Text)
	}
	t.Logf("%d form buttons pressed", pressed)
	if pressed == crawlMaxForms {
		t.Errorf("the crawl stopped at its bound of %d buttons pressed: raise it", crawlMaxForms)
	}
}

// What a page must not show its reader (issue 28): the API's words (its
// snake_case field names and codes), machine ids where names belong, and
// money past the cent (the exact amount is on hover, in a title).
//
// A key's first characters and an ellipsis ("amk_3fk2x9a1…") are how a
// holder recognises its key, and a price per unit ("$0.002 per task") is
// not an amount: both are left out.
var (
	apiWord   = regexp.MustCompile(`\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b`)
	machineID = regexp.MustCompile(`\b(?:alr|crm|ctr|dlv|key|ks|lst|msg|ofr|org|pcb|pnc|req|tev|use|usr)_[a-z0-9]{6,}\b`) // agentmarket.NewID's prefixes
	subCent   = regexp.MustCompile(`[$€£][0-9,]*\.[0-9]{3,}|¥[0-9,]*\.[0-9]`)
	exempt    = regexp.MustCompile(`\bamk_[a-z0-9]+…|[$€£¥][0-9,]*\.[0-9]+ (?:per |a task)`)
)

// checkWords fails the test for each such thing text (a page's, Page.Text)
// shows, once per page and kind.
func checkWords(t *testing.T, page, text string) {
	t.Helper()
	text = exempt.ReplaceAllString(text, " ")
	for _, c := range []struct {
		what string
		re   *regexp.Regexp
	}{{"a machine id", machineID}, {"an API word", apiWord}, {"money past the cent", subCent}} {
		if m := c.re.FindString(text); m != "" {
			t.Errorf("%s shows %s: %q in %q", page, c.what, m, around(text, m))
			if c.re == machineID {
				text = machineID.ReplaceAllString(text, " ") // one finding, not two
			}
		}
	}
}

// around is the line of text that holds m.
func around(text, m string) string {
	i := strings.Index(text, m)
	start := strings.LastIndexByte(text[:i], '\n') + 1
	end := strings.IndexByte(text[i:], '\n')
	if end < 0 {
		end = len(text) - i
	}
	line := text[start : i+end]
	if len(line) > 160 {
		line = line[:160] + "…"
	}
	return line
}

// signedIn reports whether p is a page of a signed-in visitor.
func signedIn(p webtest.Page) bool {
	for _, f := range p.Forms {
		if strings.HasSuffix(f.Action, "/signout") {
			return true
		}
	}
	return false
}
