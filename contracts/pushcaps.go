package contracts

import (
	"context"
	"math"
	"slices"
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

// PushConfigCaps is a buyer org's own rate for the deliveries of one of
// its push configs (listing, task, config id), lower than what its
// destination and the org's caps there allow: deliveries of the config
// start at least 1/PerSecond apart (no burst). A config's deliveries go
// one at a time already (in order), so a rate is the cap that means
// something for one config; the lowest of the config's, the org's at the
// destination and the destination's wins.
type PushConfigCaps struct {
	OrgID     string
	ListingID string
	TaskID    string
	ConfigID  string
	PerSecond float64
	// Destination is the config's destination now (Destination of its
	// URL, which a replace of the config may change): filled in by the
	// store when it lists them, never saved.
	Destination string
	UpdatedAt   time.Time
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

	// SavePushConfigCaps creates or replaces the org's caps for one of
	// its push configs (the caller checked that the config is the org's).
	SavePushConfigCaps(ctx context.Context, c PushConfigCaps) error
	// PushConfigCaps lists the org's caps of push configs that exist, by
	// listing, task and config id, each with its config's destination.
	PushConfigCaps(ctx context.Context, orgID string) ([]PushConfigCaps, error)
	// DeletePushConfigCaps removes the org's caps for the config; NotFound
	// when it set none (another org's config included).
	DeletePushConfigCaps(ctx context.Context, orgID, listingID, taskID, configID string) error
}

// PushConfigSource finds a push config (PushStore does).
type PushConfigSource interface {
	PushConfig(ctx context.Context, listingID, taskID, configID string) (*PushConfig, error)
}

// PushCapsInput is how the API carries an org's own caps: for the
// destination of URL (any URL on the webhook server, or the destination
// itself: "https://hooks.example.com:443"), or for one of its push
// configs (ListingID, TaskID and ConfigID, instead of URL: a rate only).
type PushCapsInput struct {
	URL         string   `json:"url"`
	ListingID   string   `json:"listing_id"`
	TaskID      string   `json:"task_id"`
	ConfigID    string   `json:"config_id"`
	MaxInFlight *int     `json:"max_in_flight"`
	PerSecond   *float64 `json:"per_second"`
}

// Bounds of what a buyer may ask for (a destination's caps bound it
// further), and how many of its push configs an org may cap (a meter
// reads them all, per org).
const (
	maxPushInFlight  = 10000
	maxPushPerSecond = 1e6
	minPushPerSecond = 0.01
	// MaxPushConfigCaps is how many push configs' caps an org may keep.
	MaxPushConfigCaps = 1000
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

// PushConfigCapsView is an org's own rate for one of its push configs
// as the API shows it: what it asked for, what its destination allows
// (the operator's caps, lowered by the org's own there), and what the
// config's deliveries get (the lowest).
type PushConfigCapsView struct {
	Requested   PushConfigCaps
	Destination PushLimit
	// Effective is the rate the config's deliveries get.
	Effective float64
}

// PushCapsService sets and shows an org's own push caps.
type PushCapsService struct {
	Store PushCapsStore
	// Configs finds the push configs an org caps.
	Configs PushConfigSource
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
	if in.ForConfig() {
		fe.Add("url", "exclusive", exclusiveURL)
	}
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
		perSecond(&fe, *v)
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

// ForConfig reports whether in names a push config (SetConfig) rather
// than a webhook server (Set).
func (in *PushCapsInput) ForConfig() bool {
	return in.ListingID != "" || in.TaskID != "" || in.ConfigID != ""
}

const exclusiveURL = "give url (a webhook server's caps) or listing_id, task_id and config_id (a push config's), not both: a config's caps follow its own URL"

func perSecond(fe *agentmarket.Fields, v float64) {
	if math.IsNaN(v) || v < minPushPerSecond || v > maxPushPerSecond {
		fe.Add("per_second", "range", "per_second must be between %g and %g", minPushPerSecond, maxPushPerSecond)
	}
}

// configNotFound is the answer for a push config the actor's org does not
// have: another org's is answered the same as one that does not exist.
func configNotFound(listingID, taskID, configID string) error {
	return agentmarket.Errorf(agentmarket.NotFound, "push_config_not_found", "no push config %q of task %q on listing %q", configID, taskID, listingID)
}

// SetConfig saves the actor's org's rate for one of its push configs
// (in.ListingID, in.TaskID, in.ConfigID): per_second, required; a rate
// above what its destination allows is kept as asked but gives the
// destination's (the view says so). A config of another org is NotFound,
// as one that does not exist.
func (s *PushCapsService) SetConfig(ctx context.Context, actor agentmarket.Actor, in PushCapsInput) (PushConfigCapsView, error) {
	var fe agentmarket.Fields
	for _, f := range []struct{ name, v string }{{"listing_id", in.ListingID}, {"task_id", in.TaskID}, {"config_id", in.ConfigID}} {
		if f.v == "" {
			fe.Add(f.name, "required", "%s is required to cap a push config (listing_id, task_id and config_id name it)", f.name)
		} else {
			fe.Text(f.name, f.v, 256)
		}
	}
	if in.URL != "" {
		fe.Add("url", "exclusive", exclusiveURL)
	}
	if in.MaxInFlight != nil {
		fe.Add("max_in_flight", "exclusive", "a push config's deliveries go one at a time already; cap it with per_second")
	}
	c := PushConfigCaps{OrgID: actor.OrgID, ListingID: in.ListingID, TaskID: in.TaskID, ConfigID: in.ConfigID, UpdatedAt: s.Clock.Now()}
	if in.PerSecond == nil {
		fe.Add("per_second", "required", "per_second is required to cap a push config")
	} else {
		perSecond(&fe, *in.PerSecond)
		c.PerSecond = *in.PerSecond
	}
	if err := fe.Err("invalid_push_caps", "the push caps are not valid"); err != nil {
		return PushConfigCapsView{}, err
	}
	cfg, err := s.Configs.PushConfig(ctx, c.ListingID, c.TaskID, c.ConfigID)
	if agentmarket.KindOf(err) == agentmarket.NotFound || err == nil && cfg.OrgID != actor.OrgID {
		return PushConfigCapsView{}, configNotFound(c.ListingID, c.TaskID, c.ConfigID)
	}
	if err != nil {
		return PushConfigCapsView{}, err
	}
	c.Destination = Destination(cfg.URL)
	have, err := s.Store.PushConfigCaps(ctx, actor.OrgID)
	if err != nil {
		return PushConfigCapsView{}, err
	}
	if len(have) >= MaxPushConfigCaps && !slices.ContainsFunc(have, func(h PushConfigCaps) bool {
		return h.ListingID == c.ListingID && h.TaskID == c.TaskID && h.ConfigID == c.ConfigID
	}) {
		fe.Add("config_id", "max", "an org caps at most %d push configs; remove some first (DELETE /api/v1/push-caps)", MaxPushConfigCaps)
		return PushConfigCapsView{}, fe.Err("invalid_push_caps", "the push caps are not valid")
	}
	if err := s.Store.SavePushConfigCaps(ctx, c); err != nil {
		return PushConfigCapsView{}, err
	}
	own, err := s.Store.PushCaps(ctx, actor.OrgID)
	if err != nil {
		return PushConfigCapsView{}, err
	}
	return s.configView(c, own), nil
}

// configView: the destination's caps, lowered by the org's own there.
func (s *PushCapsService) configView(c PushConfigCaps, own []PushCaps) PushConfigCapsView {
	d := s.DestinationCaps(c.Destination)
	for _, o := range own {
		if o.Destination == c.Destination {
			e := o.Effective(d)
			d.Concurrency, d.PerSecond = e.MaxInFlight, e.PerSecond
		}
	}
	return PushConfigCapsView{Requested: c, Destination: d, Effective: min(c.PerSecond, d.PerSecond)}
}

// ListConfigs shows the actor's org's push configs' caps.
func (s *PushCapsService) ListConfigs(ctx context.Context, actor agentmarket.Actor) ([]PushConfigCapsView, error) {
	cs, err := s.Store.PushConfigCaps(ctx, actor.OrgID)
	if err != nil {
		return nil, err
	}
	own, err := s.Store.PushCaps(ctx, actor.OrgID)
	if err != nil {
		return nil, err
	}
	out := make([]PushConfigCapsView, len(cs))
	for i, c := range cs {
		out[i] = s.configView(c, own)
	}
	return out, nil
}

// Remove removes the caps in names: a push config's (ListingID, TaskID
// and ConfigID) or a webhook server's (URL), not both.
func (s *PushCapsService) Remove(ctx context.Context, actor agentmarket.Actor, in PushCapsInput) error {
	if !in.ForConfig() {
		return s.Delete(ctx, actor, in.URL)
	}
	if in.URL != "" {
		var fe agentmarket.Fields
		fe.Add("url", "exclusive", exclusiveURL)
		return fe.Err("invalid_push_caps", "the push caps are not valid")
	}
	return s.DeleteConfig(ctx, actor, in.ListingID, in.TaskID, in.ConfigID)
}

// DeleteConfig removes the actor's org's caps for one of its push
// configs: its deliveries get what the destination allows again.
func (s *PushCapsService) DeleteConfig(ctx context.Context, actor agentmarket.Actor, listingID, taskID, configID string) error {
	var fe agentmarket.Fields
	for _, f := range []struct{ name, v string }{{"listing_id", listingID}, {"task_id", taskID}, {"config_id", configID}} {
		if f.v == "" {
			fe.Add(f.name, "required", "%s is required to remove a push config's caps", f.name)
		}
	}
	if err := fe.Err("invalid_push_caps", "the push caps are not valid"); err != nil {
		return err
	}
	return s.Store.DeletePushConfigCaps(ctx, actor.OrgID, listingID, taskID, configID)
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
