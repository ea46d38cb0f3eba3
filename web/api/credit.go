package api

import (
	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// Prepaid credit (contracts/credit.go). Who may grant (the operator), buy
// (an admin or finance key) or set the settings (an admin) is the
// service's rule; reading is reading billing.

// creditServed answers 404 where no credit is served.
func (s *Server) creditServed(c *fiber.Ctx) error {
	if s.Credits == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "route_not_found", "prepaid credit is not served here")
	}
	return c.Next()
}

func (s *Server) creditAccounts(c *fiber.Ctx) error {
	out, err := s.Credits.Accounts(c.UserContext(), actorOf(c), c.Query("org_id"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"items": out})
}

func (s *Server) creditMovements(c *fiber.Ctx) error {
	out, err := s.Credits.Movements(c.UserContext(), actorOf(c), c.Query("org_id"), c.Query("currency"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"items": out})
}

func (s *Server) creditMove(grant bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		var in contracts.CreditInput
		if err := decode(c, &in); err != nil {
			return err
		}
		move := s.Credits.Refund
		if grant {
			move = s.Credits.Grant
		}
		acct, m, err := move(c.UserContext(), actorOf(c), in)
		if err != nil {
			return err
		}
		return c.Status(fiber.StatusCreated).JSON(fiber.Map{"account": acct, "movement": m})
	}
}

func (s *Server) creditPurchase(c *fiber.Ctx) error {
	var in contracts.CreditInput
	if err := decode(c, &in); err != nil {
		return err
	}
	out, err := s.Credits.Purchase(c.UserContext(), actorOf(c), in)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(out)
}

func (s *Server) creditSettings(c *fiber.Ctx) error {
	var in contracts.CreditSettingsInput
	if err := decode(c, &in); err != nil {
		return err
	}
	out, err := s.Credits.SetSettings(c.UserContext(), actorOf(c), in)
	if err != nil {
		return err
	}
	return c.JSON(out)
}
