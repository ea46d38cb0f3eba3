package api

import (
	"context"
	"fmt"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
)

// PushKeys publishes the public keys the meters sign push deliveries with
// (a2aproxy/pushsign.Keys).
type PushKeys interface {
	// JWKS returns the JSON Web Key Set and how long it may be cached.
	JWKS(ctx context.Context) ([]byte, time.Duration, error)
}

// pushJWKS serves the push signing keys, to anyone: buyers verify their
// webhooks' deliveries with them.
func (s *Server) pushJWKS(c *fiber.Ctx) error {
	if s.PushKeys == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "route_not_found", "push deliveries are not signed here")
	}
	set, maxAge, err := s.PushKeys.JWKS(c.UserContext())
	if err != nil {
		return agentmarket.Wrap(agentmarket.Unavailable, "push_keys_unavailable", err, "the push signing keys cannot be read now; try again")
	}
	c.Set(fiber.HeaderCacheControl, fmt.Sprintf("public, max-age=%d", int(maxAge.Seconds())))
	c.Set(fiber.HeaderContentType, "application/jwk-set+json")
	return c.Send(set)
}
