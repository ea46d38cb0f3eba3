package web

import (
	"html/template"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// The prepaid credit page (contracts/credit.go): the org's balances and
// their movements, the settings form for its admin, the purchase form
// where credit is sold (Stripe), and the operator's grant form. The buyer
// page and the finance page link here.

type creditRow struct {
	contracts.CreditAccount
	Balance, Credited, Burned, Low template.HTML
}

type movementRow struct {
	contracts.CreditMovement
	Amount template.HTML
}

type creditData struct {
	// form holds why a settings, purchase or grant form was refused,
	// each message linked to its input.
	form
	Accounts  []creditRow
	Movements []movementRow
	Admin     bool // sets the settings
	Buy       bool // may buy, and credit is sold here
	Operator  bool // grants
}

func (u *UI) creditPage(r *req) error { return u.creditView(r, &creditData{}) }

// creditView renders the page, with d's form errors when a form was
// refused.
func (u *UI) creditView(r *req, d *creditData) error {
	if !r.signedIn {
		return agentmarket.Errorf(agentmarket.Unauthorized, "no_session", "sign in to see this page")
	}
	if u.d.Credits == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "not_found", "prepaid credit is not served here")
	}
	accts, err := u.d.Credits.Accounts(r.ctx, r.actor, "")
	if err != nil {
		return err
	}
	ms, err := u.d.Credits.Movements(r.ctx, r.actor, "", "")
	if err != nil {
		return err
	}
	d.Admin, d.Operator = r.actor.Role == agentmarket.RoleAdmin, r.actor.Operator && r.actor.Role == agentmarket.RoleAdmin
	d.Buy = u.d.Credits.Checkouts != nil && (r.actor.Role == agentmarket.RoleAdmin || r.actor.Role == agentmarket.RoleFinance)
	for _, a := range accts {
		d.Accounts = append(d.Accounts, creditRow{CreditAccount: a, Balance: moneyHTML(a.BalanceMicros, a.Currency),
			Credited: moneyHTML(a.CreditedMicros, a.Currency), Burned: moneyHTML(a.BurnedMicros, a.Currency), Low: moneyHTML(a.LowBalanceMicros, a.Currency)})
	}
	for _, m := range ms {
		d.Movements = append(d.Movements, movementRow{CreditMovement: m, Amount: moneyHTML(m.AmountMicros, m.Currency)})
	}
	return u.render(r, "credit", "Prepaid credit", d)
}

// formMicros reads a form field of whole micros; 0 when absent or bad
// (the service refuses it with the field named).
func formMicros(r *req, name string) int64 {
	v, _ := strconv.ParseInt(strings.TrimSpace(r.c.FormValue(name)), 10, 64)
	return v
}

func (u *UI) setCreditSettings(r *req) error {
	if u.d.Credits == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "not_found", "prepaid credit is not served here")
	}
	in := contracts.CreditSettingsInput{Currency: strings.Clone(r.c.FormValue("currency")), Required: r.c.FormValue("required") == "on",
		LowBalanceMicros: formMicros(r, "low_balance_micros")}
	if _, err := u.d.Credits.SetSettings(r.ctx, r.actor, in); err != nil {
		return u.creditRefused(r, err, map[string]string{"currency": "set-currency", "low_balance_micros": "low"})
	}
	return redirect(r, "/credit?notice=creditsettings")
}

func (u *UI) grantCredit(r *req) error {
	if u.d.Credits == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "not_found", "prepaid credit is not served here")
	}
	in := contracts.CreditInput{OrgID: strings.Clone(r.c.FormValue("org_id")), Currency: strings.Clone(r.c.FormValue("currency")),
		AmountMicros: formMicros(r, "amount_micros"), Note: strings.Clone(r.c.FormValue("note"))}
	if _, _, err := u.d.Credits.Grant(r.ctx, r.actor, in); err != nil {
		return u.creditRefused(r, err, map[string]string{"org_id": "grant-org", "currency": "grant-currency", "amount_micros": "grant-amount", "note": "grant-note"})
	}
	return redirect(r, "/credit?notice=granted")
}

func (u *UI) buyCredit(r *req) error {
	if u.d.Credits == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "not_found", "prepaid credit is not served here")
	}
	base := r.c.BaseURL()
	out, err := u.d.Credits.Purchase(r.ctx, r.actor, contracts.CreditInput{Currency: strings.Clone(r.c.FormValue("currency")),
		AmountMicros: formMicros(r, "amount_micros"), SuccessURL: base + "/credit?notice=purchased", CancelURL: base + "/credit"})
	if err != nil {
		return u.creditRefused(r, err, map[string]string{"currency": "buy-currency", "amount_micros": "buy-amount"})
	}
	return redirect(r, out.URL)
}

// creditRefused answers a form the service refused as invalid (or in
// conflict) with the page and why, each field's message linked to its
// input (inputs names the input of each API field); other errors are
// returned as they are.
func (u *UI) creditRefused(r *req, err error, inputs map[string]string) error {
	d := &creditData{}
	d.Labels = map[string]string{"org_id": "the organisation", "amount_micros": "the amount", "low_balance_micros": "the low balance", "currency": "the currency"}
	if !d.absorb(err, func(f string) string { return inputs[f] }) {
		return err
	}
	r.c.Status(fiber.StatusUnprocessableEntity)
	return u.creditView(r, d)
}
