package contracts

import (
	"context"
	"slices"

	"github.com/agentmarket/agentmarket"
)

// Who of an org may invoke listings through the meter is a role's right,
// like the control plane's: by default admin and buyer keys (DefaultRules),
// while a finance or seller key of the same org is refused, since neither
// may subscribe. An org's admin can widen it per role (InvokeRoles); the
// meter reads the right through casbin, so a change reaches every meter
// within the policy reload interval plus the meter's cache TTL.

// ObjInvokeRoles is the control-plane object of an org's invoke roles;
// only admins write it (their "*" rule), so a seller key, which may edit
// its org's payouts, cannot widen who spends the org's money.
const ObjInvokeRoles = "invoke_roles"

// RoleInvokeRule lets role invoke listings within one org ("*": every
// org).
func RoleInvokeRule(role agentmarket.Role, orgID string) Rule {
	return Rule{PType: "p", V: [6]string{RoleSubject(role), orgID, ObjListings, ActInvoke}}
}

// DefaultInvokers are the roles that invoke listings in every org.
var DefaultInvokers = []agentmarket.Role{agentmarket.RoleAdmin, agentmarket.RoleBuyer}

// RoleChecker is the raw policy check (contracts/casbin's Allowed).
type RoleChecker interface {
	Allowed(subject, domain, obj, act string) (bool, error)
}

// InvokeRoles reads and sets the roles of an org that may invoke listings.
type InvokeRoles struct {
	Store    PolicyStore
	Policies interface {
		PolicyReloader
		RoleChecker
	}
}

// InvokeRolesInput sets an org's invoke roles: the full list of roles
// whose keys may invoke. Admin and buyer always may: omitting them does
// not remove them.
type InvokeRolesInput struct {
	Roles []agentmarket.Role `json:"roles"`
}

// Validate reports unknown roles.
func (in InvokeRolesInput) Validate() error {
	var fe agentmarket.Fields
	if in.Roles == nil {
		fe.Add("roles", "required", "roles is required: the roles whose keys may invoke listings, e.g. [\"admin\", \"buyer\", \"finance\"]")
	}
	for _, r := range in.Roles {
		if !r.Valid() {
			fe.Add("roles", "role", "unknown role %q; roles are admin, seller, buyer and finance", r)
		}
	}
	return fe.Err("invalid_invoke_roles", "the invoke roles are not valid")
}

// Get returns the roles of the actor's org that may invoke listings, in
// the documented order of roles.
func (s *InvokeRoles) Get(_ context.Context, actor agentmarket.Actor) ([]agentmarket.Role, error) {
	out := []agentmarket.Role{}
	for _, r := range agentmarket.Roles {
		ok, err := s.Policies.Allowed(RoleSubject(r), actor.OrgID, ObjListings, ActInvoke)
		if err != nil {
			return nil, agentmarket.Wrap(agentmarket.Internal, "policy_error", err, "the access policy could not be evaluated")
		}
		if ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// Set makes exactly in's roles (and the default ones) invoke listings in
// the actor's org, effective in this process at once.
func (s *InvokeRoles) Set(ctx context.Context, actor agentmarket.Actor, in InvokeRolesInput) ([]agentmarket.Role, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	var grant, revoke []Rule
	for _, r := range agentmarket.Roles {
		if slices.Contains(DefaultInvokers, r) {
			continue
		}
		if slices.Contains(in.Roles, r) {
			grant = append(grant, RoleInvokeRule(r, actor.OrgID))
		} else {
			revoke = append(revoke, RoleInvokeRule(r, actor.OrgID))
		}
	}
	if len(grant) > 0 {
		if err := s.Store.AddRules(ctx, grant); err != nil {
			return nil, err
		}
	}
	if len(revoke) > 0 {
		if err := s.Store.RemoveRules(ctx, revoke); err != nil {
			return nil, err
		}
	}
	if err := s.Policies.Reload(ctx); err != nil {
		return nil, err
	}
	return s.Get(ctx, actor)
}
