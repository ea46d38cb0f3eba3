package web

import "testing"

// TestLocalPath: a ?next= target stays on this site. The classic
// open-redirect corpus, each of which some browser reads as another
// origin (or as a script), comes back as "/".
func TestLocalPath(t *testing.T) {
	keep := []string{
		"/", "/seller", "/listings/lst_1", "/finance?from=2026-01-01&to=2026-02-01", "/buyer/tasks/lst_1/task-9#top",
		"/search?q=a%20b", "/listings/caf%C3%A9",
	}
	for _, p := range keep {
		if got := localPath(p); got != p {
			t.Errorf("localPath(%q) = %q, want it kept", p, got)
		}
	}
	refuse := []string{
		"", "seller", "https://evil.example/", "http:/evil.example", "//evil.example", "///evil.example", "////evil.example/",
		"/\\evil.example", "\\\\evil.example", "/\\/evil.example", "\\/evil.example",
		"/\t/evil.example/path", "/\n/evil.example", "/\r/evil.example", "/\v/evil.example", "/\f/evil.example", "/\x00/evil.example",
		"/ /evil.example", "/\u00a0/evil.example", "/\u3000/evil.example", "\t//evil.example", " //evil.example",
		"/%2F/evil.example", "/%2f/evil.example", "/%5C/evil.example", "/%5c%5cevil.example", "/%09/evil.example", "/%0a/evil.example",
		"/%2F%2Fevil.example", "%2F%2Fevil.example", "/%", "/%zz",
		"/\uFF0F/evil.example", "/\u2215/evil.example", "/\u2044/evil.example", "/\uFF3C/evil.example", "/\uFE68/evil.example",
		"/\u202e/evil.example", "/\u200f", "/\u2066x",
		"javascript:alert(1)", "JaVaScRiPt:alert(1)", "data:text/html,x", "/x\xff", "mailto:a@b.example",
		"//evil.example@market.test", "/@evil.example", // the second stays on this site: see below
	}
	for _, p := range refuse[:len(refuse)-1] {
		if got := localPath(p); got != "/" {
			t.Errorf("localPath(%q) = %q, want /", p, got)
		}
	}
	// A path that merely looks like a user part is a path on this site.
	if got := localPath("/@evil.example"); got != "/@evil.example" {
		t.Errorf(`localPath("/@evil.example") = %q, want it kept (a path here)`, got)
	}
}
