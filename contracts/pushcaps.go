package contracts

import (
	"context"
	"math"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket"
)

// PushCaps are a buyer org's own caps for its push deliveries to one
// destination (a webhook server, Destination), lower than the
// destination's: deliveries in flight at once (MaxInFlight) and started
// per second (PerSecond); 0 leaves the destination's. They bind the
// org's deliveries there, whichever task or config they are of, and no
// one else's: they can only lower what the operator set for the
// destination (an operator alone raises a destination's caps).
type PushCaps struct {
	OrgID       string
	Destination string
	MaxInFlight int
	PerSecond   float64
	UpdatedAt   time.Time
}

// Effective are the caps the org's deliveries to c.Destination get:
// the lower of c and the destination's caps (dest, complete).
func (c PushCaps) Effective(dest PushLimit) PushCaps {
	if c.MaxInFlight <= 0 || c.MaxInFlight > dest.Concurrency {
		c.MaxInFlight = dest.Concurrency
	}
	if c.PerSecond <= 0 || c.PerSecond > dest.PerSecond {
		c.PerSecond = dest.PerSecond
	}
	return c
}

// PushCapsStore keeps the orgs' own push caps.
type PushCapsStore interface {
	// SavePushCaps creates or replaces the org's caps for the destination.
	SavePushCaps(ctx context.Context, c PushCaps) error
	// PushCaps lists the org's caps, by destination.
	PushCaps(ctx context.Context, orgID string) ([]PushCaps, error)
	// DeletePushCaps removes the org's caps for the destination; NotFound
	// when it set none.
	DeletePushCaps(ctx context.Context, orgID, destination string) error
}

// PushCapsInput is how the API carries an org's own caps for the
// destination of URL (any URL on the webhook server, or the destination
// itself: "https://hooks.example.com:443").
type PushCapsInput struct {
	URL         string   `json:"url"`
	MaxInFlight *int     `json:"max_in_flight"`
	PerSecond   *float64 `json:"per_second"`
}

// Bounds of what a buyer may ask for (a destination's caps bound it
// further).
const (
	maxPushInFlight  = 10000
	maxPushPerSecond = 1e6
)

// PushCapsView is an org's own caps for a destination as the API shows
// them: what it asked for, what the destination allows, and what its
// deliveries get (the lower of the two).
type PushCapsView struct {
	Requested PushCaps
	// Destination is the destination's own caps (the operator's).
	Destination PushLimit
	Effective   PushCaps
}

// PushCapsService sets and shows an org's own push caps.
type PushCapsService struct {
	Store PushCapsStore
	// DestinationCaps are a destination's caps, defaults filled in (the
	// meter's: AGENTMARKET_PUSH_DESTINATION_*).
	DestinationCaps func(destination string) PushLimit
	Clock           agentmarket.Clock
}

func (s *PushCapsService) view(c PushCaps) PushCapsView {
	d := s.DestinationCaps(c.Destination)
	return PushCapsView{Requested: c, Destination: d, Effective: c.Effective(d)}
}

// Set saves the actor's org's caps for the destination of in.URL: at
// least one of them, each positive; one above the destination's is kept
// as asked but gives the destination's (the view says so).
func (s *PushCapsService) Set(ctx context.Context, actor agentmarket.Actor, in PushCapsInput) (PushCapsView, error) {
	var fe agentmarket.Fields
	dest := Destination(in.URL)
	if in.URL == "" || dest == "" || !(strings.HasPrefix(dest, "https://") || strings.HasPrefix(dest, "http://")) {
		fe.Add("url", "url", "url must name the webhook server: an http or https URL")
	}
	c := PushCaps{OrgID: actor.OrgID, Destination: dest, UpdatedAt: s.Clock.Now()}
	if in.MaxInFlight == nil && in.PerSecond == nil {
		fe.Add("max_in_flight", "required", "set max_in_flight, per_second or both")
	}
	if v := in.MaxInFlight; v != nil {
		if *v < 1 || *v > maxPushInFlight {
			fe.Add("max_in_flight", "range", "max_in_flight must be between 1 and %d", maxPushInFlight)
		}
		c.MaxInFlight = *v
	}
	if v := in.PerSecond; v != nil {
		if math.IsNaN(*v) || *v < 0.01 || *v > maxPushPerSecond {
			fe.Add("per_second", "range", "per_second must be between 0.01 and %g", maxPushPerSecond)
		}
		c.PerSecond = *v
	}
	if err := fe.Err("invalid_push_caps", "the push caps are not valid"); err != nil {
		return PushCapsView{}, err
	}
	if err := s.Store.SavePushCaps(ctx, c); err != nil {
		return PushCapsView{}, err
	}
	return s.view(c), nil
}

// List shows the actor's org's caps.
func (s *PushCapsService) List(ctx context.Context, actor agentmarket.Actor) ([]PushCapsView, error) {
	cs, err := s.Store.PushCaps(ctx, actor.OrgID)
	if err != nil {
		return nil, err
	}
	out := make([]PushCapsView, len(cs))
	for i, c := range cs {
		out[i] = s.view(c)
	}
	return out, nil
}

// Delete removes the actor's org's caps for the destination of url: its
// deliveries there get the destination's caps again.
func (s *PushCapsService) Delete(ctx context.Context, actor agentmarket.Actor, url string) error {
	dest := Destination(url)
	if dest == "" {
		return agentmarket.Errorf(agentmarket.NotFound, "push_caps_not_found", "no push caps for %q", url)
	}
	return s.Store.DeletePushCaps(ctx, actor.OrgID, dest)
}
