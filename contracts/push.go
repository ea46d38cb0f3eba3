package contracts

import (
	"context"
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

// PushLimit is what one push destination may receive from all the meters
// together: deliveries in flight, and started per second (Burst at once
// after a quiet spell).
type PushLimit struct {
	Concurrency int
	PerSecond   float64
	Burst       int
}

// PushGate is the state the meters of a deployment share about push
// destinations (contracts/redis), so that together they keep each
// destination's caps, and all leave alone a destination that asked one of
// them to wait or that one of them paused. Times are the meters' clocks.
type PushGate interface {
	// TryStart takes a slot of dest for delivery id, held until
	// leaseUntil (or Finish), if fewer than lim.Concurrency are held and
	// lim's rate has a start left. Otherwise ok is false and retryAt says
	// when to try again: the end of a hold or the next start of the rate;
	// zero when only a Finish frees a slot. held tells a hold (Hold)
	// apart.
	TryStart(ctx context.Context, dest, id string, lim PushLimit, now, leaseUntil time.Time) (ok, held bool, retryAt time.Time, err error)
	// Finish gives back delivery id's slot of dest.
	Finish(ctx context.Context, dest, id string) error
	// Hold keeps every meter off dest until until (a later hold wins).
	Hold(ctx context.Context, dest string, until time.Time) error
}
