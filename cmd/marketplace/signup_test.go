package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/cmd/internal/serve"
	"github.com/agentmarket/agentmarket/contracts/smtpmail/smtptest"
)

var signupTokenRE = regexp.MustCompile(`/signup/confirm\?token=([A-Za-z0-9_-]{43})`)

// TestSignupConfirmedByMail: with a mail server configured, sign-up
// answers a registered e-mail exactly as a new one (the same status and
// bytes), and the mails then differ: the new address gets a link that
// creates the org once, within 24 hours; the registered one a note that
// its account exists. The mails go through a real SMTP conversation with
// a sink on loopback.
func TestSignupConfirmedByMail(t *testing.T) {
	databases(t, func(t *testing.T, env map[string]string, dsn string) {
		sink := smtptest.Start(t, nil)
		clock := agentmarket.NewManualClock(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
		env["AGENTMARKET_SMTP_URL"] = "smtp://mailer:s3cret@" + sink.Addr
		env["AGENTMARKET_MAIL_FROM"] = "AgentMarket <no-reply@market.test>"
		env["AGENTMARKET_PUBLIC_URL"] = "https://market.test"
		m := startMarketplaceWith(t, env, []serve.Option{serve.WithClock(clock)})
		waitOutput(t, m, "confirmed by mail, sent through smtp://"+sink.Addr)
		c := client{t: t, base: m.URL}
		signupAs := func(org, email string) response {
			return c.do("POST", "/api/v1/signup", map[string]any{"org_name": org, "email": email, "password": "correct horse battery"})
		}
		tokenOf := func(mm smtptest.Mail) string {
			t.Helper()
			found := signupTokenRE.FindStringSubmatch(mm.Text)
			if found == nil {
				t.Fatalf("no sign-up link in the mail to %v:\n%s", mm.To, mm.Text)
			}
			if !strings.Contains(mm.Text, "https://market.test/signup/confirm?token="+found[1]) {
				t.Errorf("the link does not start with the public URL:\n%s", mm.Text)
			}
			return found[1]
		}

		// A first account, made through the mail flow itself.
		first := signupAs("Acme", "owner@acme.example")
		if first.Status != 202 {
			t.Fatalf("sign-up in confirm mode = %d %s, want 202", first.Status, first.Body)
		}
		mm := sink.Next(t)
		if mm.Auth != "\x00mailer\x00s3cret" || mm.From != "no-reply@market.test" || len(mm.To) != 1 || mm.To[0] != "owner@acme.example" {
			t.Errorf("SMTP envelope: auth %q from %q to %v", mm.Auth, mm.From, mm.To)
		}
		if got := mm.Msg.Header.Get("Subject"); got != "Finish creating your AgentMarket account" {
			t.Errorf("subject %q", got)
		}
		token := tokenOf(mm)
		created := c.do("POST", "/api/v1/signup/confirm", map[string]any{"token": token, "org_name": "Acme", "password": "correct horse battery"})
		if created.Status != 201 || !strings.HasPrefix(created.str("api_key", "key"), "amk_") || created.str("user", "email") != "owner@acme.example" {
			t.Fatalf("confirm = %d %s", created.Status, created.Body)
		}
		key := created.str("api_key", "key")
		if org := c.with(key).do("GET", "/api/v1/org", nil); org.Status != 200 || org.str("name") != "Acme" || org.str("id") != created.str("org", "id") {
			t.Fatalf("the first key does not work: %d %s", org.Status, org.Body)
		}
		if again := c.do("POST", "/api/v1/signup/confirm", map[string]any{"token": token, "org_name": "Acme", "password": "correct horse battery"}); again.Status != 404 || again.code() != "signup_token_invalid" {
			t.Errorf("the link a second time = %d %s, want 404 signup_token_invalid", again.Status, again.Body)
		}
		// Only the token's hash is stored.
		if dsn == "" {
			for _, f := range []string{"agentmarket.db", "agentmarket.db-wal"} {
				if b, err := os.ReadFile(filepath.Join(m.DataDir, f)); err == nil && bytes.Contains(b, []byte(token)) {
					t.Errorf("%s holds the sign-up token in clear", f)
				}
			}
		}

		// The same answer for a registered e-mail and a new one.
		known := signupAs("Copycat", "owner@acme.example")
		fresh := signupAs("Globex", "it@globex.example")
		if known.Status != 202 || known.Status != fresh.Status || !bytes.Equal(known.Body, fresh.Body) || !bytes.Equal(known.Body, first.Body) {
			t.Fatalf("sign-up answers differ:\n  registered: %d %s\n  new:        %d %s", known.Status, known.Body, fresh.Status, fresh.Body)
		}
		mails := map[string]smtptest.Mail{}
		for range 2 {
			mm := sink.Next(t)
			mails[mm.To[0]] = mm
		}
		exists := mails["owner@acme.example"]
		if exists.Msg == nil || exists.Msg.Header.Get("Subject") != "You already have an AgentMarket account" ||
			!strings.Contains(exists.Text, "https://market.test/signin") || signupTokenRE.MatchString(exists.Text) || strings.Contains(exists.Text, "Copycat") {
			t.Errorf("the mail to the registered address: %+v", exists)
		}
		globex := tokenOf(mails["it@globex.example"])
		if r := c.do("POST", "/api/v1/signup/confirm", map[string]any{"token": globex, "org_name": "Globex", "password": "correct horse battery"}); r.Status != 201 || r.str("org", "name") != "Globex" {
			t.Fatalf("confirm Globex = %d %s", r.Status, r.Body)
		} else if k := c.with(r.str("api_key", "key")).do("GET", "/api/v1/api-keys", nil); k.Status != 200 {
			t.Errorf("Globex's first key: %d %s", k.Status, k.Body)
		}
		if r := c.do("POST", "/api/v1/signup/confirm", map[string]any{"token": "x", "org_name": "X", "password": "correct horse battery"}); r.Status != 404 {
			t.Errorf("a made-up token = %d %s", r.Status, r.Body)
		}

		// A link expires after 24 hours.
		if r := signupAs("Initech", "bill@initech.example"); r.Status != 202 {
			t.Fatalf("sign-up = %d %s", r.Status, r.Body)
		}
		late := tokenOf(sink.Next(t))
		clock.Advance(24*time.Hour + time.Second)
		if r := c.do("POST", "/api/v1/signup/confirm", map[string]any{"token": late, "org_name": "Initech", "password": "correct horse battery"}); r.Status != 404 || r.code() != "signup_token_invalid" {
			t.Errorf("an expired link = %d %s, want 404", r.Status, r.Body)
		}
	})
}

// TestSignupOpenWithoutMailServer: with no mail server the sign-up mode
// stays open, the API contract of product.md: 201 with the first key.
func TestSignupOpenWithoutMailServer(t *testing.T) {
	m := startMarketplace(t, nil)
	waitOutput(t, m, "open: an organisation is created at once")
	c := client{t: t, base: m.URL}
	signup(t, c, "Acme", "owner@acme.example")
	if r := c.do("POST", "/api/v1/signup", map[string]any{"org_name": "Copycat", "email": "owner@acme.example", "password": "correct horse battery"}); r.Status != 409 {
		t.Errorf("open mode, a taken e-mail = %d %s, want 409 (as documented)", r.Status, r.Body)
	}
}
