package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docSample reads the sample of docs/long-tasks.md (between its
// pushsample markers): the JWKS, the signature header and the body.
func docSample(t *testing.T) (jwks, signature, body string) {
	t.Helper()
	raw, err := os.ReadFile("../../../long-tasks.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok1 := strings.Cut(string(raw), "<!-- pushsample:begin -->")
	region, _, ok2 := strings.Cut(rest, "<!-- pushsample:end -->")
	blocks := regexp.MustCompile("(?s)```(?:json|text)\n(.*?)\n```").FindAllStringSubmatch(region, -1)
	if !ok1 || !ok2 || len(blocks) != 3 {
		t.Fatalf("docs/long-tasks.md lacks its sample: the JWKS, the signature header and the body between the pushsample markers")
	}
	sig, ok := strings.CutPrefix(blocks[1][1], "AgentMarket-Signature: ")
	if !ok {
		t.Fatalf("the sample's second block is not the header: %q", blocks[1][1])
	}
	return blocks[0][1], sig, blocks[2][1]
}

// TestCheckMode: the command as docs/long-tasks.md runs it, on the doc's
// sample delivery: verified as it is, refused with a byte changed, and
// refused by another org's (or another webhook's) check.
func TestCheckMode(t *testing.T) {
	sampleJWKS, sampleSignature, sampleBody := docSample(t)
	market := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, sampleJWKS) }))
	defer market.Close()
	dir := t.TempDir()
	for name, body := range map[string]string{"delivery.json": sampleBody, "changed.json": strings.Replace(sampleBody, "COMPLETED", "FAILED", 1)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const org, url = "org_7hq2kx4mzd5wa3bp", "https://hooks.globex.example/agentmarket"
	checkAs := func(org, url, file string) (int, string) {
		var out, errs strings.Builder
		code := run([]string{"-jwks", market.URL + "/api/v1/push/jwks", "-org", org, "-url", url, "-config", "cfg-1,alerts:" + org,
			"-body", filepath.Join(dir, file), "-signature", sampleSignature, "-max-skew", "-1s"}, &out, &errs)
		return code, out.String() + errs.String()
	}
	check := func(file string) (int, string) { return checkAs(org, url, file) }
	if code, out := check("delivery.json"); code != 0 || !strings.Contains(out, `"verified":true`) || !strings.Contains(out, `"task":"task-42"`) ||
		!strings.Contains(out, `"org":"`+org+`"`) {
		t.Errorf("the saved delivery: exit %d, %s", code, out)
	}
	if code, out := check("changed.json"); code != 1 || !strings.Contains(out, "NOT VERIFIED: the signature does not match the body") {
		t.Errorf("the changed delivery: exit %d, %s", code, out)
	}
	if code, out := checkAs("org_otherotherother", url, "delivery.json"); code != 1 || !strings.Contains(out, "NOT VERIFIED: the delivery is not for this webhook") {
		t.Errorf("the delivery at another org's webhook: exit %d, %s", code, out)
	}
	if code, out := checkAs(org, url+"/", "delivery.json"); code != 1 || !strings.Contains(out, "NOT VERIFIED: the delivery is not for this webhook") {
		t.Errorf("the delivery at another URL: exit %d, %s", code, out)
	}
	var errs strings.Builder
	if code := run(nil, io.Discard, &errs); code != 2 {
		t.Errorf("no arguments: exit %d", code)
	}
}
