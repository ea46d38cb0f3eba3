package api

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// pushCapsServed answers 404 where no meter delivers push notifications.
func (s *Server) pushCapsServed(c *fiber.Ctx) error {
	if s.PushCaps == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "route_not_found", "push caps are not served here")
	}
	return c.Next()
}

type capsJSON struct {
	MaxInFlight *int     `json:"max_in_flight"`
	PerSecond   *float64 `json:"per_second"`
}

type pushCapsJSON struct {
	Destination string `json:"destination"`
	// The caps the org's deliveries there get: the lower of what it asked
	// for and the destination's.
	MaxInFlight     int       `json:"max_in_flight"`
	PerSecond       float64   `json:"per_second"`
	Requested       capsJSON  `json:"requested"`
	DestinationCaps capsJSON  `json:"destination_caps"`
	UpdatedAt       time.Time `json:"updated_at"`
}

// unlessZero is v's address, nil for its zero value (a cap not asked for).
func unlessZero[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

func pushCapsOut(v contracts.PushCapsView) pushCapsJSON {
	dc, dr := v.Destination.Concurrency, v.Destination.PerSecond
	return pushCapsJSON{Destination: v.Requested.Destination, MaxInFlight: v.Effective.MaxInFlight, PerSecond: v.Effective.PerSecond,
		Requested:       capsJSON{MaxInFlight: unlessZero(v.Requested.MaxInFlight), PerSecond: unlessZero(v.Requested.PerSecond)},
		DestinationCaps: capsJSON{MaxInFlight: &dc, PerSecond: &dr}, UpdatedAt: v.Requested.UpdatedAt}
}

// pushConfigCapsJSON is an org's own rate for one of its push configs.
type pushConfigCapsJSON struct {
	ListingID   string `json:"listing_id"`
	TaskID      string `json:"task_id"`
	ConfigID    string `json:"config_id"`
	Destination string `json:"destination"`
	// The rate the config's deliveries get: the lowest of what was asked
	// and what the destination allows the org.
	PerSecond       float64   `json:"per_second"`
	Requested       capsJSON  `json:"requested"`
	DestinationCaps capsJSON  `json:"destination_caps"`
	UpdatedAt       time.Time `json:"updated_at"`
}

func pushConfigCapsOut(v contracts.PushConfigCapsView) pushConfigCapsJSON {
	r, dc, dr := v.Requested, v.Destination.Concurrency, v.Destination.PerSecond
	return pushConfigCapsJSON{ListingID: r.ListingID, TaskID: r.TaskID, ConfigID: r.ConfigID, Destination: r.Destination, PerSecond: v.Effective,
		Requested: capsJSON{PerSecond: &r.PerSecond}, DestinationCaps: capsJSON{MaxInFlight: &dc, PerSecond: &dr}, UpdatedAt: r.UpdatedAt}
}

func (s *Server) setPushCaps(c *fiber.Ctx) error {
	var in contracts.PushCapsInput
	if err := decode(c, &in); err != nil {
		return err
	}
	if in.ForConfig() {
		v, err := s.PushCaps.SetConfig(c.UserContext(), actorOf(c), in)
		if err != nil {
			return err
		}
		return c.JSON(pushConfigCapsOut(v))
	}
	v, err := s.PushCaps.Set(c.UserContext(), actorOf(c), in)
	if err != nil {
		return err
	}
	return c.JSON(pushCapsOut(v))
}

func (s *Server) listPushCaps(c *fiber.Ctx) error {
	vs, err := s.PushCaps.List(c.UserContext(), actorOf(c))
	if err != nil {
		return err
	}
	cvs, err := s.PushCaps.ListConfigs(c.UserContext(), actorOf(c))
	if err != nil {
		return err
	}
	out := make([]pushCapsJSON, len(vs))
	for i, v := range vs {
		out[i] = pushCapsOut(v)
	}
	configs := make([]pushConfigCapsJSON, len(cvs))
	for i, v := range cvs {
		configs[i] = pushConfigCapsOut(v)
	}
	return c.JSON(fiber.Map{"items": out, "configs": configs})
}

func (s *Server) deletePushCaps(c *fiber.Ctx) error {
	in := contracts.PushCapsInput{URL: c.Query("url"), ListingID: c.Query("listing_id"), TaskID: c.Query("task_id"), ConfigID: c.Query("config_id")}
	if err := s.PushCaps.Remove(c.UserContext(), actorOf(c), in); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}
