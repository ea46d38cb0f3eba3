// Package smtptest is a mail server for tests: it listens on loopback and
// speaks just enough SMTP (EHLO or HELO, STARTTLS when given a
// certificate, AUTH PLAIN, MAIL, RCPT, DATA, RSET, NOOP, QUIT) to take
// messages, which a test then reads.
package smtptest

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"io"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"
)

// Mail is one message the sink took.
type Mail struct {
	// Auth is the AUTH PLAIN credentials, decoded ("" when none);
	// AuthOverTLS whether they came after STARTTLS.
	Auth        string
	AuthOverTLS bool
	From        string
	To          []string
	Msg         *mail.Message
	// Text is the body, quoted-printable decoded.
	Text string
}

// Sink is a running mail server.
type Sink struct {
	// Addr is its host:port on 127.0.0.1.
	Addr  string
	auths chan string // every AUTH PLAIN's credentials, taken or not
	t     testing.TB
	ln    net.Listener
	tls   *tls.Config
	mails chan Mail
	wg    sync.WaitGroup
}

// Start starts a sink that stops when the test ends; with cert it offers
// STARTTLS.
func Start(t testing.TB, cert *tls.Certificate) *Sink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Sink{Addr: ln.Addr().String(), t: t, ln: ln, mails: make(chan Mail, 16), auths: make(chan string, 16)}
	if cert != nil {
		s.tls = &tls.Config{Certificates: []tls.Certificate{*cert}}
	}
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

func (s *Sink) serve(conn net.Conn) {
	defer func() { conn.Close() }()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	r, w := bufio.NewReader(conn), bufio.NewWriter(conn)
	reply := func(lines ...string) {
		for _, l := range lines {
			w.WriteString(l + "\r\n")
		}
		w.Flush()
	}
	reply("220 sink.test ESMTP")
	var m Mail
	overTLS := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		verb, arg, _ := strings.Cut(line, " ")
		switch strings.ToUpper(verb) {
		case "EHLO":
			if s.tls != nil && !overTLS {
				reply("250-sink.test", "250-STARTTLS", "250 AUTH PLAIN")
			} else {
				reply("250-sink.test", "250-8BITMIME", "250 AUTH PLAIN")
			}
		case "HELO", "NOOP":
			reply("250 ok")
		case "STARTTLS":
			if s.tls == nil || overTLS {
				reply("502 no")
				continue
			}
			reply("220 go ahead")
			tc := tls.Server(conn, s.tls)
			if err := tc.Handshake(); err != nil {
				return
			}
			conn, overTLS = tc, true
			r, w = bufio.NewReader(tc), bufio.NewWriter(tc)
		case "AUTH":
			mech, resp, _ := strings.Cut(arg, " ")
			dec, err := base64.StdEncoding.DecodeString(resp)
			if !strings.EqualFold(mech, "PLAIN") || err != nil {
				reply("504 unsupported")
				continue
			}
			s.auths <- string(dec)
			m.Auth, m.AuthOverTLS = string(dec), overTLS
			reply("235 authenticated")
		case "MAIL":
			addr, _, _ := strings.Cut(arg[min(len(arg), len("FROM:")):], ">")
			m.From = strings.Trim(addr, "< ")
			reply("250 ok")
		case "RCPT":
			addr, _, _ := strings.Cut(arg[min(len(arg), len("TO:")):], ">")
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
				s.t.Errorf("smtp sink: the body is not quoted-printable: %v", err)
			}
			m.Msg, m.Text = msg, string(body)
			s.mails <- m
			m = Mail{Auth: m.Auth, AuthOverTLS: m.AuthOverTLS}
			reply("250 queued")
		case "RSET":
			m = Mail{Auth: m.Auth, AuthOverTLS: m.AuthOverTLS}
			reply("250 ok")
		case "QUIT":
			reply("221 bye")
			return
		default:
			reply("502 unknown command")
		}
	}
}

// Next is the next message the sink takes, within 15 s.
func (s *Sink) Next(t testing.TB) Mail {
	t.Helper()
	select {
	case m := <-s.mails:
		return m
	case <-time.After(15 * time.Second):
		t.Fatal("no mail within 15s")
		return Mail{}
	}
}

// Auths returns the AUTH PLAIN credentials seen so far, taken or not.
func (s *Sink) Auths() []string {
	var out []string
	for {
		select {
		case a := <-s.auths:
			out = append(out, a)
		default:
			return out
		}
	}
}
