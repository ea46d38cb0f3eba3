package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"io"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/cmd/internal/serve"
)

// sinkMail is one message an smtpSink took.
type sinkMail struct {
	Auth string // the AUTH PLAIN credentials, decoded
	From string
	To   []string
	Msg  *mail.Message
	Text string // the body, quoted-printable decoded
}

// smtpSink is a mail server on loopback speaking just enough SMTP (EHLO
// or HELO, AUTH PLAIN, MAIL, RCPT, DATA, RSET, NOOP, QUIT) to take the
// marketplace's mails.
type smtpSink struct {
	t     *testing.T
	ln    net.Listener
	mails chan sinkMail
	wg    sync.WaitGroup
}

func startSMTPSink(t *testing.T) *smtpSink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &smtpSink{t: t, ln: ln, mails: make(chan sinkMail, 16)}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(conn)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *smtpSink) serve(conn net.Conn) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	r, w := bufio.NewReader(conn), bufio.NewWriter(conn)
	reply := func(lines ...string) {
		for _, l := range lines {
			w.WriteString(l + "\r\n")
		}
		w.Flush()
	}
	reply("220 sink.test ESMTP")
	var m sinkMail
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		verb, arg, _ := strings.Cut(line, " ")
		switch strings.ToUpper(verb) {
		case "EHLO":
			reply("250-sink.test", "250-8BITMIME", "250 AUTH PLAIN")
		case "HELO", "NOOP":
			reply("250 ok")
		case "AUTH":
			mech, resp, _ := strings.Cut(arg, " ")
			dec, err := base64.StdEncoding.DecodeString(resp)
			if !strings.EqualFold(mech, "PLAIN") || err != nil {
				reply("504 unsupported")
				continue
			}
			m.Auth = string(dec)
			reply("235 authenticated")
		case "MAIL":
			addr, _, _ := strings.Cut(arg[len("FROM:"):], ">")
			m.From = strings.Trim(addr, "< ")
			reply("250 ok")
		case "RCPT":
			addr, _, _ := strings.Cut(arg[len("TO:"):], ">")
			m.To = append(m.To, strings.Trim(addr, "< "))
			reply("250 ok")
		case "DATA":
			reply("354 go on")
			var data bytes.Buffer
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				data.WriteString(strings.TrimPrefix(l, ".")) // dot-stuffing undone
			}
			msg, err := mail.ReadMessage(bytes.NewReader(data.Bytes()))
			if err != nil {
				s.t.Errorf("smtp sink: not a message: %v\n%s", err, data.String())
				reply("554 bad message")
				continue
			}
			body, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
			if err != nil {
				s.t.Errorf("smtp sink: body is not quoted-printable: %v", err)
			}
			m.Msg, m.Text = msg, string(body)
			s.mails <- m
			m = sinkMail{Auth: m.Auth}
			reply("250 queued")
		case "RSET":
			m = sinkMail{Auth: m.Auth}
			reply("250 ok")
		case "QUIT":
			reply("221 bye")
			return
		default:
			reply("502 unknown command")
		}
	}
}

// next is the next mail the sink takes, by a deadline.
func (s *smtpSink) next(t *testing.T) sinkMail {
	t.Helper()
	select {
	case m := <-s.mails:
		return m
	case <-time.After(15 * time.Second):
		t.Fatal("no mail within 15s")
		return sinkMail{}
	}
}

var signupTokenRE = regexp.MustCompile(`/signup/confirm\?token=([A-Za-z0-9_-]{43})`)

// TestSignupConfirmedByMail: with a mail server configured, sign-up
// answers a registered e-mail exactly as a new one (the same status and
// bytes), and the mails then differ: the new address gets a link that
// creates the org once, within 24 hours; the registered one a note that
// its account exists. The mails go through a real SMTP conversation with
// a sink on loopback.
func TestSignupConfirmedByMail(t *testing.T) {
	databases(t, func(t *testing.T, env map[string]string, dsn string) {
		sink := startSMTPSink(t)
		clock := agentmarket.NewManualClock(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
		env["AGENTMARKET_SMTP_URL"] = "smtp://mailer:s3cret@" + sink.ln.Addr().String()
		env["AGENTMARKET_MAIL_FROM"] = "AgentMarket <no-reply@market.test>"
		env["AGENTMARKET_PUBLIC_URL"] = "https://market.test"
		m := startMarketplaceWith(t, env, []serve.Option{serve.WithClock(clock)})
		waitOutput(t, m, "confirmed by mail, sent through smtp://"+sink.ln.Addr().String())
		c := client{t: t, base: m.URL}
		signupAs := func(org, email string) response {
			return c.do("POST", "/api/v1/signup", map[string]any{"org_name": org, "email": email, "password": "correct horse battery"})
		}
		tokenOf := func(mm sinkMail) string {
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
		mm := sink.next(t)
		if mm.Auth != "\x00mailer\x00s3cret" || mm.From != "no-reply@market.test" || len(mm.To) != 1 || mm.To[0] != "owner@acme.example" {
			t.Errorf("SMTP envelope: auth %q from %q to %v", mm.Auth, mm.From, mm.To)
		}
		if got := mm.Msg.Header.Get("Subject"); got != "Finish creating your AgentMarket account" {
			t.Errorf("subject %q", got)
		}
		token := tokenOf(mm)
		created := c.do("POST", "/api/v1/signup/confirm", map[string]any{"token": token})
		if created.Status != 201 || !strings.HasPrefix(created.str("api_key", "key"), "amk_") || created.str("user", "email") != "owner@acme.example" {
			t.Fatalf("confirm = %d %s", created.Status, created.Body)
		}
		key := created.str("api_key", "key")
		if org := c.with(key).do("GET", "/api/v1/org", nil); org.Status != 200 || org.str("name") != "Acme" || org.str("id") != created.str("org", "id") {
			t.Fatalf("the first key does not work: %d %s", org.Status, org.Body)
		}
		if again := c.do("POST", "/api/v1/signup/confirm", map[string]any{"token": token}); again.Status != 404 || again.code() != "signup_token_invalid" {
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
		mails := map[string]sinkMail{}
		for range 2 {
			mm := sink.next(t)
			mails[mm.To[0]] = mm
		}
		exists := mails["owner@acme.example"]
		if exists.Msg == nil || exists.Msg.Header.Get("Subject") != "You already have an AgentMarket account" ||
			!strings.Contains(exists.Text, "https://market.test/signin") || signupTokenRE.MatchString(exists.Text) || strings.Contains(exists.Text, "Copycat") {
			t.Errorf("the mail to the registered address: %+v", exists)
		}
		globex := tokenOf(mails["it@globex.example"])
		if r := c.do("POST", "/api/v1/signup/confirm", map[string]any{"token": globex}); r.Status != 201 || r.str("org", "name") != "Globex" {
			t.Fatalf("confirm Globex = %d %s", r.Status, r.Body)
		} else if k := c.with(r.str("api_key", "key")).do("GET", "/api/v1/api-keys", nil); k.Status != 200 {
			t.Errorf("Globex's first key: %d %s", k.Status, k.Body)
		}
		if r := c.do("POST", "/api/v1/signup/confirm", map[string]any{"token": "x"}); r.Status != 404 {
			t.Errorf("a made-up token = %d %s", r.Status, r.Body)
		}

		// A link expires after 24 hours.
		if r := signupAs("Initech", "bill@initech.example"); r.Status != 202 {
			t.Fatalf("sign-up = %d %s", r.Status, r.Body)
		}
		late := tokenOf(sink.next(t))
		clock.Advance(24*time.Hour + time.Second)
		if r := c.do("POST", "/api/v1/signup/confirm", map[string]any{"token": late}); r.Status != 404 || r.code() != "signup_token_invalid" {
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
