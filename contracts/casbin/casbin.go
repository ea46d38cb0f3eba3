// Package casbin enforces AgentMarket's policies with casbin: role
// permissions per org for the control plane, and (with the meter) invoke
// rights per (org, listing). Rules live in the database behind
// contracts.PolicyStore, so every marketplace and meter enforces the same
// rules; each instance reloads them on a short interval, so a change takes
// effect everywhere within seconds, without a restart.
package casbin

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	casbinv2 "github.com/casbin/casbin/v2"
	"github.com/casbin/casbin/v2/model"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// Model is the casbin model: a subject (a role, or an org for invoke
// rights) may act on an object within a domain (an org id, or "*" for
// every org).
const Model = `
[request_definition]
r = sub, dom, obj, act

[policy_definition]
p = sub, dom, obj, act

[policy_effect]
e = some(where (p.eft == allow))

[matchers]
m = r.sub == p.sub && (p.dom == "*" || r.dom == p.dom) && (p.obj == "*" || r.obj == p.obj) && (p.act == "*" || r.act == p.act)
`

// Authorizer answers "may this actor do that?". Reads take no lock: a
// reload builds a new enforcer and swaps it in whole.
type Authorizer struct {
	store contracts.PolicyStore
	m     model.Model
	e     atomic.Pointer[casbinv2.Enforcer]
	// reloading (a one-slot semaphore, so a waiting caller can give up
	// with its context) serializes reloads: one that read the rules
	// before a change must not swap its enforcer in after the change's
	// own reload did (the periodic reload racing a grant would take a new
	// buyer's right away until the next tick).
	reloading chan struct{}
	// asked counts the reloads asked for; done is the highest of those
	// that a finished reload covers (it began reading after they were
	// asked). A reload asked for at or below done has nothing left to
	// read: a burst of grants waits for one or two reloads, not one each.
	asked, done atomic.Uint64
}

// New seeds the default role rules (keeping any already stored) and loads
// every rule.
func New(ctx context.Context, store contracts.PolicyStore) (*Authorizer, error) {
	m, err := model.NewModelFromString(Model)
	if err != nil {
		return nil, err
	}
	a := &Authorizer{store: store, m: m, reloading: make(chan struct{}, 1)}
	if err := store.AddRules(ctx, contracts.DefaultRules()); err != nil {
		return nil, fmt.Errorf("seed policies: %w", err)
	}
	if err := a.Reload(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

// Reload reads every rule from the store.
func (a *Authorizer) Reload(ctx context.Context) error {
	ticket := a.asked.Add(1) // what the caller changed is stored by now
	select {
	case a.reloading <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-a.reloading }()
	if a.done.Load() >= ticket {
		return nil // a reload that began after the ticket has finished
	}
	covers := a.asked.Load()
	rules, err := a.store.LoadRules(ctx)
	if err != nil {
		return err
	}
	e, err := casbinv2.NewEnforcer(a.m.Copy())
	if err != nil {
		return err
	}
	e.EnableAutoSave(false)
	var ps [][]string
	for _, r := range rules {
		if r.PType != "p" {
			continue
		}
		ps = append(ps, trim(r.V[:]))
	}
	if len(ps) > 0 {
		if _, err := e.AddPoliciesEx(ps); err != nil {
			return err
		}
	}
	a.e.Store(e)
	a.done.Store(covers)
	return nil
}

// trim drops trailing empty values, which casbin would count as fields.
func trim(v []string) []string {
	n := len(v)
	for n > 0 && v[n-1] == "" {
		n--
	}
	return append([]string(nil), v[:n]...)
}

// reloadTimeout bounds a periodic reload.
const reloadTimeout = 10 * time.Second

// Run reloads the rules every interval until ctx ends. A failed reload
// keeps the rules it had and is retried at the next tick.
func (a *Authorizer) Run(ctx context.Context, every time.Duration, onErr func(error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// Bounded: a load that hangs would hold back every grant
			// queued behind it. A reload cut short because Run is ending
			// is no failure.
			rctx, cancel := context.WithTimeout(ctx, reloadTimeout)
			err := a.Reload(rctx)
			cancel()
			if err != nil && onErr != nil && ctx.Err() == nil {
				onErr(err)
			}
		}
	}
}

// Authorize returns nil when actor's role may act on obj in its org, and a
// Forbidden error naming what is missing otherwise.
func (a *Authorizer) Authorize(_ context.Context, actor agentmarket.Actor, obj, act string) error {
	ok, err := a.e.Load().Enforce(contracts.RoleSubject(actor.Role), actor.OrgID, obj, act)
	if err != nil {
		return agentmarket.Wrap(agentmarket.Internal, "policy_error", err, "the access policy could not be evaluated")
	}
	if !ok {
		return agentmarket.Errorf(agentmarket.Forbidden, "forbidden", "a %s key may not %s %s", actor.Role, act, obj)
	}
	return nil
}

// Allowed reports whether subject may act on obj in domain: the raw check,
// for rights that are not a role's (e.g. an org's right to invoke a
// listing).
func (a *Authorizer) Allowed(subject, domain, obj, act string) (bool, error) {
	return a.e.Load().Enforce(subject, domain, obj, act)
}

// Grant stores rules and reloads.
func (a *Authorizer) Grant(ctx context.Context, rules ...contracts.Rule) error {
	if err := a.store.AddRules(ctx, rules); err != nil {
		return err
	}
	return a.Reload(ctx)
}

// Revoke removes rules and reloads.
func (a *Authorizer) Revoke(ctx context.Context, rules ...contracts.Rule) error {
	if err := a.store.RemoveRules(ctx, rules); err != nil {
		return err
	}
	return a.Reload(ctx)
}
