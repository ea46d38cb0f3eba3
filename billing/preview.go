package billing

import (
	"context"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/metering"
)

// ContractSource finds a contract the actor may see.
type ContractSource interface {
	Get(ctx context.Context, actor agentmarket.Actor, id string) (*contracts.Contract, error)
}

// PlanSource returns a stored plan version.
type PlanSource interface {
	Plan(ctx context.Context, listingID string, version int) (*listings.Plan, error)
}

// Previews rates a contract's open period: the invoice it would get if
// the period closed with the usage metered so far.
type Previews struct {
	Contracts ContractSource
	Plans     PlanSource
	Usage     metering.Store
	Clock     agentmarket.Clock
	// History is the contracts' plan changes (nil: none).
	History PlanHistory
	// Stays lists the org's other contracts, whose use of a month's
	// allowance the contract shares (nil: none is looked for).
	Stays Stays
	// Credit is what the contract's calls burned of the org's prepaid
	// credit (nil: no credit is applied).
	Credit CreditBurns
}

// Preview returns the invoice preview of the actor's contract for the
// current calendar month (UTC): the usage so far, split by the terms in
// force when it happened (a trial's is free), and the fee for the rest of
// the month the contract covers.
func (p *Previews) Preview(ctx context.Context, actor agentmarket.Actor, contractID string) (*Invoice, error) {
	if contractID == "" {
		var fe agentmarket.Fields
		fe.Add("subscription_id", "required", "subscription_id is required")
		return nil, fe.Err("invalid_preview_request", "the invoice preview request is not valid")
	}
	c, err := p.Contracts.Get(ctx, actor, contractID)
	if err != nil {
		return nil, err
	}
	inv, err := terms{plans: p.Plans, history: p.History, usage: p.Usage, stays: p.Stays}.previewContract(ctx, c, p.Clock.Now())
	if err != nil || p.Credit == nil {
		return inv, err
	}
	_, err = applyCredit(ctx, p.Credit, c.ID, inv)
	return inv, err
}
