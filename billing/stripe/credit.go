package stripe

import (
	"context"

	stripego "github.com/stripe/stripe-go/v76"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/contracts"
)

// Prepaid credit is bought through a Checkout Session in payment mode: a
// one-off price of the amount, the org and currency in its metadata. The
// credit arrives with the session's checkout.session.completed webhook
// (WebhookVerifier reads the metadata back), never from this call's
// answer: only a paid session credits.

// Metadata keys of a credit purchase's Checkout Session.
const (
	metaCreditOrg      = "agentmarket_credit_org"
	metaCreditCurrency = "agentmarket_credit_currency"
)

var _ contracts.CreditCheckouts = (*Provider)(nil)

// CreateCreditCheckout implements contracts.CreditCheckouts.
func (p *Provider) CreateCreditCheckout(ctx context.Context, in contracts.CheckoutRequest) (contracts.Checkout, error) {
	var fe agentmarket.Fields
	if in.OrgID == "" {
		fe.Add("org_id", "required", "org_id is required")
	}
	if _, err := billing.MinorUnitDigits(in.Currency); err != nil {
		fe.Add("currency", "unknown_currency", "currency %q is not one AgentMarket can bill in", in.Currency)
	}
	if in.AmountMinor <= 0 {
		fe.Add("amount_minor", "positive", "a purchase's amount must be positive")
	}
	if err := fe.Err("invalid_credit_purchase", "the credit purchase cannot be opened"); err != nil {
		return contracts.Checkout{}, err
	}
	meta := map[string]string{metaCreditOrg: in.OrgID, metaCreditCurrency: in.Currency}
	sp := &stripego.CheckoutSessionParams{
		Params:            stripego.Params{Context: ctx, Metadata: meta},
		Mode:              stripego.String(string(stripego.CheckoutSessionModePayment)),
		ClientReferenceID: stripego.String(in.OrgID),
		SuccessURL:        stripego.String(in.SuccessURL),
		LineItems: []*stripego.CheckoutSessionLineItemParams{{
			Quantity: stripego.Int64(1),
			PriceData: &stripego.CheckoutSessionLineItemPriceDataParams{
				Currency:    stripego.String(in.Currency),
				UnitAmount:  stripego.Int64(in.AmountMinor),
				ProductData: &stripego.CheckoutSessionLineItemPriceDataProductDataParams{Name: stripego.String("AgentMarket prepaid credit")},
			},
		}},
		PaymentIntentData: &stripego.CheckoutSessionPaymentIntentDataParams{Metadata: meta},
	}
	if in.CancelURL != "" {
		sp.CancelURL = stripego.String(in.CancelURL)
	}
	s, err := p.api.CheckoutSessions.New(sp)
	if err != nil {
		return contracts.Checkout{}, mapError("open the credit purchase", err)
	}
	return contracts.Checkout{ID: s.ID, URL: s.URL}, nil
}

// creditPurchaseOf reads a paid credit purchase from a Checkout Session
// event's object; nil when it is not one (another session, or unpaid).
func creditPurchaseOf(obj map[string]any) *billing.CreditPurchase {
	if str(obj["object"]) != "checkout.session" || str(obj["payment_status"]) != "paid" {
		return nil
	}
	meta, _ := obj["metadata"].(map[string]any)
	org := str(meta[metaCreditOrg])
	if org == "" {
		return nil
	}
	amount, _ := obj["amount_total"].(float64)
	return &billing.CreditPurchase{OrgID: org, Currency: str(obj["currency"]), AmountMinor: int64(amount), Ref: "cs:" + str(obj["id"])}
}
