package contracts

import (
	"context"

	"github.com/agentmarket/agentmarket"
)

// SessionCaps cap one conversation of a subscription: the sends under one
// contextId, and what they cost. A conversation past a cap is refused
// (the meter's -32046); the subscription's other conversations go on
// (docs/limits.md).
type SessionCaps struct {
	// MaxCalls is the most sends in one context; 0: no cap.
	MaxCalls int64 `json:"max_calls"`
	// MaxMicros is the most one context may cost, in micros of the
	// plan's currency; 0: no cap.
	MaxMicros int64 `json:"max_micros"`
}

// IsZero reports whether c caps nothing.
func (c SessionCaps) IsZero() bool { return c == SessionCaps{} }

// MaxSessionCalls bounds a session's call cap.
const MaxSessionCalls = 1_000_000_000

func (c SessionCaps) check(fe *agentmarket.Fields) {
	if c.MaxCalls < 0 || c.MaxCalls > MaxSessionCalls {
		fe.Add("session_caps.max_calls", "range", "session_caps.max_calls must be 0 (no cap) or between 1 and %d", MaxSessionCalls)
	}
	if c.MaxMicros < 0 || c.MaxMicros > agentmarket.MaxBudgetMicros {
		fe.Add("session_caps.max_micros", "range", "session_caps.max_micros must be 0 (no cap) or between 1 and %d", agentmarket.MaxBudgetMicros)
	}
}

// ObjRateLimits is the control-plane object of an org's and its keys'
// rate limits; only admins write it (their "*" rule): a key must not lift
// its own.
const ObjRateLimits = "rate_limits"

// SetOrgRateLimits sets the actor's org's rate limits, which every meter
// applies to the org's calls within its cache interval (docs/limits.md).
func (a *Accounts) SetOrgRateLimits(ctx context.Context, actor agentmarket.Actor, in agentmarket.RateLimits) (*Org, error) {
	var fe agentmarket.Fields
	in.Check(&fe, "")
	if err := fe.Err("invalid_rate_limits", "the rate limits are not valid"); err != nil {
		return nil, err
	}
	before, err := a.Store.GetOrg(ctx, actor.OrgID)
	if err != nil {
		return nil, err
	}
	o, err := a.Store.SetOrgRateLimits(ctx, actor.OrgID, in)
	if err != nil {
		return nil, err
	}
	return o, agentmarket.RecordChange(ctx, a.Audit, agentmarket.Change{Actor: actor, Action: "org.rate_limits", ObjectType: "org", ObjectID: o.ID, OrgID: o.ID,
		Before: map[string]any{"rate_limits": before.RateLimits}, After: map[string]any{"rate_limits": o.RateLimits}})
}

// SetKeyRateLimits sets the rate limits of one of the actor's org's keys.
func (a *Accounts) SetKeyRateLimits(ctx context.Context, actor agentmarket.Actor, id string, in agentmarket.RateLimits) (*APIKey, error) {
	var fe agentmarket.Fields
	in.Check(&fe, "")
	if err := fe.Err("invalid_rate_limits", "the rate limits are not valid"); err != nil {
		return nil, err
	}
	var before *APIKey
	keys, err := a.Store.ListAPIKeys(ctx, actor.OrgID)
	if err != nil {
		return nil, err
	}
	for i := range keys {
		if keys[i].ID == id {
			before = &keys[i]
		}
	}
	if before == nil || before.RevokedAt != nil {
		return nil, agentmarket.Errorf(agentmarket.NotFound, "api_key_not_found", "no API key %q in your organisation", id)
	}
	k, err := a.Store.SetKeyRateLimits(ctx, actor.OrgID, id, in)
	if err != nil {
		return nil, err
	}
	return k, a.recordKey(ctx, actor, "api_key.rate_limits", before, k)
}

// LimitsInput sets a subscription's rate limits and session caps; an
// absent one keeps its value.
type LimitsInput struct {
	RateLimits  *agentmarket.RateLimits `json:"rate_limits"`
	SessionCaps *SessionCaps            `json:"session_caps"`
}

// SetLimits replaces a subscription's rate limits or session caps; meters
// apply them within their cache interval.
func (s *Subscriptions) SetLimits(ctx context.Context, actor agentmarket.Actor, id string, in LimitsInput) (*Contract, error) {
	var fe agentmarket.Fields
	if in.RateLimits != nil {
		in.RateLimits.Check(&fe, "rate_limits.")
	}
	if in.SessionCaps != nil {
		in.SessionCaps.check(&fe)
	}
	if err := fe.Err("invalid_subscription", "the limits are not valid"); err != nil {
		return nil, err
	}
	c, err := s.Get(ctx, actor, id)
	if err != nil || (in.RateLimits == nil && in.SessionCaps == nil) {
		return c, err
	}
	l, caps := c.RateLimits, c.SessionCaps
	if in.RateLimits != nil {
		l = *in.RateLimits
	}
	if in.SessionCaps != nil {
		caps = *in.SessionCaps
	}
	after, err := s.Store.SetContractLimits(ctx, id, l, caps, s.Clock.Now())
	return s.recordContract(ctx, actor, "subscription.limits", c, after, err)
}
