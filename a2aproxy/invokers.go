package a2aproxy

import (
	"fmt"
	"net/http"
	"sync"
	"time"

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
	roles *roleCache
}

// roleCache keeps the roles each org lets invoke. A hit takes no lock
// (sync.Map's read path) and allocates nothing: the stage runs on every
// call, budgeted or not.
type roleCache struct {
	ttl time.Duration
	now func() time.Time
	m   sync.Map // org id → *roleEntry
}

type roleEntry struct {
	set     roleSet
	expires time.Time
}

func newRoleCache(ttl time.Duration, now func() time.Time) *roleCache {
	return &roleCache{ttl: ttl, now: now}
}

// fresh is the org's roles when they were read within the TTL.
func (c *roleCache) fresh(orgID string) (roleSet, bool) {
	if v, ok := c.m.Load(orgID); ok {
		if e := v.(*roleEntry); c.now().Before(e.expires) {
			return e.set, true
		}
	}
	return 0, false
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

// load reads the roles orgID lets invoke from the policy, and keeps them.
func (i invokers) load(orgID string) (roleSet, error) {
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
	if i.roles.ttl > 0 {
		i.roles.m.Store(orgID, &roleEntry{set: set, expires: i.roles.now().Add(i.roles.ttl)})
	}
	return set, nil
}

func (s roleSet) has(r agentmarket.Role) bool {
	for n, k := range agentmarket.Roles {
		if k == r {
			return s&(1<<n) != 0
		}
	}
	return false
}
