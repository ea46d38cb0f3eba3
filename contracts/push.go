package contracts

import (
	"net"
	"net/url"
	"strings"
)

// Destination names the webhook server a push URL reaches: its scheme,
// host and port ("https://hooks.example.com:443"), lower case, the
// default port written out. The meter's caps (concurrency, rate,
// Retry-After, pauses) are per destination: every config, task and org
// whose webhook is on one server shares them. "" for a URL that does not
// parse.
func Destination(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return ""
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}
