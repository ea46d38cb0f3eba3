package contracts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Low-balance alerts of prepaid credit (credit.go): when an account's
// balance is below the low-balance threshold its org set, an alert is
// recorded and sent to the org's alert webhook through the push delivery
// outbox, like a budget's spend alert: once per account and credited
// total, so a purchase or grant that lifts the balance arms it again.

// BudgetCredit is the kind of a low-balance alert; its Subject is the
// currency, BudgetMicros the threshold and SpentMicros the balance.
const BudgetCredit BudgetKind = "credit"

// CreditAlertBody is what an alert webhook receives of a low balance.
type CreditAlertBody struct {
	Type             string    `json:"type"` // "credit_low"
	ID               string    `json:"id"`
	OrgID            string    `json:"org_id"`
	Currency         string    `json:"currency"`
	BalanceMicros    int64     `json:"balance_micros"`
	LowBalanceMicros int64     `json:"low_balance_micros"`
	CreatedAt        time.Time `json:"created_at"`
}

// evaluateCredit records the low-balance alerts not yet recorded.
func (s *Alerts) evaluateCredit(ctx context.Context, month, now time.Time) (int, error) {
	if s.Credit == nil {
		return 0, nil
	}
	accts, err := s.Credit.CreditAccounts(ctx, "")
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, c := range accts {
		if c.LowBalanceMicros <= 0 || c.BalanceMicros >= c.LowBalanceMicros {
			continue
		}
		a := &Alert{ID: AlertID(BudgetCredit, fmt.Sprintf("%s|%s|%d", c.OrgID, c.Currency, c.CreditedMicros), time.Time{}, 0), OrgID: c.OrgID,
			Kind: BudgetCredit, Subject: c.Currency, PeriodStart: month, BudgetMicros: c.LowBalanceMicros, SpentMicros: c.BalanceMicros, CreatedAt: now}
		body, err := json.Marshal(CreditAlertBody{Type: "credit_low", ID: a.ID, OrgID: c.OrgID, Currency: c.Currency, BalanceMicros: c.BalanceMicros,
			LowBalanceMicros: c.LowBalanceMicros, CreatedAt: now})
		if err != nil {
			return n, err
		}
		d, err := s.webhookDelivery(ctx, a, body)
		if err == nil {
			var ok bool
			if ok, err = s.Store.RecordAlert(ctx, a, d); ok {
				n++
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("credit %s %s: %w", c.OrgID, c.Currency, err))
		}
	}
	return n, errors.Join(errs...)
}
