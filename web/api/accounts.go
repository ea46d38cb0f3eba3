package api

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

type keyJSON struct {
	ID                  string            `json:"id"`
	Name                string            `json:"name"`
	Role                string            `json:"role"`
	Prefix              string            `json:"prefix"`
	Key                 string            `json:"key,omitempty"` // only in the answer that creates it
	MonthlyBudgetMicros *int64            `json:"monthly_budget_micros"`
	AlertThresholds     []int             `json:"alert_thresholds"`
	Tags                map[string]string `json:"tags"`
	// RateLimits are the key's rate limits through the meter.
	RateLimits agentmarket.RateLimits `json:"rate_limits"`
	CreatedAt  time.Time              `json:"created_at"`
	RevokedAt  *time.Time             `json:"revoked_at"`
}

func keyView(k *contracts.APIKey, secret string) keyJSON {
	return keyJSON{ID: k.ID, Name: k.Name, Role: string(k.Role), Prefix: k.Prefix, Key: secret,
		MonthlyBudgetMicros: k.MonthlyBudgetMicros, AlertThresholds: k.AlertThresholds, Tags: k.Tags.Map(), RateLimits: k.RateLimits,
		CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
}

func (s *Server) signup(c *fiber.Ctx) error {
	var in contracts.SignupInput
	if err := decode(c, &in); err != nil {
		return err
	}
	res, err := s.Accounts.SignupFrom(c.UserContext(), in, ClientOf(c, s.Proxies))
	if err != nil {
		return err
	}
	if res.Mailed {
		// The same bytes whoever owns the address.
		return c.Status(fiber.StatusAccepted).JSON(signupMailed)
	}
	return signupCreated(c, res)
}

// signupMailed is the confirm mode's answer to every accepted sign-up.
var signupMailed = fiber.Map{"status": "mail_sent",
	"message": "Check your mail: a message to the address you gave tells how to go on. To finish a new sign-up, follow its link (or POST its token, your organisation's name and your password to /api/v1/signup/confirm) before it expires."}

// confirmSignup finishes a sign-up with the token of its mailed link.
func (s *Server) confirmSignup(c *fiber.Ctx) error {
	var in struct {
		Token    string `json:"token"`
		OrgName  string `json:"org_name"`
		Password string `json:"password"`
	}
	if err := decode(c, &in); err != nil {
		return err
	}
	res, err := s.Accounts.ConfirmSignup(c.UserContext(), in.Token, contracts.SignupInput{OrgName: in.OrgName, Password: in.Password})
	if err != nil {
		return err
	}
	return signupCreated(c, res)
}

// signupCreated answers a sign-up that created its org: 201 with the org,
// the user and the first key (shown this once).
func signupCreated(c *fiber.Ctx, res *contracts.SignupResult) error {
	return c.Status(fiber.StatusCreated).JSON(fiber.Map{
		"org":     fiber.Map{"id": res.Org.ID, "name": res.Org.Name, "created_at": res.Org.CreatedAt},
		"user":    fiber.Map{"id": res.User.ID, "email": res.User.Email, "role": res.User.Role},
		"api_key": keyView(res.Key, res.Secret),
	})
}

func (s *Server) createKey(c *fiber.Ctx) error {
	var in contracts.KeyInput
	if err := decode(c, &in); err != nil {
		return err
	}
	k, secret, err := s.Accounts.CreateKey(c.UserContext(), actorOf(c), in)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(keyView(k, secret))
}

func (s *Server) listKeys(c *fiber.Ctx) error {
	keys, err := s.Accounts.ListKeys(c.UserContext(), actorOf(c))
	if err != nil {
		return err
	}
	out := make([]keyJSON, len(keys))
	for i := range keys {
		out[i] = keyView(&keys[i], "")
	}
	return c.JSON(fiber.Map{"items": out})
}

func (s *Server) revokeKey(c *fiber.Ctx) error {
	k, err := s.Accounts.RevokeKey(c.UserContext(), actorOf(c), c.Params("id"))
	if err != nil {
		return err
	}
	return c.JSON(keyView(k, ""))
}

func orgView(o *contracts.Org) fiber.Map {
	return fiber.Map{"id": o.ID, "name": o.Name, "platform": o.Platform, "connect_account_id": o.ConnectAccountID,
		"monthly_budget_micros": o.MonthlyBudgetMicros, "rate_limits": o.RateLimits, "created_at": o.CreatedAt}
}

func (s *Server) getOrg(c *fiber.Ctx) error {
	o, err := s.Accounts.Org(c.UserContext(), actorOf(c))
	if err != nil {
		return err
	}
	return c.JSON(orgView(o))
}

func (s *Server) updateOrg(c *fiber.Ctx) error {
	var in contracts.PayoutsInput
	if err := decode(c, &in); err != nil {
		return err
	}
	o, err := s.Accounts.SetPayouts(c.UserContext(), actorOf(c), in)
	if err != nil {
		return err
	}
	return c.JSON(orgView(o))
}

func (s *Server) setOrgBudget(c *fiber.Ctx) error {
	var in contracts.OrgBudgetInput
	if err := decode(c, &in); err != nil {
		return err
	}
	o, err := s.Accounts.SetOrgBudget(c.UserContext(), actorOf(c), in)
	if err != nil {
		return err
	}
	return c.JSON(orgView(o))
}

func (s *Server) setOrgRateLimits(c *fiber.Ctx) error {
	var in agentmarket.RateLimits
	if err := decode(c, &in); err != nil {
		return err
	}
	o, err := s.Accounts.SetOrgRateLimits(c.UserContext(), actorOf(c), in)
	if err != nil {
		return err
	}
	return c.JSON(orgView(o))
}

func (s *Server) setKeyRateLimits(c *fiber.Ctx) error {
	var in agentmarket.RateLimits
	if err := decode(c, &in); err != nil {
		return err
	}
	k, err := s.Accounts.SetKeyRateLimits(c.UserContext(), actorOf(c), c.Params("id"), in)
	if err != nil {
		return err
	}
	return c.JSON(keyView(k, ""))
}

func (s *Server) getInvokeRoles(c *fiber.Ctx) error {
	roles, err := s.InvokeRoles.Get(c.UserContext(), actorOf(c))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"roles": roles})
}

func (s *Server) setInvokeRoles(c *fiber.Ctx) error {
	var in contracts.InvokeRolesInput
	if err := decode(c, &in); err != nil {
		return err
	}
	roles, err := s.InvokeRoles.Set(c.UserContext(), actorOf(c), in)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"roles": roles})
}
