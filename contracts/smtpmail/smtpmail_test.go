package smtpmail_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"mime"
	"net"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/smtpmail"
	"github.com/agentmarket/agentmarket/contracts/smtpmail/smtptest"
)

// certFor is a self-signed certificate for host, and a pool that trusts
// it.
func certFor(t *testing.T, host string) (*tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// to dials the sink whatever host the Sender names (a mail server's name
// on the sink's loopback address).
func to(sink *smtptest.Sink) func(ctx context.Context, network, _ string) (net.Conn, error) {
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, sink.Addr)
	}
}

var m = contracts.Mail{To: "it@globex.example", Subject: "Fünf Ä", Text: "Line one.\n.A line that starts with a dot.\n" + strings.Repeat("long ", 40) + "\n"}

// TestSendOverSTARTTLS: to a server offering STARTTLS the password goes
// only after it, and the message arrives whole (a non-ASCII subject, a
// leading dot, a line longer than 76).
func TestSendOverSTARTTLS(t *testing.T) {
	cert, pool := certFor(t, "mail.example.com")
	sink := smtptest.Start(t, cert)
	s, err := smtpmail.New("smtp://mailer:s3cret@mail.example.com:587", "AgentMarket <no-reply@market.example.com>")
	if err != nil {
		t.Fatal(err)
	}
	s.Dial, s.TLS = to(sink), &tls.Config{ServerName: "mail.example.com", RootCAs: pool}
	if err := s.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	got := sink.Next(t)
	if got.Auth != "\x00mailer\x00s3cret" || !got.AuthOverTLS || got.From != "no-reply@market.example.com" || len(got.To) != 1 || got.To[0] != m.To {
		t.Errorf("envelope: auth %q over TLS %v, from %q, to %v", got.Auth, got.AuthOverTLS, got.From, got.To)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(got.Msg.Header.Get("Subject"))
	if err != nil || subject != m.Subject || got.Text != strings.ReplaceAll(m.Text, "\n", "\r\n") {
		t.Errorf("message: subject %q (%v), body %q", subject, err, got.Text)
	}
	if from, err := mail.ParseAddress(got.Msg.Header.Get("From")); err != nil || from.Address != "no-reply@market.example.com" {
		t.Errorf("From header %q", got.Msg.Header.Get("From"))
	}
}

// TestNoPasswordInClear: a server that offers no STARTTLS, and is not
// this machine, never gets the password; the send fails, Unavailable.
func TestNoPasswordInClear(t *testing.T) {
	sink := smtptest.Start(t, nil)
	s, err := smtpmail.New("smtp://mailer:s3cret@mail.example.com:587", "no-reply@market.example.com")
	if err != nil {
		t.Fatal(err)
	}
	s.Dial = to(sink)
	if err := s.Send(context.Background(), m); err == nil || !strings.Contains(err.Error(), "mail_failed") {
		t.Errorf("send without TLS to a remote server: %v, want mail_failed", err)
	}
	if a := sink.Auths(); len(a) != 0 {
		t.Errorf("the password went in clear: %q", a)
	}
}

// TestMailboxDir: without a server, each mail is a message file only its
// owner reads.
func TestMailboxDir(t *testing.T) {
	from, _ := smtpmail.ParseFrom("AgentMarket <no-reply@localhost>")
	d := &smtpmail.Dir{Path: filepath.Join(t.TempDir(), "mailbox"), From: from}
	if err := d.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(d.Path, "*.eml"))
	if len(files) != 1 {
		t.Fatalf("files %v", files)
	}
	fi, _ := os.Stat(files[0])
	raw, _ := os.ReadFile(files[0])
	msg, err := mail.ReadMessage(strings.NewReader(string(raw)))
	if err != nil || fi.Mode().Perm() != 0o600 || msg.Header.Get("To") != "<it@globex.example>" {
		t.Errorf("mailbox file: mode %v, %v, To %q", fi.Mode().Perm(), err, msg.Header.Get("To"))
	}
}

func TestCheckURL(t *testing.T) {
	for _, ok := range []string{"smtp://mail.example.com", "smtp://u:p@mail.example.com:587", "smtps://u:p@mail.example.com"} {
		if err := smtpmail.CheckURL(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "mail.example.com:25", "http://mail.example.com", "smtp://:25", "smtp://mail.example.com:0", "smtp://mail.example.com/x", "smtp://mail.example.com?x=1"} {
		if err := smtpmail.CheckURL(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
