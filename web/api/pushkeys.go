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
	return serveJWKS(c, s.PushKeys, "push", "push deliveries are not signed here")
}

// serveJWKS answers keys' JWKS, cacheable as they say; NotFound (absent
// saying why) without keys. what names the keys in the error code.
func serveJWKS(c *fiber.Ctx, keys PushKeys, what, absent string) error {
	if keys == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "route_not_found", "%s", absent)
	}
	set, maxAge, err := keys.JWKS(c.UserContext())
	if err != nil {
		return agentmarket.Wrap(agentmarket.Unavailable, what+"_keys_unavailable", err, "the %s signing keys cannot be read now; try again", what)
	}
	c.Set(fiber.HeaderCacheControl, fmt.Sprintf("public, max-age=%d", int(maxAge.Seconds())))
	c.Set(fiber.HeaderContentType, "application/jwk-set+json")
	return c.Send(set)
}
