package api

import (
	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// Kill switches (contracts/killswitch.go). Who may switch off what is the
// service's rule (the target's owner, or the operator), not a role's
// permission: the routes check no casbin object.

// switchesServed answers 404 where no kill switches are served.
func (s *Server) switchesServed(c *fiber.Ctx) error {
	if s.Switches == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "route_not_found", "kill switches are not served here")
	}
	return c.Next()
}

func (s *Server) setKillSwitch(c *fiber.Ctx) error {
	var in contracts.SwitchInput
	if err := decode(c, &in); err != nil {
		return err
	}
	sw, err := s.Switches.Set(c.UserContext(), actorOf(c), in)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(sw)
}

func (s *Server) listKillSwitches(c *fiber.Ctx) error {
	out, err := s.Switches.List(c.UserContext(), actorOf(c), c.Query("active") == "true")
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"items": out})
}

type liftInput struct {
	Reason string `json:"reason"`
}

func (s *Server) liftKillSwitch(c *fiber.Ctx) error {
	var in liftInput
	if err := decode(c, &in); err != nil {
		return err
	}
	sw, err := s.Switches.Lift(c.UserContext(), actorOf(c), c.Params("id"), in.Reason)
	if err != nil {
		return err
	}
	return c.JSON(sw)
}
