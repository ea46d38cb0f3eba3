package contracts

import (
	"context"

	"github.com/agentmarket/agentmarket"
)

// Rule is one casbin policy line: its type ("p" or "g") and up to six
// values. Policies live in the database so every marketplace and meter
// instance enforces the same rules.
type Rule struct {
	PType string
	V     [6]string
}

// PolicyStore persists casbin rules (contracts/gormstore).
type PolicyStore interface {
	LoadRules(ctx context.Context) ([]Rule, error)
	// AddRules stores rules, ignoring ones already stored.
	AddRules(ctx context.Context, rules []Rule) error
	RemoveRules(ctx context.Context, rules []Rule) error
	// RemoveFilteredRules removes rules of ptype whose values from
	// fieldIndex on equal values (empty values match anything).
	RemoveFilteredRules(ctx context.Context, ptype string, fieldIndex int, values ...string) error
}

// Control-plane objects and actions that casbin guards.
const (
	ObjListings      = "listings"
	ObjAPIKeys       = "api_keys"
	ObjSubscriptions = "subscriptions"
	ObjUsage         = "usage"
	ObjBilling       = "billing"
	ObjOrg           = "org"

	ActRead  = "read"
	ActWrite = "write"
)

// RoleSubject is the casbin subject of a role.
func RoleSubject(r agentmarket.Role) string { return "role:" + string(r) }

// DefaultRules are the role permissions every org starts with: sellers
// list agents, buyers subscribe and invoke them, finance reads money,
// admins do all (invokeroles.go: who invokes through the meter).
// Domain "*" applies to every org; an org-specific rule can add to it.
func DefaultRules() []Rule {
	p := func(role agentmarket.Role, obj, act string) Rule {
		return Rule{PType: "p", V: [6]string{RoleSubject(role), "*", obj, act}}
	}
	return []Rule{
		p(agentmarket.RoleAdmin, "*", "*"),
		p(agentmarket.RoleSeller, ObjListings, ActRead),
		p(agentmarket.RoleSeller, ObjListings, ActWrite),
		p(agentmarket.RoleSeller, ObjAPIKeys, ActRead),
		p(agentmarket.RoleSeller, ObjAPIKeys, ActWrite),
		p(agentmarket.RoleSeller, ObjUsage, ActRead),
		p(agentmarket.RoleSeller, ObjOrg, ActRead),
		p(agentmarket.RoleSeller, ObjOrg, ActWrite),
		p(agentmarket.RoleBuyer, ObjListings, ActRead),
		p(agentmarket.RoleBuyer, ObjListings, ActInvoke), // RoleInvokeRule(RoleBuyer, "*")
		p(agentmarket.RoleBuyer, ObjSubscriptions, ActRead),
		p(agentmarket.RoleBuyer, ObjSubscriptions, ActWrite),
		p(agentmarket.RoleBuyer, ObjAPIKeys, ActRead),
		p(agentmarket.RoleBuyer, ObjAPIKeys, ActWrite),
		p(agentmarket.RoleBuyer, ObjUsage, ActRead),
		p(agentmarket.RoleBuyer, ObjBilling, ActRead),
		p(agentmarket.RoleBuyer, ObjOrg, ActRead),
		p(agentmarket.RoleFinance, ObjListings, ActRead),
		p(agentmarket.RoleFinance, ObjSubscriptions, ActRead),
		p(agentmarket.RoleFinance, ObjUsage, ActRead),
		p(agentmarket.RoleFinance, ObjBilling, ActRead),
		p(agentmarket.RoleFinance, ObjAPIKeys, ActRead),
		p(agentmarket.RoleFinance, ObjOrg, ActRead),
	}
}
