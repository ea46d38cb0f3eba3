package serve

import (
	"context"
	"log/slog"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	billinggorm "github.com/agentmarket/agentmarket/billing/gormstore"
	"github.com/agentmarket/agentmarket/billing/stripe"
	"github.com/agentmarket/agentmarket/cmd/internal/config"
	"github.com/agentmarket/agentmarket/contracts"
	contractsgorm "github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

// BillingDeps is what billing is built from.
type BillingDeps struct {
	DB        *relational.DB
	Usage     metering.Store
	Contracts *contractsgorm.Store
	Listings  listings.Store
	States    billing.ContractStates
	Clock     agentmarket.Clock
	Logger    *slog.Logger
}

// BillingParts are billing's running pieces: the service, and with Stripe
// the usage reporter and the webhook handler.
type BillingParts struct {
	Service  *billing.Service
	Reporter *billing.Reporter // nil without Stripe
	Webhooks *billing.Webhooks // nil without Stripe
	Stripe   *stripe.Provider  // nil without Stripe
	// Focus exports the orgs' FOCUS cost and usage rows.
	Focus *billing.Focus
}

// Billing builds billing: on Stripe when a secret key is configured, on the
// platform's own ledger otherwise.
func Billing(ctx context.Context, cfg *config.Config, d BillingDeps) (*BillingParts, contracts.BillingHooks, error) {
	store := billinggorm.New(d.DB.DB)
	svc := &billing.Service{Store: store, Usage: d.Usage, Clock: d.Clock, Plans: d.Listings,
		Contracts: billing.ContractsBetween(d.Contracts.ContractsBetween), Trials: d.Contracts,
		History: d.Contracts, Scheduled: d.Contracts, Stays: d.Contracts, Credit: d.Contracts, CreditBack: d.Contracts,
		PlatformFeePercent: float64(cfg.PlatformFeeBasisPts) / 100, Logger: d.Logger}
	parts := &BillingParts{Service: svc}
	if cfg.StripeSecretKey != "" {
		provider := stripe.New(stripe.Config{SecretKey: cfg.StripeSecretKey, APIBase: cfg.StripeAPIBase})
		svc.Provider = provider
		parts.Stripe = provider
		parts.Reporter = &billing.Reporter{Store: store, Provider: provider, Usage: d.Usage, Clock: d.Clock, Window: cfg.UsageReportWindow, Logger: d.Logger}
		parts.Webhooks = &billing.Webhooks{Verifier: &stripe.WebhookVerifier{Secret: cfg.StripeWebhookSecret}, Store: store, Contracts: d.States,
			Clock: d.Clock, Logger: d.Logger}
	}
	names := billing.Directory{Orgs: d.Contracts, Listings: d.Listings}
	parts.Focus = &billing.Focus{Service: svc, OrgName: names.OrgName, ListingName: names.ListingName}
	hooks := &billing.Hooks{Service: svc, Buyer: names.Buyer, Listing: names.Listing}
	return parts, hooks, nil
}
