package main

import (
	"net/url"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestWebSignInNextStaysOnSite signs in, in Chromium, with every target of
// the open-redirect corpus in ?next= (tabs, backslashes, encoded and
// Unicode slashes, schemes): the browser always lands on the marketplace's
// own origin, on the path given when it is one of this site's.
func TestWebSignInNextStaysOnSite(t *testing.T) {
	b := newBrowser(t)
	m := startMarketplace(t, nil)
	origin, _ := url.Parse(m.URL)
	b.signUp(m.URL, "Redirect Co", "owner@redirect.example")
	b.signOut(m.URL)
	corpus := []string{
		"/seller", "//evil.example/", "///evil.example", "/\\evil.example", "\\\\evil.example", "/\t/evil.example/x", "/\n/evil.example",
		"/%09/evil.example", "/%2F/evil.example", "/%2f%2fevil.example", "/%5C/evil.example", "/\uFF0F/evil.example", "/\u2215/evil.example",
		"https://evil.example/", "http:/evil.example", "javascript:alert(1)", " //evil.example", "/\u202e/evil.example", "//evil.example@" + origin.Host,
	}
	for _, next := range corpus {
		b.open(m.URL + "/signin?next=" + url.QueryEscape(next))
		b.fill(map[string]string{"#email": "owner@redirect.example", "#password": "correct horse battery"})
		b.submit(`form[action="/signin"] button[type=submit]`, `form[action="/signout"]`)
		loc, err := chromedp.Run(b.ctx, chromedp.Location())
		b.must("read the location", err)
		u, err := url.Parse(loc)
		if err != nil || u.Scheme != origin.Scheme || u.Host != origin.Host {
			t.Errorf("next=%q: the browser left the site for %q", next, loc)
		}
		if next == "/seller" && u.Path != "/seller" {
			t.Errorf("next=/seller: landed on %q", loc)
		}
		if next != "/seller" && u.Path != "/" {
			t.Errorf("next=%q: landed on %q, want the home page", next, loc)
		}
		b.signOut(m.URL)
	}
}
