// Package smtpmail sends contracts.Mail: through an SMTP server with the
// standard library's net/smtp (Sender), or into a pickup directory of
// message files for development (Dir). Both write the same RFC 5322
// message.
package smtpmail

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

var (
	_ contracts.Mailer = (*Sender)(nil)
	_ contracts.Mailer = (*Dir)(nil)
)

// Sender sends mail through one SMTP server.
type Sender struct {
	// Addr is the server's host:port; Host its name for TLS and AUTH.
	Addr string
	Host string
	// ImplicitTLS: smtps:// (TLS from the first byte, port 465); else
	// STARTTLS whenever the server offers it.
	ImplicitTLS bool
	// User and Password authenticate with AUTH PLAIN (empty User: no
	// AUTH). net/smtp sends them only over TLS, or to localhost.
	User, Password string
	// From is the envelope sender and the From header.
	From *mail.Address
	// Timeout bounds one message's whole conversation; 0 means 30 s.
	Timeout time.Duration
	// TLS is the TLS configuration (nil: the system's roots, ServerName
	// Host); tests give their own roots.
	TLS  *tls.Config
	Now  func() time.Time
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// ParseFrom reads a From address (MAIL_FROM): "AgentMarket
// <no-reply@example.com>" or a bare address.
func ParseFrom(v string) (*mail.Address, error) {
	a, err := mail.ParseAddress(v)
	if err != nil || strings.ContainsAny(v, "\r\n") {
		return nil, errors.New("must be an e-mail address, like AgentMarket <no-reply@market.example.com>")
	}
	return a, nil
}

// CheckURL checks an SMTP URL: smtp://[user:password@]host[:port] (port
// 587 when omitted; STARTTLS when offered) or smtps://… (implicit TLS,
// port 465).
func CheckURL(v string) error {
	_, err := parseURL(v)
	return err
}

func parseURL(v string) (*Sender, error) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "smtp" && u.Scheme != "smtps") || u.Hostname() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, errors.New("must be smtp://user:password@host:port (STARTTLS when the server offers it) or smtps://… (TLS from the start)")
	}
	s := &Sender{Host: u.Hostname(), ImplicitTLS: u.Scheme == "smtps"}
	port := u.Port()
	if port == "" {
		port = "587"
		if s.ImplicitTLS {
			port = "465"
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, fmt.Errorf("port %q: must be a number from 1 to 65535", port)
	}
	s.Addr = net.JoinHostPort(s.Host, port)
	if u.User != nil {
		s.User = u.User.Username()
		s.Password, _ = u.User.Password()
	}
	return s, nil
}

// New is a Sender for an SMTP URL (CheckURL) and a From address.
func New(rawURL, from string) (*Sender, error) {
	s, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if s.From, err = ParseFrom(from); err != nil {
		return nil, err
	}
	return s, nil
}

// Where names the server without credentials.
func (s *Sender) Where() string {
	scheme := "smtp"
	if s.ImplicitTLS {
		scheme = "smtps"
	}
	return scheme + "://" + s.Addr
}

// Send sends m in one SMTP conversation: EHLO, STARTTLS when offered,
// AUTH when configured, MAIL, RCPT, DATA, QUIT.
func (s *Sender) Send(ctx context.Context, m contracts.Mail) error {
	msg, err := message(s.From, m, s.now())
	if err != nil {
		return err
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dial := s.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	conn, err := dial(ctx, "tcp", s.Addr)
	if err != nil {
		return unavailable(err)
	}
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	// The conversation's steps take no context: closing the connection
	// when ctx ends stops whichever is under way.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	tlsConfig := s.TLS
	if tlsConfig == nil {
		tlsConfig = &tls.Config{ServerName: s.Host}
	}
	if s.ImplicitTLS {
		conn = tls.Client(conn, tlsConfig)
	}
	c, err := smtp.NewClient(conn, s.Host)
	if err != nil {
		conn.Close()
		return unavailable(err)
	}
	defer c.Close()
	if err := s.converse(c, tlsConfig, m.To, msg); err != nil {
		return unavailable(err)
	}
	return nil
}

func (s *Sender) converse(c *smtp.Client, tlsConfig *tls.Config, to string, msg []byte) error {
	if err := c.Hello(helloName(s.From.Address)); err != nil {
		return err
	}
	if ok, _ := c.Extension("STARTTLS"); ok && !s.ImplicitTLS {
		if err := c.StartTLS(tlsConfig); err != nil {
			return err
		}
	}
	if s.User != "" {
		if err := c.Auth(smtp.PlainAuth("", s.User, s.Password, s.Host)); err != nil {
			return err
		}
	}
	if err := c.Mail(s.From.Address); err != nil {
		return err
	}
	if err := c.Rcpt(to); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

func (s *Sender) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// helloName is the name EHLO gives: the domain of the From address
// (servers want a name, not "localhost").
func helloName(from string) string {
	if _, domain, ok := strings.Cut(from, "@"); ok && domain != "" {
		return domain
	}
	return "localhost"
}

func unavailable(err error) error {
	return agentmarket.Wrap(agentmarket.Unavailable, "mail_failed", err, "the mail server did not take the message")
}

// message is m as an RFC 5322 message: UTF-8 text, quoted-printable, the
// subject encoded when it is not ASCII, CRLF line ends.
func message(from *mail.Address, m contracts.Mail, at time.Time) ([]byte, error) {
	to, err := mail.ParseAddress(m.To)
	if err != nil || strings.ContainsAny(m.To, "\r\n") {
		return nil, agentmarket.Errorf(agentmarket.Invalid, "mail_address", "cannot mail %q: not an e-mail address", m.To)
	}
	var id [12]byte
	rand.Read(id[:])
	var b bytes.Buffer
	header := func(k, v string) { b.WriteString(k + ": " + v + "\r\n") }
	header("From", from.String())
	header("To", to.String())
	header("Subject", mime.QEncoding.Encode("utf-8", strings.NewReplacer("\r", " ", "\n", " ").Replace(m.Subject)))
	header("Date", at.Format(time.RFC1123Z))
	header("Message-ID", "<"+hex.EncodeToString(id[:])+"@"+helloName(from.Address)+">")
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	qp.Write([]byte(strings.ReplaceAll(strings.ReplaceAll(m.Text, "\r\n", "\n"), "\n", "\r\n")))
	qp.Close()
	return b.Bytes(), nil
}

// Dir writes each mail as a message file (.eml) into a directory, for
// development and try-outs without a mail server: open the newest file to
// follow a sign-up link.
type Dir struct {
	Path string
	From *mail.Address
	Now  func() time.Time
}

// Send writes m into d.Path, readable by its owner only (a mail may hold a
// sign-up link).
func (d *Dir) Send(_ context.Context, m contracts.Mail) error {
	at := time.Now()
	if d.Now != nil {
		at = d.Now()
	}
	msg, err := message(d.From, m, at)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d.Path, 0o700); err != nil {
		return agentmarket.Wrap(agentmarket.Internal, "mailbox", err, "could not write the mail")
	}
	var r [4]byte
	rand.Read(r[:])
	name := filepath.Join(d.Path, at.UTC().Format("20060102T150405.000000000Z")+"-"+hex.EncodeToString(r[:])+".eml")
	if err := os.WriteFile(name, msg, 0o600); err != nil {
		return agentmarket.Wrap(agentmarket.Internal, "mailbox", err, "could not write the mail")
	}
	return nil
}
