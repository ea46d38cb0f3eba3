package stripe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"

	stripego "github.com/stripe/stripe-go/v76"

	"github.com/agentmarket/agentmarket"
)

// mapError turns what stripe-go returns for op ("create the product") into
// an application error. Stripe's own message is kept for Invalid and
// NotFound errors (it is written for developers and names the parameter);
// the full error, with Stripe's request id, is the internal cause.
func mapError(op string, err error) error {
	if err == nil {
		return nil
	}
	var se *stripego.Error
	if !errors.As(err, &se) {
		var ue *url.Error
		var ne net.Error
		if errors.As(err, &ue) || errors.As(err, &ne) ||
			errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return agentmarket.Wrap(agentmarket.Unavailable, "payment_provider_unreachable", err,
				"the payment provider could not be reached; try again later")
		}
		return agentmarket.Wrap(agentmarket.Internal, "payment_provider_error", fmt.Errorf("stripe: %s: %w", op, err),
			"payment provider error")
	}
	cause := fmt.Errorf("stripe: %s: HTTP %d, type %s, code %s, request %s: %s",
		op, se.HTTPStatusCode, se.Type, se.Code, se.RequestID, se.Msg)
	switch {
	case se.HTTPStatusCode == http.StatusUnauthorized:
		return agentmarket.Wrap(agentmarket.Internal, "payment_provider_auth",
			fmt.Errorf("stripe rejected the secret key: check AGENTMARKET_STRIPE_SECRET_KEY (and AGENTMARKET_STRIPE_API_BASE): %w", cause),
			"payment provider error")
	case se.HTTPStatusCode == http.StatusForbidden:
		return agentmarket.Wrap(agentmarket.Internal, "payment_provider_auth",
			fmt.Errorf("the Stripe secret key lacks a permission this call needs: check AGENTMARKET_STRIPE_SECRET_KEY: %w", cause),
			"payment provider error")
	case se.HTTPStatusCode == http.StatusTooManyRequests || se.Code == stripego.ErrorCodeRateLimit:
		return agentmarket.Wrap(agentmarket.Unavailable, "payment_provider_rate_limited", cause,
			"the payment provider is rate limiting us; try again later")
	case se.HTTPStatusCode >= 500 || se.Type == stripego.ErrorTypeAPI:
		return agentmarket.Wrap(agentmarket.Unavailable, "payment_provider_unavailable", cause,
			"the payment provider is unavailable; try again later")
	case se.Type == stripego.ErrorTypeIdempotency:
		return agentmarket.Wrap(agentmarket.Conflict, "payment_provider_idempotency_conflict", cause,
			"%s: this request was already sent with other parameters", op)
	case se.HTTPStatusCode == http.StatusConflict:
		// idempotency_key_in_use, lock_timeout: the same request is still
		// being processed; stripe-go has already retried.
		return agentmarket.Wrap(agentmarket.Unavailable, "payment_provider_busy", cause,
			"the payment provider is busy with this request; try again later")
	case se.Type == stripego.ErrorTypeCard:
		return agentmarket.Wrap(agentmarket.Invalid, "payment_card_declined", cause,
			"the card was declined: %s", se.Msg)
	case se.HTTPStatusCode == http.StatusNotFound || se.Code == stripego.ErrorCodeResourceMissing:
		return agentmarket.Wrap(agentmarket.NotFound, "payment_provider_not_found", cause,
			"%s: %s", op, se.Msg)
	default: // invalid_request_error, 400, 402
		e := agentmarket.Wrap(agentmarket.Invalid, "payment_provider_invalid_request", cause,
			"%s: the payment provider refused the request: %s", op, se.Msg)
		if se.Param != "" {
			e.Fields = []agentmarket.FieldError{{Field: se.Param, Rule: string(se.Code), Message: se.Msg}}
		}
		return e
	}
}

// isStripeCode reports whether err is a Stripe error with that code.
func isStripeCode(err error, code stripego.ErrorCode) bool {
	var se *stripego.Error
	return errors.As(err, &se) && se.Code == code
}
