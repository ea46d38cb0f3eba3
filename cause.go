package agentmarket

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"
)

// Cause names, in a few words safe to show anyone, why talking to a
// service (a database, ClickHouse, Stripe) failed on the network: never an
// address, a host name or a credential, which the error itself may hold.
// It returns "" when err is no network failure it can name; adapters add
// what their own drivers say (a server's error code, say).
func Cause(err error) string {
	if err == nil {
		return ""
	}
	var dnsErr *net.DNSError
	var netErr net.Error
	var certErr *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostnameErr x509.HostnameError
	var recordErr tls.RecordHeaderError
	switch {
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return "host not found"
	case errors.As(err, &dnsErr):
		return "name resolution failed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timed out"
	case errors.As(err, &certErr), errors.As(err, &unknownAuthority), errors.As(err, &hostnameErr):
		return "TLS certificate not trusted"
	case errors.As(err, &recordErr):
		return "TLS handshake failed (is the server speaking TLS?)"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return "connection closed by the server"
	}
	return ""
}
