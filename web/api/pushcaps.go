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

func pushCapsOut(v contracts.PushCapsView) pushCapsJSON {
	opt := func(n int) *int {
		if n == 0 {
			return nil
		}
		return &n
	}
	optf := func(n float64) *float64 {
		if n == 0 {
			return nil
		}
		return &n
	}
	dc, dr := v.Destination.Concurrency, v.Destination.PerSecond
	return pushCapsJSON{Destination: v.Requested.Destination, MaxInFlight: v.Effective.MaxInFlight, PerSecond: v.Effective.PerSecond,
		Requested:       capsJSON{MaxInFlight: opt(v.Requested.MaxInFlight), PerSecond: optf(v.Requested.PerSecond)},
		DestinationCaps: capsJSON{MaxInFlight: &dc, PerSecond: &dr}, UpdatedAt: v.Requested.UpdatedAt}
}

func (s *Server) setPushCaps(c *fiber.Ctx) error {
	var in contracts.PushCapsInput
	if err := decode(c, &in); err != nil {
		return err
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
	out := make([]pushCapsJSON, len(vs))
	for i, v := range vs {
		out[i] = pushCapsOut(v)
	}
	return c.JSON(fiber.Map{"items": out})
}

func (s *Server) deletePushCaps(c *fiber.Ctx) error {
	if err := s.PushCaps.Delete(c.UserContext(), actorOf(c), c.Query("url")); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}
