package listings

import (
	"context"
	"time"
)

// CardFetcher fetches an agent card over the network. The implementation
// (listings/httpfetch) enforces the SSRF rules, the size cap, the timeout and
// the redirect bound, and reports each breach as an *agentmarket.Error with
// a stable code.
type CardFetcher interface {
	// FetchCard fetches the card at cardURL. When cardURL has no path (or
	// only "/"), the well-known path is appended, falling back to the
	// pre-0.3 name agent.json. A non-empty etag is sent as If-None-Match;
	// a 304 answer comes back as NotModified with no body.
	FetchCard(ctx context.Context, cardURL, etag string) (*FetchedCard, error)
}

// FetchedCard is one answer of a card fetch.
type FetchedCard struct {
	URL         string // the URL the card was finally read from
	Body        []byte // the card exactly as served
	ETag        string
	NotModified bool
	FetchedAt   time.Time
}

// source is the URL the card was read from; "" for a card given inline
// (nil).
func (f *FetchedCard) source() string {
	if f == nil {
		return ""
	}
	return f.URL
}
