package stripe

import (
	"context"
	"errors"
	"net/http"

	stripego "github.com/stripe/stripe-go/v76"

	"github.com/agentmarket/agentmarket"
)

// Ping reads the account's balance, the cheapest call that proves Stripe
// answers and takes the secret key, and says which mode the key is in.
func (p *Provider) Ping(ctx context.Context) (string, error) {
	b, err := p.api.Balance.Get(&stripego.BalanceParams{Params: stripego.Params{Context: ctx}})
	if err != nil {
		var se *stripego.Error
		if errors.As(err, &se) && (se.HTTPStatusCode == http.StatusUnauthorized || se.HTTPStatusCode == http.StatusForbidden) {
			return "", agentmarket.Wrap(agentmarket.Unavailable, "payment_provider_auth", err,
				"Stripe refused the secret key (HTTP %d): check AGENTMARKET_STRIPE_SECRET_KEY", se.HTTPStatusCode)
		}
		if c := agentmarket.Cause(err); c != "" {
			return "", agentmarket.Wrap(agentmarket.Unavailable, "payment_provider_unreachable", err, "Stripe could not be reached: %s", c)
		}
		return "", mapError("read the balance", err)
	}
	if b.Livemode {
		return "Stripe (live mode)", nil
	}
	return "Stripe (test mode)", nil
}
