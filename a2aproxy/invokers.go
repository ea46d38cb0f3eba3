package a2aproxy

import (
	"fmt"
	"net/http"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// invokers refuses a key whose role may not invoke listings in its org:
// by default only admin and buyer keys do (contracts.DefaultInvokers); an
// org's admin widens it per role (contracts.InvokeRoles). The roles an org
// lets invoke are cached per org for CacheTTL, so a change reaches the
// meter within the policy reload interval plus CacheTTL.
type invokers struct {
	ent   Entitlements
	roles *ttlCache[roleSet]
}

// roleSet has bit i set when agentmarket.Roles[i] may invoke.
type roleSet uint8

func (i invokers) serve(cl *call, next handler) error {
	set, ok := i.roles.fresh(cl.actor.OrgID)
	if !ok {
		var err error
		if set, err = i.load(cl.actor.OrgID); err != nil {
			return err
		}
	}
	if !set.has(cl.actor.Role) {
		return rpcErr(CodeNotEntitled, http.StatusForbidden, fmt.Sprintf(
			"a %s key may not invoke listings: by default only admin and buyer keys do; an admin of your organisation can allow %s keys (PATCH /api/v1/org/invoke-roles)",
			cl.actor.Role, cl.actor.Role))
	}
	return next(cl)
}

func (i invokers) load(orgID string) (roleSet, error) {
	return i.roles.get(orgID, func() (roleSet, error) {
		var set roleSet
		for n, r := range agentmarket.Roles {
			ok, err := i.ent.Allowed(contracts.RoleSubject(r), orgID, contracts.ObjListings, contracts.ActInvoke)
			if err != nil {
				return 0, err
			}
			if ok {
				set |= 1 << n
			}
		}
		return set, nil
	}, func(error) bool { return false })
}

func (s roleSet) has(r agentmarket.Role) bool {
	for n, k := range agentmarket.Roles {
		if k == r {
			return s&(1<<n) != 0
		}
	}
	return false
}
