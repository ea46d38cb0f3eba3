package contracts

import (
	"context"

	"github.com/agentmarket/agentmarket"
)

// keyRecord is what the audit log keeps of an API key: never its hash.
type keyRecord struct {
	ID                  string           `json:"id"`
	OrgID               string           `json:"org_id"`
	Name                string           `json:"name"`
	Prefix              string           `json:"prefix"`
	Role                agentmarket.Role `json:"role"`
	MonthlyBudgetMicros *int64           `json:"monthly_budget_micros"`
	AlertThresholds     []int            `json:"alert_thresholds"`
	Tags                agentmarket.Tags `json:"tags"`
	// RateLimits, when set.
	RateLimits *agentmarket.RateLimits `json:"rate_limits,omitempty"`
	Revoked    bool                    `json:"revoked"`
}

func keyRecordOf(k *APIKey) *keyRecord {
	if k == nil {
		return nil
	}
	r := &keyRecord{ID: k.ID, OrgID: k.OrgID, Name: k.Name, Prefix: k.Prefix, Role: k.Role, MonthlyBudgetMicros: k.MonthlyBudgetMicros,
		AlertThresholds: k.AlertThresholds, Tags: k.Tags, Revoked: k.RevokedAt != nil}
	if !k.RateLimits.IsZero() {
		r.RateLimits = &k.RateLimits
	}
	return r
}

// recordContract records a change of a contract (before is nil for a new
// one) and of the invoke right that follows its status: a change of the
// right is a policy change of its own ("policy.grant", "policy.revoke").
// It passes err through, recording nothing when err is set.
func (s *Subscriptions) recordContract(ctx context.Context, actor agentmarket.Actor, action string, before, after *Contract, err error) (*Contract, error) {
	if err != nil {
		return after, err
	}
	if err := s.auditContract(ctx, actor, action, before, after); err != nil {
		return nil, err
	}
	return after, nil
}

// auditContract is recordContract's record, for a change already made.
// A change whose consequences must follow it whatever the log says (the
// provider told, the meters' rights reloaded, an offer spent) calls it and
// returns its error only after those: a failed entry fails the request,
// never leaves the change half done.
func (s *Subscriptions) auditContract(ctx context.Context, actor agentmarket.Actor, action string, before, after *Contract) error {
	if s.Audit == nil || after == nil {
		return nil
	}
	c := agentmarket.Change{Actor: actor, Action: action, ObjectType: "subscription", ObjectID: after.ID, OrgID: after.BuyerOrgID, After: after}
	if before != nil {
		c.Before = before
	}
	if err := s.Audit.RecordChange(ctx, c); err != nil {
		return err
	}
	had := before != nil && before.Status.Invocable()
	if has := after.Status.Invocable(); has != had {
		rule := InvokeRule(after.BuyerOrgID, after.ListingID)
		view := map[string]string{"ptype": rule.PType, "subject": rule.V[0], "domain": rule.V[1], "object": rule.V[2], "action": rule.V[3]}
		p := agentmarket.Change{Actor: actor, Action: "policy.revoke", ObjectType: "policy",
			ObjectID: rule.V[0] + " " + rule.V[2] + " " + rule.V[3], OrgID: after.BuyerOrgID, Before: view}
		if has {
			p.Action, p.Before, p.After = "policy.grant", nil, view
		}
		if err := s.Audit.RecordChange(ctx, p); err != nil {
			return err
		}
	}
	return nil
}
