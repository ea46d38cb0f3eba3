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
// seller, the buyer, the operator) signs in, follows every link its
// console pages offer (to this site) and presses every form button they
// offer, once each, from a fresh load of the page. No page answers 5xx,
// no link leads to an error page, and no button the page offered answers
// with the console's error page ("That did not work", "Something went
// wrong", "Not allowed"…): a form sent incomplete answers with its own
// page and the fields' errors. Buttons that end the session (sign out,
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
	queue, seen := append([]string(nil), start...), map[string]bool{}
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
			t.Errorf("%s: %d %q %s", u, p.Status, p.ErrorTitle, p.Message)
			continue
		}
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
			queue = append(queue, l.URL)
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
		if p.Status >= 500 || p.ErrorTitle != "" {
			u, _ := url.Parse(p.URL)
			t.Errorf("%s offers %q (%s %s); pressed, it answers %d %q at %s: %s", f.page, f.Label, f.Method, f.Action, p.Status, p.ErrorTitle, u.Path, p.Message)
		}
	}
	t.Logf("%d form buttons pressed", pressed)
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
