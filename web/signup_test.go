package web_test

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/contracts"
)

// mailbox is a contracts.Mailer that keeps what it is given.
type mailbox chan contracts.Mail

func (m mailbox) Send(_ context.Context, mail contracts.Mail) error {
	m <- mail
	return nil
}

func (m mailbox) next(t *testing.T) contracts.Mail {
	t.Helper()
	select {
	case mail := <-m:
		return mail
	case <-time.After(10 * time.Second):
		t.Fatal("no mail within 10s")
		return contracts.Mail{}
	}
}

// confirmSignups switches the site's sign-up to the confirm mode, its
// mails into the returned mailbox.
func confirmSignups(t *testing.T, s *site) mailbox {
	box := make(mailbox, 8)
	s.accounts.Mails = &contracts.SignupMails{Store: s.store, Users: s.store, Mailer: box, Clock: s.clock, BaseURL: "https://market.test"}
	go s.accounts.Mails.Run(t.Context())
	return box
}

var linkRE = regexp.MustCompile(`https://market\.test(/signup/confirm\?token=[A-Za-z0-9_-]{43})`)

// TestSignupFormAnswersAlike: in the confirm mode the sign-up form shows
// the same page, with the same status, whether the e-mail already has an
// account or not; the mailed link opens a page that (only when its button
// is pressed) creates the org, signs the visitor in and shows the first
// key once; the link works once, and not after 24 hours.
func TestSignupFormAnswersAlike(t *testing.T) {
	s := newSite(t, siteOptions{})
	if _, err := s.accounts.Signup(context.Background(), contracts.SignupInput{OrgName: "Acme", Email: "owner@acme.example", Password: "correct horse battery"}); err != nil {
		t.Fatal(err)
	}
	box := confirmSignups(t, s)
	csrf := regexp.MustCompile(`name="csrf" value="[^"]+"`)
	submit := func(org, email string) page {
		b := s.browser(t)
		b.get("/signup")
		p := b.post("/signup", url.Values{"org_name": {org}, "email": {email}, "password": {"correct horse battery"}})
		p.Body = csrf.ReplaceAllString(p.Body, `name="csrf" value=""`)
		return p
	}
	known := submit("Copycat", "owner@acme.example")
	fresh := submit("Globex", "it@globex.example")
	if known.Status != http.StatusOK || known.Status != fresh.Status || known.Body != fresh.Body || known.Location != fresh.Location {
		t.Fatalf("the sign-up form answers differ:\n  registered: %d %s\n  new:        %d %s", known.Status, excerpt(known.Body), fresh.Status, excerpt(fresh.Body))
	}
	mustContain(t, fresh, "Check your mail")
	mustNotContain(t, fresh, "it@globex.example", "Globex", "already")
	wantSecurityHeaders(t, "the check-your-mail page", fresh, false)

	mails := map[string]contracts.Mail{}
	for range 2 {
		m := box.next(t)
		mails[m.To] = m
	}
	if m := mails["owner@acme.example"]; !strings.Contains(m.Text, "already exists") || linkRE.MatchString(m.Text) || strings.Contains(m.Text, "Copycat") {
		t.Errorf("the mail to the registered address: %+v (mails went to %q)", m, slices.Collect(maps.Keys(mails)))
	}
	link := linkRE.FindStringSubmatch(mails["it@globex.example"].Text)
	if link == nil {
		t.Fatalf("no link in the mail to the new address: %+v", mails["it@globex.example"])
	}

	// Opening the link creates nothing (mail scanners open links).
	b := s.browser(t)
	p := b.get(link[1])
	if p.Status != http.StatusOK || p.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("the link's page = %d, Referrer-Policy %q", p.Status, p.Header.Get("Referrer-Policy"))
	}
	mustContain(t, p, "Create my account")
	if _, err := s.store.GetUserByEmail(context.Background(), "it@globex.example"); err == nil {
		t.Fatal("opening the link created the account")
	}
	token := strings.TrimPrefix(link[1], "/signup/confirm?token=")
	p = b.post("/signup/confirm", url.Values{"token": {token}, "org_name": {"Globex"}, "password": {"correct horse battery"}})
	if p.Status != http.StatusCreated {
		t.Fatalf("confirm = %d %s", p.Status, excerpt(p.Body))
	}
	key := regexp.MustCompile(`<code id="new-key" tabindex="0">(amk_[^<]+)</code>`).FindStringSubmatch(p.Body)
	if key == nil {
		t.Fatalf("the first key is not shown: %s", excerpt(p.Body))
	}
	mustContain(t, p, "Globex", "Sign out")
	if a, err := s.accounts.Authenticate(context.Background(), key[1]); err != nil || a.Role != "admin" {
		t.Errorf("the key shown: %+v, %v", a, err)
	}
	if keys := b.get("/keys"); keys.Status != http.StatusOK || strings.Contains(keys.Body, key[1]) {
		t.Errorf("signed in after confirming: /keys = %d (the key must not be shown again)", keys.Status)
	}

	// Once only.
	o := s.browser(t)
	o.get(link[1])
	if p := o.post("/signup/confirm", url.Values{"token": {token}, "org_name": {"Globex"}, "password": {"correct horse battery"}}); p.Status != http.StatusNotFound || !strings.Contains(p.Body, "already used or expired") {
		t.Errorf("the link a second time = %d %s", p.Status, excerpt(p.Body))
	}

	// Not after 24 hours.
	submit("Initech", "bill@initech.example")
	late := linkRE.FindStringSubmatch(box.next(t).Text)
	s.clock.Advance(24*time.Hour + time.Second)
	o.get(late[1])
	if p := o.post("/signup/confirm", url.Values{"token": {strings.TrimPrefix(late[1], "/signup/confirm?token=")}, "org_name": {"Initech"}, "password": {"correct horse battery"}}); p.Status != http.StatusNotFound {
		t.Errorf("an expired link = %d %s", p.Status, excerpt(p.Body))
	}
	if _, err := s.store.GetUserByEmail(context.Background(), "bill@initech.example"); err == nil {
		t.Error("an expired link created the account")
	}
}
