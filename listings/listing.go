// Package listings is the catalog: sellers list their A2A agents by card,
// with a price plan and the credentials the meter presents upstream; buyers
// search it. It owns the listing types, the rules, and the interfaces of what
// it needs (a store, a card fetcher, a sealer for secrets); adapters live in
// subpackages and only cmd/ wires them.
package listings

import (
	"context"
	"time"

	"github.com/agentmarket/agentmarket/listings/agentcard"
)

// Status is where a listing is in its life.
type Status string

const (
	StatusDraft         Status = "draft"
	StatusPendingReview Status = "pending_review"
	StatusPublished     Status = "published"
	StatusSuspended     Status = "suspended"
	StatusRetired       Status = "retired"
)

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	switch s {
	case StatusDraft, StatusPendingReview, StatusPublished, StatusSuspended, StatusRetired:
		return true
	}
	return false
}

// Health says whether the card could be read last time it was fetched.
type Health string

const (
	HealthHealthy   Health = "healthy"
	HealthUnhealthy Health = "unhealthy"
)

// Listing is one agent for sale.
type Listing struct {
	ID           string
	SellerOrgID  string
	Status       Status
	Health       Health
	HealthDetail string
	// Incident is the last time the meter withheld the agent's answer
	// because the agent misbehaved in a way that could leak one buyer's
	// data to another (it answered with a task of another organisation);
	// nil when none is recorded. It stays until the seller refreshes the
	// listing by hand (POST /api/v1/listings/{id}/refresh), having fixed the
	// agent; the periodic refresh leaves it.
	Incident *Incident
	// LostTasks counts the tasks the agent no longer knew when a buyer
	// asked about them (it answered TaskNotFound for a task the meter had
	// bound: it lost its tasks, say in a restart); nil when none. A count,
	// not an incident: it does not make the listing unhealthy, and a
	// refresh leaves it.
	LostTasks *LostTasks
	// Endpoints is what the active health checks last said of each agent
	// endpoint (health.go); empty until the first probe. UpdateListing
	// never changes it.
	Endpoints []EndpointHealth

	// CardURL is where the card is fetched from; empty for a pasted card,
	// which is then never refreshed.
	CardURL       string
	Card          *agentcard.Card
	CardJSON      []byte // the card in force, exactly as received
	CardHash      string // hex SHA-256 of CardJSON
	CardETag      string
	CardFetchedAt time.Time
	// CardSignature is what the card in force's signatures showed when
	// it was taken.
	CardSignature CardSignature
	// CardKeys is the JWKS the seller registered to verify its cards
	// with (public keys; empty: each signature's jku is fetched).
	CardKeys []byte
	// SignaturePolicy is SignaturesMark or SignaturesRequire ("" reads as
	// mark).
	SignaturePolicy SignaturePolicy

	Plan Plan // the plan version in force

	// UpstreamAuth is the sealed (encrypted) header the meter sends to the
	// agent; never returned by the API once stored.
	UpstreamAuth []byte

	// Limits override the meter's defaults for this listing.
	Limits Limits

	// AgentEndpoints are the endpoints the seller set beside the card's
	// (replicas, regions, weights; routing.go); nil: the card's preferred
	// interface alone.
	AgentEndpoints []AgentEndpoint

	RefreshInterval time.Duration // 0 disables periodic refresh
	NextRefreshAt   time.Time     // zero when refresh is disabled

	CreatedAt time.Time
	UpdatedAt time.Time
}

// Incident is a health mark the meter sets on a listing.
type Incident struct {
	At     time.Time
	Detail string
}

// LostTasks is how many tasks a listing's agent lost, and when the last.
type LostTasks struct {
	Count  int64
	LastAt time.Time
}

// Healthy reports whether the card could be read last time and no
// incident is recorded.
func (l *Listing) Healthy() bool { return l.Health == HealthHealthy && l.Incident == nil }

// HealthShown is the health to show: unhealthy while an incident is
// recorded, with the card's problem or else the incident as the detail.
func (l *Listing) HealthShown() (Health, string) {
	if l.Incident == nil {
		return l.Health, l.HealthDetail
	}
	if l.HealthDetail != "" {
		return HealthUnhealthy, l.HealthDetail
	}
	return HealthUnhealthy, l.Incident.Detail
}

// HasUpstreamAuth reports whether credentials for the agent are stored.
func (l *Listing) HasUpstreamAuth() bool { return len(l.UpstreamAuth) > 0 }

// CardVersion is one card as fetched (or pasted) at one time.
type CardVersion struct {
	ID        int64
	ListingID string
	CardHash  string
	CardJSON  []byte
	SourceURL string
	FetchedAt time.Time
	Signature CardSignature
}

// UpstreamAuth is the header the meter presents to the seller's agent.
type UpstreamAuth struct {
	Header string `json:"header"`
	Value  string `json:"value"`
}

// Store persists listings. Implementations: listings/gormstore (SQLite and
// PostgreSQL); every implementation passes listings/storetest.
type Store interface {
	// CreateListing stores a new listing with its plan and first card
	// version, and indexes the card for search, in one transaction.
	CreateListing(ctx context.Context, l *Listing, v *CardVersion) error
	// UpdateListing stores l. When v is not nil the card in force changed:
	// v is appended to the history and the search index rebuilt. A plan
	// version not yet stored is added (plan versions are never rewritten);
	// a version a private plan holds is a Conflict (plan_version_taken).
	UpdateListing(ctx context.Context, l *Listing, v *CardVersion) error
	// GetListing returns the listing, or a NotFound error.
	GetListing(ctx context.Context, id string) (*Listing, error)
	// CardVersions returns the card history, newest first.
	CardVersions(ctx context.Context, listingID string) ([]CardVersion, error)
	// Plan returns one stored plan version of a listing, public or
	// private.
	Plan(ctx context.Context, listingID string, version int) (*Plan, error)
	// NextPlanVersion is the version a new plan of the listing gets: one
	// more than any stored, public or private (a private offer's).
	NextPlanVersion(ctx context.Context, listingID string) (int, error)
	// Search returns one page of listings matching q and the total count.
	Search(ctx context.Context, q Query) ([]*Listing, int, error)
	// DueForRefresh returns up to limit listings whose NextRefreshAt is not
	// after now, oldest first.
	DueForRefresh(ctx context.Context, now time.Time, limit int) ([]*Listing, error)
	// SetIncident records (or, with nil, clears) a listing's incident;
	// UpdateListing never changes it.
	SetIncident(ctx context.Context, listingID string, inc *Incident) error
	// CountLostTask adds one to a listing's lost tasks, the last lost at
	// at; UpdateListing never changes them.
	CountLostTask(ctx context.Context, listingID string, at time.Time) error
}

// Sealer encrypts secrets at rest (listings/aesgcm). The context (a
// listing id) is bound to the sealed value: a value copied onto another
// listing's row does not open.
type Sealer interface {
	Seal(plaintext, context []byte) ([]byte, error)
	Open(sealed, context []byte) ([]byte, error)
}
