package contracts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket"
)

// Spend alerts: every monthly budget (an API key's, a contract's) has
// thresholds, in percent of the budget (the org's, DefaultAlertThresholds
// unless it set its own; a budget may have its own). When a budget's spend
// this calendar month (the list price of its usage, as the meter counts it
// against the budget) reaches a threshold, an Alert is recorded, once per
// budget, threshold and month, and, when the org has an alert webhook,
// POSTed there through the push delivery outbox: the meter delivers it as
// it delivers push notifications (the org's token in the
// X-A2A-Notification-Token header, its Authorization, retries with backoff,
// a failed delivery retried by hand).

// DefaultAlertThresholds are the thresholds of a budget whose org set none.
var DefaultAlertThresholds = []int{50, 80, 100}

// Bounds of alert thresholds.
const (
	MaxAlertThresholds = 10
	MaxAlertPercent    = 1000
)

// BudgetKind names what a budget caps.
type BudgetKind string

const (
	BudgetAPIKey       BudgetKind = "api_key"
	BudgetSubscription BudgetKind = "subscription"
)

// Alert is a budget's spend reaching one of its thresholds in a month.
type Alert struct {
	ID      string
	OrgID   string
	Kind    BudgetKind
	Subject string // the key's or the contract's id
	// PeriodStart is the month's first instant (UTC).
	PeriodStart  time.Time
	Percent      int
	BudgetMicros int64
	SpentMicros  int64
	CreatedAt    time.Time
}

// AlertID is the alert's stable id: the same budget, threshold and month
// always make the same alert (and the same webhook delivery).
func AlertID(kind BudgetKind, subject string, periodStart time.Time, percent int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s|%s|%d|%d", kind, subject, periodStart.Unix(), percent)))
	return "alr_" + hex.EncodeToString(h[:12])
}

// AlertSettings are an org's: its thresholds (nil: the default) and the
// URL of its alert webhook ("" for none).
type AlertSettings struct {
	Thresholds []int
	WebhookURL string
}

// AlertStore keeps alerts and the alert settings of orgs and budgets
// (contracts/gormstore); every implementation passes contracts/storetest.
type AlertStore interface {
	// BudgetedKeys lists the keys with a monthly budget, not revoked.
	BudgetedKeys(ctx context.Context) ([]APIKey, error)
	// BudgetedContracts lists the contracts with a monthly budget, not
	// canceled.
	BudgetedContracts(ctx context.Context) ([]Contract, error)
	// OrgAlertThresholds returns an org's thresholds, nil when it set none.
	OrgAlertThresholds(ctx context.Context, orgID string) ([]int, error)
	SetOrgAlertThresholds(ctx context.Context, orgID string, thresholds []int, at time.Time) error
	// SetBudgetAlertThresholds sets a key's or a contract's own thresholds
	// (nil: the org's); NotFound for another org's.
	SetBudgetAlertThresholds(ctx context.Context, orgID string, kind BudgetKind, id string, thresholds []int) error
	// RecordAlert records a, and d (when not nil) in the push outbox, in
	// one transaction, unless an alert with a's ID exists; it reports
	// whether it recorded them.
	RecordAlert(ctx context.Context, a *Alert, d *Delivery) (bool, error)
	// Alerts lists an org's alerts of the month starting at periodStart,
	// newest first.
	Alerts(ctx context.Context, orgID string, periodStart time.Time) ([]Alert, error)
}

// SecretSealer encrypts a secret bound to a context (listings/aesgcm).
type SecretSealer interface {
	Seal(plaintext, context []byte) ([]byte, error)
}

// URLChecker judges a webhook URL before it is stored (the SSRF guard:
// loopback, private and metadata addresses are refused unless allowed).
type URLChecker interface {
	CheckWebhook(ctx context.Context, rawURL string) error
}

// Alerts records budgets' alerts and delivers them.
type Alerts struct {
	Store AlertStore
	Push  PushStore
	Spend Spend
	Clock agentmarket.Clock
	// Sealer seals the webhook's token and credentials as the meter's
	// push delivery opens them; URLs judges the webhook.
	Sealer SecretSealer
	URLs   URLChecker
	// Audit records every change of the alert settings (nil: none is).
	Audit agentmarket.ChangeRecorder
	// Credit is the orgs' prepaid credit, whose low balances alert
	// (creditalerts.go); nil: none do.
	Credit CreditStore
}

// AlertConfigID is the push config id of an org's alert webhook. Its
// listing and task ids are empty: no A2A task has such a config.
func AlertConfigID(orgID string) string { return "alerts:" + orgID }

// pushSealContext and pushSecrets are the meter's sealing of a push
// config's secrets (a2aproxy/push.go): the meter opens the alert
// webhook's like any other when it delivers (TestSpendAlerts proves the
// two agree).
func pushSealContext(listingID, taskID, configID string) []byte {
	return []byte("push|" + listingID + "|" + taskID + "|" + configID)
}

type pushSecrets struct {
	Token       string `json:"token,omitempty"`
	Credentials string `json:"credentials,omitempty"`
}

// parseThresholds checks thresholds and returns them sorted, without
// repeats; nil stays nil.
func parseThresholds(fe *agentmarket.Fields, field string, in []int) []int {
	if in == nil {
		return nil
	}
	if len(in) > MaxAlertThresholds {
		fe.Add(field, "max_items", "at most %d thresholds", MaxAlertThresholds)
	}
	out := slices.Clone(in)
	for i, p := range out {
		if p < 1 || p > MaxAlertPercent {
			fe.Add(fmt.Sprintf("%s[%d]", field, i), "range", "a threshold is a percent of the budget, 1 to %d", MaxAlertPercent)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// checkBudgetThresholds checks a budget's own thresholds: only a budget
// has thresholds.
func checkBudgetThresholds(fe *agentmarket.Fields, th []int, budget *int64) []int {
	out := parseThresholds(fe, "alert_thresholds", th)
	if out != nil && budget == nil {
		fe.Add("alert_thresholds", "requires_budget", "alert thresholds are percents of a monthly budget: set monthly_budget_micros")
	}
	return out
}

// WebhookInput is an org's alert webhook: where alerts are POSTed, the
// token sent with each (X-A2A-Notification-Token), and optional
// credentials for the Authorization header.
type WebhookInput struct {
	URL            string `json:"url"`
	Token          string `json:"token"`
	Authentication *struct {
		Scheme      string `json:"scheme"`
		Credentials string `json:"credentials"`
	} `json:"authentication"`
}

// AlertSettingsInput changes an org's alert settings: thresholds (nil
// keeps them; [] returns to the default) and the webhook (nil keeps it;
// an empty url removes it).
type AlertSettingsInput struct {
	Thresholds *[]int        `json:"thresholds"`
	Webhook    *WebhookInput `json:"webhook"`
}

// Settings returns the actor's org's alert settings.
func (s *Alerts) Settings(ctx context.Context, actor agentmarket.Actor) (AlertSettings, error) {
	th, err := s.Store.OrgAlertThresholds(ctx, actor.OrgID)
	if err != nil {
		return AlertSettings{}, err
	}
	out := AlertSettings{Thresholds: th}
	cfg, err := s.Push.PushConfig(ctx, "", "", AlertConfigID(actor.OrgID))
	switch {
	case err == nil:
		out.WebhookURL = cfg.URL
	case agentmarket.KindOf(err) != agentmarket.NotFound:
		return AlertSettings{}, err
	}
	return out, nil
}

// SetSettings changes the actor's org's thresholds and webhook.
func (s *Alerts) SetSettings(ctx context.Context, actor agentmarket.Actor, in AlertSettingsInput) (AlertSettings, error) {
	var fe agentmarket.Fields
	var th []int
	if in.Thresholds != nil {
		th = parseThresholds(&fe, "thresholds", *in.Thresholds)
		if th == nil {
			th = []int{}
		}
	}
	w := in.Webhook
	if w != nil && w.URL != "" {
		if fe.Text("webhook.url", w.URL, 2048) {
			if u, err := url.Parse(w.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
				fe.Add("webhook.url", "format", "webhook.url must be an http(s) URL without credentials in it")
			} else if err := s.URLs.CheckWebhook(ctx, w.URL); err != nil {
				msg := "the webhook's address is refused: it must be public"
				var ae *agentmarket.Error
				if errors.As(err, &ae) && ae.Kind == agentmarket.Invalid {
					msg = ae.Message
				} else if ae == nil || ae.Kind != agentmarket.Invalid {
					return AlertSettings{}, err
				}
				fe.Add("webhook.url", "refused", "%s", msg)
			}
		}
		if strings.ContainsAny(w.Token, "\r\n\x00") || len(w.Token) > 1024 {
			fe.Add("webhook.token", "format", "webhook.token is at most 1024 bytes without line breaks")
		}
		if a := w.Authentication; a != nil && (strings.ContainsAny(a.Scheme+a.Credentials, "\r\n\x00") || strings.ContainsAny(a.Scheme, " \t")) {
			fe.Add("webhook.authentication", "format", "the authentication is a scheme name and credentials without line breaks")
		}
	}
	if err := fe.Err("invalid_alert_settings", "the alert settings are not valid"); err != nil {
		return AlertSettings{}, err
	}
	before, err := s.Settings(ctx, actor)
	if err != nil {
		return AlertSettings{}, err
	}
	now := s.Clock.Now()
	if in.Thresholds != nil {
		if len(th) == 0 {
			th = nil
		}
		if err := s.Store.SetOrgAlertThresholds(ctx, actor.OrgID, th, now); err != nil {
			return AlertSettings{}, err
		}
	}
	if w != nil {
		id := AlertConfigID(actor.OrgID)
		if w.URL == "" {
			if err := s.Push.DeletePushConfig(ctx, "", "", id); err != nil && agentmarket.KindOf(err) != agentmarket.NotFound {
				return AlertSettings{}, err
			}
		} else if err := s.saveWebhook(ctx, actor.OrgID, *w, now); err != nil {
			return AlertSettings{}, err
		}
	}
	after, err := s.Settings(ctx, actor)
	if err != nil {
		return AlertSettings{}, err
	}
	return after, agentmarket.RecordChange(ctx, s.Audit, agentmarket.Change{Actor: actor, Action: "alerts.settings", ObjectType: "org",
		ObjectID: actor.OrgID, OrgID: actor.OrgID, Before: before, After: after})
}

func (s *Alerts) saveWebhook(ctx context.Context, orgID string, w WebhookInput, now time.Time) error {
	id := AlertConfigID(orgID)
	sec := pushSecrets{Token: w.Token}
	scheme := ""
	if a := w.Authentication; a != nil && a.Scheme != "" {
		scheme, sec.Credentials = a.Scheme, a.Credentials
	}
	plain, _ := json.Marshal(sec)
	sealed, err := s.Sealer.Seal(plain, pushSealContext("", "", id))
	if err != nil {
		return agentmarket.Wrap(agentmarket.Internal, "seal_failed", err, "could not store the webhook's secrets")
	}
	// No agent calls back on this config: its callback is a random name
	// whose secret nobody knows.
	var b [32]byte
	rand.Read(b[:])
	callback := "alerts-" + hex.EncodeToString(b[:16])
	h := sha256.Sum256(b[16:])
	return s.Push.SavePushConfig(ctx, PushConfig{ListingID: "", TaskID: "", ConfigID: id, OrgID: orgID, URL: w.URL, Sealed: sealed,
		AuthScheme: scheme, CallbackID: callback, SecretHash: hex.EncodeToString(h[:]), CreatedAt: now})
}

// SetBudgetThresholds sets a budget's own thresholds ([]: back to the
// org's).
func (s *Alerts) SetBudgetThresholds(ctx context.Context, actor agentmarket.Actor, kind BudgetKind, id string, th []int) error {
	var fe agentmarket.Fields
	th = parseThresholds(&fe, "alert_thresholds", th)
	if err := fe.Err("invalid_alert_thresholds", "the alert thresholds are not valid"); err != nil {
		return err
	}
	if len(th) == 0 {
		th = nil
	}
	if err := s.Store.SetBudgetAlertThresholds(ctx, actor.OrgID, kind, id, th); err != nil {
		return err
	}
	return agentmarket.RecordChange(ctx, s.Audit, agentmarket.Change{Actor: actor, Action: "alerts.budget_thresholds", ObjectType: string(kind),
		ObjectID: id, OrgID: actor.OrgID, After: map[string][]int{"alert_thresholds": th}})
}

// List returns the actor's org's alerts of the month starting at
// periodStart, newest first.
func (s *Alerts) List(ctx context.Context, actor agentmarket.Actor, periodStart time.Time) ([]Alert, error) {
	return s.Store.Alerts(ctx, actor.OrgID, periodStart)
}

// budget is one budget under watch.
type budget struct {
	kind       BudgetKind
	id, orgID  string
	micros     int64
	thresholds []int // its own, nil: the org's
	name       string
}

// Evaluate records the alerts of every budget whose spend this month
// reached a threshold not yet alerted, and enqueues their webhook
// deliveries; it returns how many it recorded. A budget that fails does
// not stop the others.
func (s *Alerts) Evaluate(ctx context.Context) (int, error) {
	now := s.Clock.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	var budgets []budget
	keys, err := s.Store.BudgetedKeys(ctx)
	if err != nil {
		return 0, err
	}
	for _, k := range keys {
		budgets = append(budgets, budget{kind: BudgetAPIKey, id: k.ID, orgID: k.OrgID, micros: *k.MonthlyBudgetMicros,
			thresholds: k.AlertThresholds, name: k.Name})
	}
	cs, err := s.Store.BudgetedContracts(ctx)
	if err != nil {
		return 0, err
	}
	for _, c := range cs {
		budgets = append(budgets, budget{kind: BudgetSubscription, id: c.ID, orgID: c.BuyerOrgID, micros: *c.MonthlyBudgetMicros,
			thresholds: c.AlertThresholds, name: c.ListingID})
	}
	orgs := map[string][]int{}
	n := 0
	var errs []error
	for _, b := range budgets {
		recorded, err := s.evaluate(ctx, b, month, now, orgs)
		n += recorded
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", b.kind, b.id, err))
		}
	}
	recorded, err := s.evaluateCredit(ctx, month, now)
	n += recorded
	if err != nil {
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}

func (s *Alerts) evaluate(ctx context.Context, b budget, month, now time.Time, orgs map[string][]int) (int, error) {
	th := b.thresholds
	if th == nil {
		var ok bool
		if th, ok = orgs[b.orgID]; !ok {
			var err error
			if th, err = s.Store.OrgAlertThresholds(ctx, b.orgID); err != nil {
				return 0, err
			}
			if th == nil {
				th = DefaultAlertThresholds
			}
			orgs[b.orgID] = th
		}
	}
	keyID, contractID := b.id, ""
	if b.kind == BudgetSubscription {
		keyID, contractID = "", b.id
	}
	spent, err := s.Spend.Spent(ctx, keyID, contractID, month)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, pct := range th {
		if !Reached(spent, b.micros, pct) {
			continue
		}
		a := &Alert{ID: AlertID(b.kind, b.id, month, pct), OrgID: b.orgID, Kind: b.kind, Subject: b.id, PeriodStart: month, Percent: pct,
			BudgetMicros: b.micros, SpentMicros: spent, CreatedAt: now}
		d, err := s.delivery(ctx, a, b.name)
		if err != nil {
			return n, err
		}
		ok, err := s.Store.RecordAlert(ctx, a, d)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// Reached reports whether spent reached pct percent of a budget: spent ×
// 100 ≥ budget × pct, in integers (budgets and percents are bounded, so
// the product fits). A budget of zero is reached by the first spend.
func Reached(spent, budgetMicros int64, pct int) bool {
	if spent <= 0 {
		return false
	}
	threshold := (budgetMicros*int64(pct) + 99) / 100 // the spend at which it is reached, rounded up
	return spent >= threshold
}

// AlertBody is what an alert webhook receives.
type AlertBody struct {
	Type         string     `json:"type"` // "spend_alert"
	ID           string     `json:"id"`
	OrgID        string     `json:"org_id"`
	BudgetKind   BudgetKind `json:"budget_kind"`
	BudgetID     string     `json:"budget_id"`
	BudgetName   string     `json:"budget_name"`
	Percent      int        `json:"threshold_percent"`
	BudgetMicros int64      `json:"monthly_budget_micros"`
	SpentMicros  int64      `json:"spent_micros"`
	PeriodStart  time.Time  `json:"period_start"`
	PeriodEnd    time.Time  `json:"period_end"`
	CreatedAt    time.Time  `json:"created_at"`
}

// delivery is the alert's webhook delivery, nil when the org has no alert
// webhook.
func (s *Alerts) delivery(ctx context.Context, a *Alert, name string) (*Delivery, error) {
	body, err := json.Marshal(AlertBody{Type: "spend_alert", ID: a.ID, OrgID: a.OrgID, BudgetKind: a.Kind, BudgetID: a.Subject, BudgetName: name,
		Percent: a.Percent, BudgetMicros: a.BudgetMicros, SpentMicros: a.SpentMicros, PeriodStart: a.PeriodStart,
		PeriodEnd: a.PeriodStart.AddDate(0, 1, 0), CreatedAt: a.CreatedAt})
	if err != nil {
		return nil, err
	}
	return s.webhookDelivery(ctx, a, body)
}

// webhookDelivery is the delivery of an alert with body to its org's
// alert webhook, nil when the org has none.
func (s *Alerts) webhookDelivery(ctx context.Context, a *Alert, body []byte) (*Delivery, error) {
	if s.Push == nil {
		return nil, nil
	}
	cfg, err := s.Push.PushConfig(ctx, "", "", AlertConfigID(a.OrgID))
	if agentmarket.KindOf(err) == agentmarket.NotFound {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return &Delivery{ID: "dlv_" + a.ID, ListingID: "", TaskID: "", ConfigID: AlertConfigID(a.OrgID), OrgID: a.OrgID,
		Destination: Destination(cfg.URL), Body: body,
		Status: DeliveryPending, NextAttemptAt: a.CreatedAt, CreatedAt: a.CreatedAt}, nil
}
