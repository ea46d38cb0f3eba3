package contracts

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
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

// PushPausedType is the type of a PushPausedAlert.
const PushPausedType = "push_destination_paused"

// PushPausedAlert is what an org's alert webhook (its alert settings)
// receives when a meter pauses the deliveries to one of the org's push
// destinations: every attempt there failed since FailingSince. Nothing is
// sent there until ResumeAt; then one delivery probes it, and the pause
// ends with the first success. The deliveries wait, pending (their
// last_error says so); none is lost.
type PushPausedAlert struct {
	Type         string    `json:"type"`
	ID           string    `json:"id"`
	OrgID        string    `json:"org_id"`
	Destination  string    `json:"destination"`
	FailingSince time.Time `json:"failing_since"`
	PausedAt     time.Time `json:"paused_at"`
	ResumeAt     time.Time `json:"resume_at"`
	LastError    string    `json:"last_error"`
}

// StableID is the alert's id: one per org, destination and failure
// streak, however often it is paused again meanwhile.
func (a *PushPausedAlert) StableID() string {
	h := sha256.Sum256([]byte(fmt.Sprintf("paused|%s|%s|%d", a.OrgID, a.Destination, a.FailingSince.UnixNano())))
	return "alr_" + hex.EncodeToString(h[:12])
}
