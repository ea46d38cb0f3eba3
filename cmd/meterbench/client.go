package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"
)

// request is one prepared HTTP/1.1 POST, written to the wire as it is on
// every call: the load generator does no per-request formatting, like wrk.
type request struct {
	addr string // host:port, always on the loopback
	raw  []byte
	rest bool // HTTP+JSON: the answer is the result itself, not a JSON-RPC envelope
	// calls, when set, counts every call sent with this request, by
	// outcome, warm-ups and probes included (the usage check).
	calls *callCount
	// idAt are where each call writes a messageId of its own into raw
	// (stampMessageID); each connection has its own copy of raw.
	idAt []int
}

// callCount is what the meter answered, for comparison with what it
// billed.
type callCount struct {
	answered atomic.Int64 // with a result
	unknown  atomic.Int64 // no answer read (the meter may have billed it)
}

// newRequest prepares a keep-alive POST of body to target with the given
// extra headers.
func newRequest(target string, body []byte, headers map[string]string) (request, error) {
	u, err := url.Parse(target)
	if err != nil {
		return request{}, err
	}
	if u.Scheme != "http" {
		return request{}, fmt.Errorf("%s: only http:// targets", target)
	}
	if err := loopbackOnly(u.Host); err != nil {
		return request{}, err
	}
	path := u.RequestURI()
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", path, u.Host, len(body))
	for k, v := range headers {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	b.Write(body)
	return request{addr: u.Host, raw: b.Bytes(), idAt: messageIDOffsets(b.Bytes())}, nil
}

// loopbackOnly refuses any address that is not a literal loopback IP or
// localhost: this tool never sends load anywhere else.
func loopbackOnly(hostport string) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("%s: %w", hostport, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%s is not a loopback address: meterbench only sends load to 127.0.0.0/8 or ::1", host)
}

// conn is one keep-alive client connection; not safe for concurrent use.
type conn struct {
	req     request
	timeout time.Duration
	nc      net.Conn
	br      *bufio.Reader
	body    []byte
}

func newConn(req request, timeout time.Duration) *conn {
	if len(req.idAt) > 0 {
		req.raw = bytes.Clone(req.raw)
	}
	return &conn{req: req, timeout: timeout, body: make([]byte, 0, 4096)}
}

func (c *conn) close() {
	if c.nc != nil {
		c.nc.Close()
		c.nc = nil
	}
}

// errBadResponse is an answer that is not valid HTTP/1.1.
var errBadResponse = errors.New("malformed HTTP response")

// do sends the request and reads the whole answer. On an error the
// connection is closed; the next call dials again.
func (c *conn) do() (status int, body []byte, err error) {
	if c.nc == nil {
		nc, err := net.DialTimeout("tcp", c.req.addr, c.timeout)
		if err != nil {
			return 0, nil, err
		}
		c.nc = nc
		if c.br == nil {
			c.br = bufio.NewReaderSize(nc, 16<<10)
		} else {
			c.br.Reset(nc)
		}
	}
	status, body, keep, err := c.roundTrip()
	if err != nil || !keep {
		c.close()
	}
	if n := c.req.calls; n != nil {
		if err != nil {
			n.unknown.Add(1)
		} else if c.req.answered(status, body) {
			n.answered.Add(1)
		}
	}
	return status, body, err
}

func (c *conn) roundTrip() (status int, body []byte, keep bool, err error) {
	if err := c.nc.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, nil, false, err
	}
	stampMessageID(c.req.raw, c.req.idAt)
	if _, err := c.nc.Write(c.req.raw); err != nil {
		return 0, nil, false, err
	}
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, nil, false, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, nil, false, errBadResponse
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, false, errBadResponse
	}
	keep = line[7] == '1' // HTTP/1.0 closes unless told otherwise; no such server here
	length, chunked := -1, false
	for {
		h, err := c.br.ReadSlice('\n')
		if err != nil {
			return 0, nil, false, err
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return 0, nil, false, errBadResponse
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, nil, false, errBadResponse
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			if bytes.EqualFold(value, []byte("close")) {
				keep = false
			}
		}
	}
	switch {
	case chunked:
		c.body, err = readChunked(c.br, c.body[:0])
	case length >= 0:
		c.body = grow(c.body[:0], length)
		_, err = io.ReadFull(c.br, c.body)
	default:
		// No length: the body runs to the end of the connection.
		keep = false
		var b bytes.Buffer
		_, err = b.ReadFrom(c.br)
		c.body = b.Bytes()
	}
	if err != nil {
		return 0, nil, false, err
	}
	return status, c.body, keep, nil
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// readChunked reads a chunked body (RFC 9112 §7.1) onto dst.
func readChunked(br *bufio.Reader, dst []byte) ([]byte, error) {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return dst, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 32)
		if err != nil || n < 0 {
			return dst, errBadResponse
		}
		if n == 0 {
			for { // trailers, up to the empty line
				t, err := br.ReadSlice('\n')
				if err != nil {
					return dst, err
				}
				if len(bytes.TrimRight(t, "\r\n")) == 0 {
					return dst, nil
				}
			}
		}
		start := len(dst)
		dst = append(dst, make([]byte, n)...)
		if _, err := io.ReadFull(br, dst[start:]); err != nil {
			return dst, err
		}
		if _, err := br.Discard(2); err != nil {
			return dst, err
		}
	}
}
