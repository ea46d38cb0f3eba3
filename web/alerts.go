package web

import (
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// alertView is a spend alert as the pages show it.
type alertView struct {
	contracts.Alert
	Subject string // the key's or the subscription's name
	Budget  string
	Spent   string // as exact as its budget: an alert compares the two
}

// monthAlerts are the actor's org's spend alerts this month, newest
// first (none without alerts or the right to read usage).
func (u *UI) monthAlerts(r *req) ([]alertView, error) {
	if u.d.Alerts == nil || !u.can(r, contracts.ObjUsage, contracts.ActRead) {
		return nil, nil
	}
	now := u.d.Clock.Now().UTC()
	list, err := u.d.Alerts.List(r.ctx, r.actor, time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		return nil, err
	}
	lb := u.newLabeler(r)
	cur, _ := lb.currency()
	var subs map[string]string
	out := make([]alertView, len(list))
	for i, a := range list {
		v := alertView{Alert: a, Budget: formatMicros(a.BudgetMicros, cur), Spent: formatMicros(a.SpentMicros, cur)}
		switch a.Kind {
		case contracts.BudgetAPIKey:
			v.Subject = "key " + lb.key(a.Subject)
		case contracts.AlertAgentDown:
			v.Subject = "the agent of your listing " + lb.listing(a.Subject).name
		default:
			if subs == nil {
				subs = map[string]string{}
				if cs, err := u.d.Subscriptions.List(r.ctx, r.actor); err == nil {
					for _, c := range cs {
						subs[c.ID] = lb.listing(c.ListingID).name
					}
				}
			}
			v.Subject = "the subscription to " + subs[a.Subject]
		}
		out[i] = v
	}
	return out, nil
}

type alertsData struct {
	form
	Alerts    []alertView
	Month     string
	Default   bool
	Webhook   string
	CanChange bool
}

// alerts lists this month's spend alerts and the org's alert settings.
func (u *UI) alerts(r *req) error {
	return u.alertsPage(r, nil)
}

func (u *UI) alertsPage(r *req, f *form) error {
	if err := u.require(r, contracts.ObjUsage, contracts.ActRead); err != nil {
		return err
	}
	if u.d.Alerts == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "alerts_not_available", "this marketplace keeps no spend alerts")
	}
	d := &alertsData{Month: u.d.Clock.Now().UTC().Format("January 2006"), CanChange: u.can(r, contracts.ObjSubscriptions, contracts.ActWrite)}
	var err error
	if d.Alerts, err = u.monthAlerts(r); err != nil {
		return err
	}
	st, err := u.d.Alerts.Settings(r.ctx, r.actor)
	if err != nil {
		return err
	}
	d.Webhook = st.WebhookURL
	th := st.Thresholds
	if d.Default = th == nil; d.Default {
		th = contracts.DefaultAlertThresholds
	}
	if f == nil {
		parts := make([]string, len(th))
		for i, p := range th {
			parts[i] = strconv.Itoa(p)
		}
		f = &form{Values: map[string]string{"thresholds": strings.Join(parts, ", "), "webhook_url": st.WebhookURL}}
	}
	d.form = *f
	return u.render(r, "alerts", "Spend alerts", d)
}

// saveAlertSettings saves the org's thresholds and webhook from the form.
func (u *UI) saveAlertSettings(r *req) error {
	if err := u.require(r, contracts.ObjSubscriptions, contracts.ActWrite); err != nil {
		return err
	}
	if u.d.Alerts == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "alerts_not_available", "this marketplace keeps no spend alerts")
	}
	f := &form{Values: map[string]string{"thresholds": r.c.FormValue("thresholds"), "webhook_url": strings.TrimSpace(r.c.FormValue("webhook_url"))}}
	th := []int{}
	for _, p := range strings.FieldsFunc(f.V("thresholds"), func(c rune) bool { return c == ',' || c == ' ' || c == '%' }) {
		n, err := strconv.Atoi(p)
		if err != nil {
			f.add("thresholds", "Thresholds are whole percents, like 50, 80, 100.")
			break
		}
		th = append(th, n)
	}
	in := contracts.AlertSettingsInput{Thresholds: &th}
	cur, err := u.d.Alerts.Settings(r.ctx, r.actor)
	if err != nil {
		return err
	}
	// The webhook changes when it is removed, or given another URL or a
	// token; the same URL without a token keeps the token stored.
	token := r.c.FormValue("webhook_token")
	switch {
	case r.c.FormValue("remove_webhook") != "":
		in.Webhook = &contracts.WebhookInput{}
	case f.V("webhook_url") != cur.WebhookURL || token != "":
		in.Webhook = &contracts.WebhookInput{URL: f.V("webhook_url"), Token: token}
	}
	if len(f.Errors) == 0 {
		_, err = u.d.Alerts.SetSettings(r.ctx, r.actor, in)
		if err == nil {
			return redirect(r, "/finance/alerts?notice=alertsset")
		}
		if !f.absorb(err, func(field string) string {
			switch {
			case strings.HasPrefix(field, "thresholds"):
				return "thresholds"
			case field == "webhook.url":
				return "webhook_url"
			case strings.HasPrefix(field, "webhook."):
				return "webhook_token"
			}
			return field
		}) {
			return err
		}
	}
	r.c.Status(fiber.StatusUnprocessableEntity)
	return u.alertsPage(r, f)
}
