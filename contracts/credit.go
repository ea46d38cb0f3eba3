package contracts

import (
	"context"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket"
)

// Prepaid credit (docs/billing.md, "Prepaid credit"). An org may hold a
// credit balance per currency, in micros: bought through Stripe (a
// Checkout Session, credited when its signed checkout.session.completed
// webhook arrives) or granted by the platform's operator (own-ledger mode,
// or as a goodwill gesture). The meter burns it down in real time: a call
// of an org holding credit in its listing's currency reserves its price
// against the balance before it is forwarded and burns what it cost when
// it ends (a2aproxy/credit.go), through the same reservations budgets use.
// An account marked Required refuses calls its balance cannot cover; one
// that is not lets them through, invoiced as usual, once its balance is
// spent. Invoices apply what a period's usage burned before charging.
//
// Every movement is a row: purchase and grant (positive), burn and refund
// (negative). The balance is their sum. Burns are written by the meters,
// a few seconds' worth in one row per org, currency and contract, never
// per call.

// CreditKind is what moved a credit balance.
type CreditKind string

const (
	CreditPurchase CreditKind = "purchase"
	CreditGrant    CreditKind = "grant"
	CreditBurned   CreditKind = "burn"
	CreditRefund   CreditKind = "refund"
	// CreditUnbilled gives back, at a month's close on the platform's own
	// ledger, what a contract's calls burned beyond what its invoice
	// charged (usage the month's allowance made free): positive.
	CreditUnbilled CreditKind = "unbilled"
)

// Bounds of credit amounts and notes.
const (
	// MaxCreditMicros bounds one purchase or grant (10^12 micros: a
	// million units of the currency).
	MaxCreditMicros int64 = 1_000_000_000_000
	MaxCreditNote         = 500
)

// CreditMovement is one movement of an org's credit in one currency.
type CreditMovement struct {
	ID       string     `json:"id"`
	OrgID    string     `json:"org_id"`
	Currency string     `json:"currency"`
	Kind     CreditKind `json:"kind"`
	// AmountMicros is signed: positive for a purchase or a grant,
	// negative for a burn or a refund.
	AmountMicros int64 `json:"amount_micros"`
	// ContractID is the subscription whose calls a burn paid.
	ContractID string `json:"subscription_id,omitempty"`
	// Ref makes a movement idempotent: a second movement of the same kind
	// and ref is not recorded (a purchase's Checkout Session, "cs:…").
	Ref   string    `json:"ref,omitempty"`
	Actor string    `json:"actor,omitempty"`
	Note  string    `json:"note,omitempty"`
	At    time.Time `json:"at"`
}

// CreditAccount is an org's credit in one currency.
type CreditAccount struct {
	OrgID    string `json:"org_id"`
	Currency string `json:"currency"`
	// BalanceMicros is CreditedMicros less BurnedMicros: what is left. It
	// may be below zero by what calls cost beyond their reservations (the
	// overshoot bound); the next purchase or grant covers that first.
	BalanceMicros int64 `json:"balance_micros"`
	// CreditedMicros is every purchase and grant less refunds, BurnedMicros
	// every burn: the meters reserve against their difference.
	CreditedMicros int64 `json:"credited_micros"`
	BurnedMicros   int64 `json:"burned_micros"`
	// Required: calls the balance cannot cover are refused (-32049);
	// otherwise they go on, invoiced as usual.
	Required bool `json:"required"`
	// LowBalanceMicros: when the balance falls below it, a low-balance
	// alert is recorded (and sent to the org's alert webhook); 0: none.
	LowBalanceMicros int64     `json:"low_balance_micros"`
	UpdatedAt        time.Time `json:"updated_at"`
}

// CreditBurn is what an org's calls under one contract burned of its
// credit in a currency since the meter last wrote.
type CreditBurn struct {
	OrgID, Currency, ContractID string
	Micros                      int64
	At                          time.Time
}

// CreditStore keeps credit accounts and movements (contracts/gormstore);
// every implementation passes contracts/storetest's RunCredit.
type CreditStore interface {
	// AddCredit records a purchase, grant or refund and moves the
	// account's balance, creating the account (and marking the org as
	// holding credit) on its first movement. A movement whose kind and
	// ref are recorded already changes nothing: added is false.
	AddCredit(ctx context.Context, m *CreditMovement) (acct *CreditAccount, added bool, err error)
	// RecordBurns records burns, one movement each, and lowers the
	// balances.
	RecordBurns(ctx context.Context, burns []CreditBurn) error
	// CreditAccount is an org's account in a currency; NotFound for none.
	CreditAccount(ctx context.Context, orgID, currency string) (*CreditAccount, error)
	// CreditAccounts are an org's accounts ("" for every org's), by
	// currency.
	CreditAccounts(ctx context.Context, orgID string) ([]CreditAccount, error)
	// CreditMovements are an org's movements, newest first, at most limit;
	// of one currency unless it is "".
	CreditMovements(ctx context.Context, orgID, currency string, limit int) ([]CreditMovement, error)
	// SetCreditSettings sets an existing account's Required and
	// LowBalanceMicros; NotFound for none.
	SetCreditSettings(ctx context.Context, orgID, currency string, required bool, lowMicros int64, at time.Time) (*CreditAccount, error)
	// CreditBurned is what a contract's calls burned in [from, to).
	CreditBurned(ctx context.Context, contractID string, from, to time.Time) (int64, error)
}

// CreditReader is what a meter reads of an org's credit.
type CreditReader interface {
	CreditAccount(ctx context.Context, orgID, currency string) (*CreditAccount, error)
	RecordBurns(ctx context.Context, burns []CreditBurn) error
}

// CheckoutRequest is a credit purchase to open with the payment
// provider.
type CheckoutRequest struct {
	OrgID, Currency string
	// AmountMinor is in the currency's minor units (cents): what the buyer
	// pays and what is credited.
	AmountMinor int64
	SuccessURL  string
	CancelURL   string
}

// Checkout is an opened purchase: the buyer pays at URL.
type Checkout struct {
	ID  string `json:"id"`
	URL string `json:"url"`
}

// CreditCheckouts opens purchases with the payment provider (billing/stripe).
type CreditCheckouts interface {
	CreateCreditCheckout(ctx context.Context, in CheckoutRequest) (Checkout, error)
}

// Credits is the credit service.
type Credits struct {
	Store CreditStore
	Clock agentmarket.Clock
	// Checkouts opens purchases (nil: own-ledger mode, credit is granted
	// by the operator only).
	Checkouts CreditCheckouts
	// Audit records every purchase, grant, refund and settings change
	// (nil: none is).
	Audit agentmarket.ChangeRecorder
}

// CreditInput is a grant or a refund by the operator, or a purchase.
type CreditInput struct {
	OrgID        string `json:"org_id"`
	Currency     string `json:"currency"`
	AmountMicros int64  `json:"amount_micros"`
	Note         string `json:"note"`
	// SuccessURL and CancelURL are where the provider's checkout page
	// sends the buyer back (a purchase only).
	SuccessURL string `json:"success_url"`
	CancelURL  string `json:"cancel_url"`
}

func (in *CreditInput) validate(fe *agentmarket.Fields) {
	in.Currency = strings.ToLower(strings.TrimSpace(in.Currency))
	if _, ok := agentmarket.MinorUnitDigits(in.Currency); !ok {
		fe.Add("currency", "one_of", "currency must be one of %s", agentmarket.CurrencyList())
	}
	if in.AmountMicros <= 0 || in.AmountMicros > MaxCreditMicros {
		fe.Add("amount_micros", "range", "amount_micros must be a positive integer of at most 10^12")
	}
	fe.Text("note", in.Note, MaxCreditNote)
}

func isOperator(a agentmarket.Actor) bool { return a.Operator && a.Role == agentmarket.RoleAdmin }

// Grant credits an org by the operator's hand (own-ledger mode, or a
// goodwill credit): only the platform's admins grant.
func (s *Credits) Grant(ctx context.Context, actor agentmarket.Actor, in CreditInput) (*CreditAccount, *CreditMovement, error) {
	return s.move(ctx, actor, CreditGrant, in)
}

// Refund takes credit back by the operator's hand (the buyer was refunded
// outside the platform): the balance falls by the amount.
func (s *Credits) Refund(ctx context.Context, actor agentmarket.Actor, in CreditInput) (*CreditAccount, *CreditMovement, error) {
	return s.move(ctx, actor, CreditRefund, in)
}

func (s *Credits) move(ctx context.Context, actor agentmarket.Actor, kind CreditKind, in CreditInput) (*CreditAccount, *CreditMovement, error) {
	if !isOperator(actor) {
		return nil, nil, agentmarket.Errorf(agentmarket.Forbidden, "forbidden", "only the platform operator grants or refunds credit")
	}
	var fe agentmarket.Fields
	in.OrgID = strings.TrimSpace(in.OrgID)
	if in.OrgID == "" {
		fe.Add("org_id", "required", "org_id is required: the org to credit")
	}
	in.validate(&fe)
	if err := fe.Err("invalid_credit", "the credit request is not valid"); err != nil {
		return nil, nil, err
	}
	amount := in.AmountMicros
	if kind == CreditRefund {
		amount = -amount
	}
	m := &CreditMovement{ID: agentmarket.NewID("crm"), OrgID: in.OrgID, Currency: in.Currency, Kind: kind, AmountMicros: amount,
		Actor: actorName(actor), Note: strings.TrimSpace(in.Note), At: s.Clock.Now().UTC()}
	m.Ref = m.ID
	acct, _, err := s.Store.AddCredit(ctx, m)
	if err != nil {
		return nil, nil, err
	}
	return acct, m, agentmarket.RecordChange(ctx, s.Audit, agentmarket.Change{Actor: actor, Action: "credit." + string(kind),
		ObjectType: "credit", ObjectID: m.ID, OrgID: m.OrgID, After: m})
}

// Purchase opens a Checkout Session for the actor's org: the buyer pays
// there, and the credit arrives with the provider's signed webhook
// (ConfirmPurchase). The amount must be whole minor units.
func (s *Credits) Purchase(ctx context.Context, actor agentmarket.Actor, in CreditInput) (Checkout, error) {
	if s.Checkouts == nil {
		return Checkout{}, agentmarket.Errorf(agentmarket.Unavailable, "credit_purchase_unavailable",
			"credit is not sold here (no payment provider is configured): the platform operator grants it")
	}
	if actor.Role != agentmarket.RoleAdmin && actor.Role != agentmarket.RoleFinance {
		return Checkout{}, agentmarket.Errorf(agentmarket.Forbidden, "forbidden", "only an admin or a finance key buys credit")
	}
	var fe agentmarket.Fields
	in.validate(&fe)
	digits, _ := agentmarket.MinorUnitDigits(in.Currency)
	perMinor := pow10(6 - digits)
	if in.AmountMicros > 0 && in.AmountMicros%perMinor != 0 {
		fe.Add("amount_micros", "whole_minor_units", "amount_micros must be whole minor units of the currency (a multiple of its minor unit in micros)")
	}
	fe.Text("success_url", in.SuccessURL, 2000)
	fe.Text("cancel_url", in.CancelURL, 2000)
	if err := fe.Err("invalid_credit", "the credit purchase is not valid"); err != nil {
		return Checkout{}, err
	}
	return s.Checkouts.CreateCreditCheckout(ctx, CheckoutRequest{OrgID: actor.OrgID, Currency: in.Currency, AmountMinor: in.AmountMicros / perMinor,
		SuccessURL: in.SuccessURL, CancelURL: in.CancelURL})
}

// ConfirmPurchase credits a paid purchase, on the provider's verified
// webhook: once per purchase (ref), however often it is delivered.
func (s *Credits) ConfirmPurchase(ctx context.Context, orgID, currency string, amountMinor int64, ref string) (bool, error) {
	currency = strings.ToLower(currency)
	digits, ok := agentmarket.MinorUnitDigits(currency)
	if !ok || amountMinor <= 0 || orgID == "" || ref == "" {
		return false, agentmarket.Errorf(agentmarket.Invalid, "invalid_credit_purchase", "the purchase names no org, a bad currency %q or amount %d", currency, amountMinor)
	}
	m := &CreditMovement{ID: agentmarket.NewID("crm"), OrgID: orgID, Currency: currency, Kind: CreditPurchase,
		AmountMicros: amountMinor * pow10(6-digits), Ref: ref, Actor: "stripe", At: s.Clock.Now().UTC()}
	_, added, err := s.Store.AddCredit(ctx, m)
	if err != nil || !added {
		return false, err
	}
	return true, agentmarket.RecordChange(ctx, s.Audit, agentmarket.Change{Actor: agentmarket.Actor{OrgID: orgID}, Action: "credit.purchase",
		ObjectType: "credit", ObjectID: m.ID, OrgID: orgID, After: m})
}

// CreditSettingsInput are an account's settings, set by its org's admin.
type CreditSettingsInput struct {
	Currency         string `json:"currency"`
	Required         bool   `json:"required"`
	LowBalanceMicros int64  `json:"low_balance_micros"`
}

// SetSettings sets whether the actor's org's credit in a currency is
// required, and its low-balance threshold.
func (s *Credits) SetSettings(ctx context.Context, actor agentmarket.Actor, in CreditSettingsInput) (*CreditAccount, error) {
	if actor.Role != agentmarket.RoleAdmin {
		return nil, agentmarket.Errorf(agentmarket.Forbidden, "forbidden", "only an admin sets the org's credit settings")
	}
	var fe agentmarket.Fields
	in.Currency = strings.ToLower(strings.TrimSpace(in.Currency))
	if in.LowBalanceMicros < 0 || in.LowBalanceMicros > MaxCreditMicros {
		fe.Add("low_balance_micros", "range", "low_balance_micros must be between 0 and 10^12")
	}
	if err := fe.Err("invalid_credit_settings", "the credit settings are not valid"); err != nil {
		return nil, err
	}
	before, err := s.Store.CreditAccount(ctx, actor.OrgID, in.Currency)
	if err != nil {
		return nil, err
	}
	after, err := s.Store.SetCreditSettings(ctx, actor.OrgID, in.Currency, in.Required, in.LowBalanceMicros, s.Clock.Now().UTC())
	if err != nil {
		return nil, err
	}
	return after, agentmarket.RecordChange(ctx, s.Audit, agentmarket.Change{Actor: actor, Action: "credit.settings",
		ObjectType: "credit_account", ObjectID: actor.OrgID + ":" + in.Currency, OrgID: actor.OrgID, Before: before, After: after})
}

// Accounts are the org's credit accounts (the operator may name any org).
func (s *Credits) Accounts(ctx context.Context, actor agentmarket.Actor, orgID string) ([]CreditAccount, error) {
	org, err := creditOrg(actor, orgID)
	if err != nil {
		return nil, err
	}
	return s.Store.CreditAccounts(ctx, org)
}

// Movements are the org's credit movements, newest first.
func (s *Credits) Movements(ctx context.Context, actor agentmarket.Actor, orgID, currency string) ([]CreditMovement, error) {
	org, err := creditOrg(actor, orgID)
	if err != nil {
		return nil, err
	}
	return s.Store.CreditMovements(ctx, org, strings.ToLower(currency), 500)
}

// creditOrg is the org whose credit actor reads: its own, or for the
// operator any.
func creditOrg(actor agentmarket.Actor, orgID string) (string, error) {
	switch {
	case orgID == "" || orgID == actor.OrgID:
		return actor.OrgID, nil
	case isOperator(actor):
		return orgID, nil
	}
	return "", agentmarket.Errorf(agentmarket.NotFound, "not_found", "no org %q", orgID)
}

func pow10(n int) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}
