package metering

import (
	"context"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket"
)

// Scope says whose usage a report covers: what an org bought, what it
// sold, or (operators only) the whole platform.
type Scope string

const (
	ScopeBuyer    Scope = "buyer"
	ScopeSeller   Scope = "seller"
	ScopePlatform Scope = "platform"
)

// Allows reports whether usage in scope s may be grouped by g. Sellers see
// which orgs use their agents, never which of a buyer's API keys did, nor
// the buyer's tags: those (and the names they lead to) are the buyer's.
func (s Scope) Allows(g GroupBy) bool {
	_, tag := g.TagKey()
	return s != ScopeSeller || g != ByAPIKey && !tag
}

// Reports answers usage questions for the API, within the caller's scope.
type Reports struct {
	Store Store
	Clock agentmarket.Clock
}

// ReportInput is a usage report request; zero times default to the
// current calendar month (UTC).
type ReportInput struct {
	Scope     Scope
	GroupBy   GroupBy
	From, To  time.Time
	ListingID string
	APIKeyID  string
}

// Totals sums the actor's usage per the requested grouping.
func (r *Reports) Totals(ctx context.Context, actor agentmarket.Actor, in ReportInput) (Query, []Total, error) {
	q, err := r.query(actor, in)
	if err != nil {
		return q, nil, err
	}
	out, err := r.Store.Totals(ctx, q)
	return q, out, err
}

func (r *Reports) query(actor agentmarket.Actor, in ReportInput) (Query, error) {
	var fe agentmarket.Fields
	q := Query{GroupBy: in.GroupBy, From: in.From, To: in.To, ListingID: in.ListingID, APIKeyID: in.APIKeyID}
	if !q.GroupBy.Valid() {
		names := make([]string, len(GroupBys))
		for i, g := range GroupBys {
			names[i] = string(g)
		}
		fe.Add("group_by", "enum", "group_by must be one of %s, or tag:<key> (a tag key: lower-case letters, digits, '_', '.', '-')", strings.Join(names, ", "))
	}
	now := r.Clock.Now()
	if q.From.IsZero() {
		q.From = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	if q.To.IsZero() {
		q.To = now.Add(time.Millisecond)
	}
	if !q.From.Before(q.To) {
		fe.Add("to", "after_from", "to must be after from")
	}
	switch in.Scope {
	case "", ScopeBuyer:
		q.BuyerOrgID = actor.OrgID
	case ScopeSeller:
		q.SellerOrgID = actor.OrgID
		if !ScopeSeller.Allows(q.GroupBy) {
			fe.Add("group_by", "scope", "group_by=%s is not available with scope=seller: a buyer's API keys and tags are the buyer's own; group by buyer instead", q.GroupBy)
		}
		if q.APIKeyID != "" {
			fe.Add("api_key_id", "scope", "api_key_id is not available with scope=seller: a buyer's API keys are the buyer's own")
		}
	case ScopePlatform:
		if !actor.Operator {
			return q, agentmarket.Errorf(agentmarket.Forbidden, "operator_only", "only platform operators may see platform-wide usage")
		}
	default:
		fe.Add("scope", "enum", "scope must be buyer, seller or platform")
	}
	return q, fe.Err("invalid_usage_query", "the usage query is not valid")
}
