package serve

import (
	"context"
	"log/slog"
	"time"

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
	Focus  *billing.Focus
	grace  time.Duration
	logger *slog.Logger
}

// Billing builds billing: on Stripe when a secret key is configured, on the
// platform's own ledger otherwise.
func Billing(ctx context.Context, cfg *config.Config, d BillingDeps) (*BillingParts, contracts.BillingHooks, error) {
	store := billinggorm.New(d.DB.DB)
	svc := &billing.Service{Store: store, Usage: d.Usage, Clock: d.Clock, Plans: d.Listings,
		Contracts: billing.ContractsBetween(d.Contracts.ContractsBetween), Trials: d.Contracts,
		History: d.Contracts, Scheduled: d.Contracts,
		PlatformFeePercent: float64(cfg.PlatformFeeBasisPts) / 100, Logger: d.Logger}
	parts := &BillingParts{Service: svc, grace: cfg.BillingGrace, logger: d.Logger}
	if cfg.StripeSecretKey != "" {
		provider := stripe.New(stripe.Config{SecretKey: cfg.StripeSecretKey, APIBase: cfg.StripeAPIBase})
		svc.Provider = provider
		parts.Stripe = provider
		parts.Reporter = &billing.Reporter{Store: store, Provider: provider, Usage: d.Usage, Clock: d.Clock, Window: cfg.UsageReportWindow, Logger: d.Logger}
		parts.Webhooks = &billing.Webhooks{Verifier: &stripe.WebhookVerifier{Secret: cfg.StripeWebhookSecret}, Store: store, Contracts: d.States,
			Clock: d.Clock, Logger: d.Logger}
	}
	orgName := func(ctx context.Context, orgID string) (string, error) {
		o, err := d.Contracts.GetOrg(ctx, orgID)
		if err != nil {
			return "", err
		}
		return o.Name, nil
	}
	listingName := func(ctx context.Context, listingID string) (string, error) {
		l, err := d.Listings.GetListing(ctx, listingID)
		if err != nil {
			return "", err
		}
		if l.Card != nil {
			return l.Card.Name, nil
		}
		return l.ID, nil
	}
	parts.Focus = &billing.Focus{Service: svc, OrgName: orgName, ListingName: listingName}
	hooks := &billing.Hooks{
		Service: svc,
		Buyer: func(ctx context.Context, orgID string) (billing.OrgInfo, error) {
			o, err := d.Contracts.GetOrg(ctx, orgID)
			if err != nil {
				return billing.OrgInfo{}, err
			}
			return billing.OrgInfo{ID: o.ID, Name: o.Name}, nil
		},
		Listing: func(ctx context.Context, listingID string) (string, string, error) {
			l, err := d.Listings.GetListing(ctx, listingID)
			if err != nil {
				return "", "", err
			}
			seller, err := d.Contracts.GetOrg(ctx, l.SellerOrgID)
			if err != nil {
				return "", "", err
			}
			name := l.ID
			if l.Card != nil {
				name = l.Card.Name
			}
			return name, seller.ConnectAccountID, nil
		},
	}
	return parts, hooks, nil
}

// runAlerts records budgets' spend alerts until ctx ends, as often as
// billing sweeps (a minute, or a quarter of a short grace period).
func runAlerts(ctx context.Context, alerts *contracts.Alerts, grace time.Duration, log *slog.Logger) {
	t := time.NewTicker(min(time.Minute, max(grace/4, 100*time.Millisecond)))
	defer t.Stop()
	for {
		if n, err := alerts.Evaluate(ctx); err != nil && ctx.Err() == nil {
			log.Warn("spend alerts not evaluated", "err", err)
		} else if n > 0 {
			log.Info("spend alerts recorded", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Run runs billing's background work until ctx ends: the usage reporter
// (with Stripe), ending trials that are over, canceling contracts whose
// scheduled end has come, suspending contracts past
// due beyond the grace period, and closing each month: on the own ledger
// (without Stripe), or charging the month's minimum commitments (with).
func (b *BillingParts) Run(ctx context.Context, subs *contracts.Subscriptions) {
	if b.Reporter != nil {
		go func() {
			if err := b.Reporter.Run(ctx, time.Minute); err != nil && ctx.Err() == nil {
				b.logger.Error("usage reporter stopped", "err", err)
			}
		}()
	}
	// Sweep often enough that a short grace (tests, strict operators) is
	// honoured within a fraction of itself.
	t := time.NewTicker(min(time.Minute, max(b.grace/4, 100*time.Millisecond)))
	defer t.Stop()
	for {
		if n, err := b.Service.EndTrials(ctx, subs); err != nil && ctx.Err() == nil {
			b.logger.Warn("ending trials failed", "err", err)
		} else if n > 0 {
			b.logger.Info("ended trials", "count", n)
		}
		if n, err := b.Service.EndScheduled(ctx, subs); err != nil && ctx.Err() == nil {
			b.logger.Warn("ending scheduled cancellations failed", "err", err)
		} else if n > 0 {
			b.logger.Info("canceled subscriptions at their period's end", "count", n)
		}
		if n, err := subs.SuspendOverdue(ctx, b.grace); err != nil && ctx.Err() == nil {
			b.logger.Warn("suspending overdue contracts failed", "err", err)
		} else if n > 0 {
			b.logger.Info("suspended overdue contracts", "count", n)
		}
		prev := billing.MonthOf(billing.MonthOf(b.Service.Clock.Now()).Start.Add(-time.Second))
		if b.Reporter == nil {
			if _, err := b.Service.CloseMonth(ctx, prev); err != nil && ctx.Err() == nil && agentmarket.KindOf(err) != agentmarket.Invalid {
				b.logger.Warn("closing the month failed", "period", prev.Start, "err", err)
			}
		} else if _, err := b.Service.ChargeCommitments(ctx, prev); err != nil && ctx.Err() == nil && agentmarket.CodeOf(err) != "period_not_closed" {
			b.logger.Warn("charging minimum commitments failed", "period", prev.Start, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
