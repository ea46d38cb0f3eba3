package main

import (
	"context"
	"fmt"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/web/webtest"
)

// browser is a headless Chromium for one test, with helpers that fail the
// test (and save a screenshot) at the first problem.
type browser struct {
	t   *testing.T
	ctx context.Context
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	chrome := chromeOrSkip(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	ctx, stop, err := webtest.Browser(ctx, chrome, 1280, 900)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	b := &browser{t: t, ctx: ctx}
	t.Cleanup(func() {
		if t.Failed() {
			shot := filepath.Join("testdata", "failures", strings.ReplaceAll(t.Name(), "/", "_")+".png")
			sctx, c := context.WithTimeout(ctx, 5*time.Second)
			if err := webtest.Screenshot(sctx, shot); err == nil {
				t.Logf("screenshot of the page at failure: %s", shot)
			}
			c()
		}
		stop()
		cancel()
	})
	return b
}

func (b *browser) must(what string, err error) {
	b.t.Helper()
	if err != nil {
		loc, _ := chromedp.Run(b.ctx, chromedp.Location())
		b.t.Fatalf("%s (at %s): %v", what, loc, err)
	}
}

func (b *browser) open(url string) { b.t.Helper(); b.must("open "+url, webtest.Open(b.ctx, url)) }
func (b *browser) fill(fields map[string]string) {
	b.t.Helper()
	b.must("fill", webtest.Fill(b.ctx, fields))
}

// submit clicks a form's button and waits for the page that answers to
// have an element matching wait. The page before is marked, so that an
// element it has already (a notice) is not taken for the answer.
func (b *browser) submit(sel, wait string) {
	b.t.Helper()
	b.must("mark the page", chromedp.Do(b.ctx, chromedp.Evaluate[chromedp.Void](`window.amBefore = true`)))
	b.click(sel)
	ready := `!window.amBefore && document.readyState === "complete" && document.querySelector(` + strconvQuote(wait) + `) !== null`
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](ready)) // fails while the next page loads
		if err == nil && ok {
			break
		}
		if time.Now().After(deadline) {
			b.must("submit "+sel+", wait for "+wait, fmt.Errorf("no answering page with it (%v)", err))
		}
	}
	b.must("submit "+sel+", wait for "+wait, chromedp.Do(b.ctx, chromedp.WaitVisible(chromedp.CSS(wait))))
}
func (b *browser) click(sel string) {
	b.t.Helper()
	b.must("click "+sel, chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(sel))))
}
func (b *browser) signOut(base string) {
	b.t.Helper()
	b.must("sign out", webtest.SignOut(b.ctx, base))
}
func (b *browser) signUp(base, org, email string) {
	b.t.Helper()
	b.open(base + "/signup")
	b.fill(map[string]string{"#org_name": org, "#email": email, "#password": "correct horse battery"})
	b.submit(`form[action="/signup"] button[type=submit]`, `p.notice`)
}

// subscribe subscribes the signed-in org to cm's listing on its page
// and points cm's calls at the endpoint the page shows.
func (b *browser) subscribe(base string, cm *commerceMarket) {
	b.t.Helper()
	b.open(base + "/listings/" + cm.listing)
	b.submit(`form[action$="/subscribe"] button[type=submit]`, `[data-endpoint]`)
	cm.agent = b.text("[data-endpoint]")
}

// text is the trimmed text of the first element matching sel.
func (b *browser) text(sel string) string {
	b.t.Helper()
	s, err := webtest.Text(b.ctx, sel)
	b.must("read "+sel, err)
	return strings.Join(strings.Fields(s), " ")
}

// TestWebTrials drives the trial in Chromium: a seller offers a 14-day
// trial on the listing form; the listing page shows it; a buyer starts it,
// choosing to stop at its end, then changes its mind on the subscriptions
// page; after a call, the invoice preview shows the trial's usage at zero
// and the fee only from the trial's end.
func TestWebTrials(t *testing.T) {
	b := newBrowser(t)
	t0 := browserT0()
	cm := newCommerceMarketAt(t, nil, commercePricing, t0)
	base := cm.m.URL
	days := int64(billing.MonthOf(t0).End.Sub(billing.MonthOf(t0).Start) / (24 * time.Hour))

	b.signUp(base, "Trial Agents", "owner@trial.example")
	// A refused price is said in the form's words (its label, dollars),
	// never the API's field names (issue 28).
	b.open(base + "/seller/new")
	b.fill(map[string]string{"#card_url": cm.agentURL + "/", "#monthly_fee": "10", "#task_price": "-0.5", "#input_price": "20000"})
	b.submit(`form[action="/seller/new"] button[type=submit]`, `#task_price-error`)
	if got := b.text("#task_price-error"); !strings.Contains(got, "Price per task must not be negative.") {
		t.Errorf("the negative price's error: %q", got)
	}
	if got := b.text("#input_price-error"); !strings.Contains(got, "at most $10,000.00") {
		t.Errorf("the price past its bound: %q", got)
	}
	if page := b.text("main"); strings.Contains(page, "_micros") || strings.Contains(page, "pending_review") {
		t.Errorf("the form shows the API's names: %q", page)
	}
	b.open(base + "/seller/new")
	b.click(`details:has(#trial_days) summary`)
	b.fill(map[string]string{"#card_url": cm.agentURL + "/", "#monthly_fee": "10", "#input_price": "3", "#output_price": "15",
		"#trial_days": "14", "#trial_tokens": "30", "#trial_cap": "2.5"})
	b.submit(`form[action="/seller/new"] button[type=submit]`, `.buy-box`)
	if got, want := b.text("[data-trial]"), "Free trial: 14 days, or until 30 tokens or $2.50 of usage are used"; got != want {
		t.Errorf("listing page trial: %q, want %q", got, want)
	}
	loc, _ := chromedp.Run(b.ctx, chromedp.Location())
	listing := strings.TrimPrefix(strings.SplitN(loc[strings.Index(loc, "/listings/"):], "?", 2)[0], "/listings/")
	b.signOut(base)

	b.signUp(base, "Globex Trials", "it@globex-trials.example")
	b.open(base + "/listings/" + listing)
	b.click("#cancel_at_trial_end")
	if got := b.text(`form[action$="/subscribe"] button[type=submit]`); got != "Start the free trial" {
		t.Errorf("subscribe button: %q", got)
	}
	b.submit(`form[action$="/subscribe"] button[type=submit]`, `[data-trial]`)
	if got := b.text(".sub .badge"); got != "trialing" {
		t.Errorf("status badge %q, want trialing", got)
	}
	if got, want := b.text("[data-trial]"), "until "+t0.AddDate(0, 0, 14).Format("2006-01-02")+" 00:00 UTC; then it stops. Usage until then is free."; got != want {
		t.Errorf("trial shown %q, want %q", got, want)
	}
	b.submit("[data-trial-toggle]", "p.notice")
	if got := b.text("p.notice"); got != "The subscription will convert to paid when its free trial ends." {
		t.Errorf("notice %q", got)
	}
	if got := b.text("[data-trial]"); !strings.Contains(got, "then it converts to paid") {
		t.Errorf("trial shown after the change %q", got)
	}
	endpoint := b.text("[data-endpoint]")

	// A key, one call inside the trial, and the invoice preview.
	b.open(base + "/keys")
	b.fill(map[string]string{"#name": "orchestrator"})
	b.submit(`form[action="/keys"] button[type=submit]`, `#new-key`)
	key := b.text("#new-key")
	cm.agent, cm.listing = endpoint, listing
	cm.call(t, key)
	b.open(base + "/finance/invoices")
	// The fee from the 17th on: $10 × (days − 16) / days, in cents, half up.
	paid := days - 16
	cents := (10_000_000*paid/days + 5_000) / 10_000
	fee := fmt.Sprintf("$%d.%02d", cents/100, cents%100)
	for sel, want := range map[string]string{
		`tr[data-kind="flat_fee"][data-part="0"] th`:                   fmt.Sprintf("Free trial: no monthly fee, prorated for 14 of %d days", days),
		`tr[data-kind="flat_fee"][data-part="0"] td:last-child`:        "$0.00",
		`tr[data-kind="input_tokens"][data-part="0"] td:first-of-type`: "9",
		`tr[data-kind="input_tokens"][data-part="0"] td:last-child`:    "$0.00",
		`tr[data-kind="flat_fee"][data-part="1"] th`:                   fmt.Sprintf("Monthly fee, prorated for %d of %d days", paid, days),
		`tr[data-kind="flat_fee"][data-part="1"] td:last-child`:        fee,
		`.invoice tfoot td:last-child`:                                 fee,
	} {
		if got := b.text(sel); got != want {
			t.Errorf("%s = %q, want %q", sel, got, want)
		}
	}
}

func (b *browser) signIn(base, email string) {
	b.t.Helper()
	b.must("sign in "+email, webtest.SignIn(b.ctx, base, email, "correct horse battery"))
}

// count is how many elements match sel.
func (b *browser) count(sel string) int {
	b.t.Helper()
	n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+strconvQuote(sel)+`).length`))
	b.must("count "+sel, err)
	return n
}

func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }

// TestWebPrivateOffers drives a private offer in Chromium: the buyer finds
// its org id on its page; the seller makes the offer to it; another buyer
// sees neither the offer nor its price; the buyer accepts it, and the
// invoice preview charges the month's minimum commitment.
func TestWebPrivateOffers(t *testing.T) {
	b := newBrowser(t)
	t0 := browserT0()
	cm := newCommerceMarketAt(t, nil, map[string]any{"currency": "usd", "monthly_fee_micros": 10_000_000}, t0)
	base := cm.m.URL
	days := int64(billing.MonthOf(t0).End.Sub(billing.MonthOf(t0).Start) / (24 * time.Hour))

	b.signUp(base, "Globex Offers", "it@globex-offers.example")
	b.open(base + "/buyer")
	buyerOrg := b.text("[data-org-id]")
	b.signOut(base)
	b.signUp(base, "Initech Offers", "it@initech-offers.example")
	b.signOut(base)

	b.signUp(base, "Offer Agents", "owner@offer-agents.example")
	b.open(base + "/seller/new")
	b.fill(map[string]string{"#card_url": cm.agentURL + "/", "#monthly_fee": "10"})
	b.submit(`form[action="/seller/new"] button[type=submit]`, `.buy-box`)
	loc, _ := chromedp.Run(b.ctx, chromedp.Location())
	listing := strings.TrimPrefix(strings.SplitN(loc[strings.Index(loc, "/listings/"):], "?", 2)[0], "/listings/")
	b.open(base + "/seller")
	b.click(`a[href="/seller/offers"]`)
	b.must("the offers page", chromedp.Do(b.ctx, chromedp.WaitVisible(chromedp.CSS(`form[action="/seller/offers"]`))))
	b.fill(map[string]string{"#buyer_org_id": buyerOrg, "#monthly_fee": "1", "#input_price": "1", "#output_price": "2", "#min_commit": "20",
		"#expires_days": "30"})
	b.submit(`form[action="/seller/offers"] button[type=submit]`, `[data-offer] [data-status]`)
	if got := b.text("p.notice"); got != "The private offer is made. Only that organisation sees it." {
		t.Errorf("notice %q", got)
	}
	if got := b.text("[data-offer] [data-status]"); got != "open" {
		t.Errorf("offer status %q", got)
	}
	b.signOut(base)

	b.signIn(base, "it@initech-offers.example")
	b.open(base + "/buyer")
	if n := b.count("#offers"); n != 0 {
		t.Errorf("another buyer sees %d offer sections", n)
	}
	b.open(base + "/listings/" + listing)
	if got := b.text(".buy-box .big"); !strings.HasPrefix(got, "$10.00") {
		t.Errorf("another buyer sees the price %q", got)
	}
	b.signOut(base)

	b.signIn(base, "it@globex-offers.example")
	b.open(base + "/buyer")
	if got := b.text("#offers .terms"); !strings.Contains(got, "Monthly fee: $1.00 per month") || !strings.Contains(got, "Minimum per month: $20.00") {
		t.Errorf("the offer's terms %q", got)
	}
	b.submit(`#offers form button[type=submit]`, `p.notice`)
	if got := b.text("p.notice"); got != "Offer accepted: you subscribe at its terms." {
		t.Errorf("notice %q", got)
	}
	if got := b.text(".sub .facts"); !strings.Contains(got, "version 2 (private offer)") {
		t.Errorf("the subscription %q", got)
	}
	if n := b.count("#offers"); n != 0 {
		t.Errorf("the accepted offer is still offered")
	}
	b.open(base + "/finance/invoices")
	// $20 for days − 2 of days days, rounded once (it is more than the fee).
	cents := (20_000_000*(days-2)/days + 5_000) / 10_000
	if got, want := b.text(".invoice tfoot td:last-child"), fmt.Sprintf("$%d.%02d", cents/100, cents%100); got != want {
		t.Errorf("invoice total %q, want %q", got, want)
	}
	if got := b.text(`tr[data-kind="commitment"] th`); !strings.HasPrefix(got, "Minimum monthly commitment, less the charges above") {
		t.Errorf("commitment line %q", got)
	}
}

// TestWebPlanChanges drives a plan change in Chromium: after the seller's
// new prices, the buyer's page offers the new version; the buyer switches,
// the invoice preview shows the month in two parts, one per plan; then the
// buyer asks to end at the month's end, sees when, and takes it back.
func TestWebPlanChanges(t *testing.T) {
	b := newBrowser(t)
	t0 := browserT0()
	cm := newCommerceMarketAt(t, nil, changePricing, t0)
	base := cm.m.URL

	b.signUp(base, "Globex Plans", "it@globex-plans.example")
	b.subscribe(base, cm)
	if n := b.count("[data-new-plan]"); n != 0 {
		t.Errorf("a plan change is offered before there is a new plan")
	}
	if r := cm.api.with(cm.seller).do("PATCH", "/api/v1/listings/"+cm.listing, map[string]any{"pricing": changedPricing}); r.Status != 200 {
		t.Fatalf("new prices: %d %s", r.Status, r.Body)
	}
	// 06:00. A session lasts 12 hours of the clock, and ends after 2 unused:
	// the buyer keeps using it meanwhile.
	for range 6 {
		cm.clock.Advance(time.Hour)
		b.open(base + "/buyer")
	}
	if got := b.text("[data-new-plan] button"); got != "Switch to plan version 2 ($20.00 a month) from now" {
		t.Errorf("plan change button %q", got)
	}
	b.submit("[data-new-plan] button", "p.notice")
	if got := b.text("p.notice"); !strings.HasPrefix(got, "The plan changed from now on.") {
		t.Errorf("notice %q", got)
	}
	if got := b.text(".sub .facts"); !strings.Contains(got, "version 2,") {
		t.Errorf("the subscription %q", got)
	}
	// A third plan the same month: the change the server would refuse
	// (one a month) is shown disabled, with why, never offered.
	third := map[string]any{"currency": "usd", "monthly_fee_micros": 15_000_000, "input_tokens_per_million_micros": 4_000_000}
	if r := cm.api.with(cm.seller).do("PATCH", "/api/v1/listings/"+cm.listing, map[string]any{"pricing": third}); r.Status != 200 {
		t.Fatalf("third prices: %d %s", r.Status, r.Body)
	}
	// A private offer the same month would change the plan too: its
	// Accept is disabled with the same reason.
	buyerOrg := b.text("[data-org-id]")
	cm.offer(t, buyerOrg, offerPricing, cm.clock.Now().Add(10*24*time.Hour))
	b.open(base + "/buyer")
	next := billing.MonthOf(t0).End.Format("2006-01-02")
	if b.count("[data-new-plan] button[disabled]") != 1 || !strings.Contains(b.text("[data-no-change]"), "the next change can be made from "+next) {
		t.Errorf("the refused change: %d disabled buttons, %q", b.count("[data-new-plan] button[disabled]"), b.text("[data-no-change]"))
	}
	if b.count("[data-offer] button[disabled]") != 1 || !strings.Contains(b.text("[data-no-accept]"), "the next change can be made from "+next) {
		t.Errorf("the offer's Accept: %d disabled, %q", b.count("[data-offer] button[disabled]"), b.text("[data-no-accept]"))
	}
	b.open(base + "/finance/invoices")
	month := billing.MonthOf(t0)
	monthSec := month.End.Unix() - month.Start.Unix()
	after := month.End.Unix() - t0.Add(6*time.Hour).Unix()
	for sel, want := range map[string]string{
		`tr[data-kind="flat_fee"][data-part="0"] th`: fmt.Sprintf("Monthly fee, prorated for 21600 of %d seconds", monthSec),
		`tr[data-kind="flat_fee"][data-part="1"] th`: fmt.Sprintf("Monthly fee, prorated for %d of %d seconds", after, monthSec),
		`ul.parts li[data-part="0"]`:                 "Plan v1: " + t0.Format("2006-01-02") + " 00:00 UTC to " + t0.Format("2006-01-02") + " 06:00 UTC",
	} {
		if got := b.text(sel); got != want {
			t.Errorf("%s = %q, want %q", sel, got, want)
		}
	}
	// $10 for 6 hours and $20 for the rest: in cents, half up, once.
	exact := new(big.Rat).SetFrac64(10_000_000*21_600+20_000_000*after, monthSec*10_000)
	cents := new(big.Int).Quo(new(big.Int).Add(new(big.Int).Mul(exact.Num(), big.NewInt(2)), exact.Denom()), new(big.Int).Mul(exact.Denom(), big.NewInt(2))).Int64()
	if got, want := b.text(".invoice tfoot td:last-child"), fmt.Sprintf("$%d.%02d", cents/100, cents%100); got != want {
		t.Errorf("invoice total %q, want %q", got, want)
	}

	b.open(base + "/buyer")
	b.submit("[data-end-toggle]", "p.notice")
	end := billing.MonthOf(t0).End
	if got := b.text("[data-ends]"); got != end.Format("2006-01-02")+" 00:00 UTC, as you asked. Calls work until then." {
		t.Errorf("the end shown: %q", got)
	}
	if got := b.text("[data-end-toggle]"); !strings.HasPrefix(got, "Keep the subscription") {
		t.Errorf("the toggle: %q", got)
	}
	b.submit("[data-end-toggle]", "p.notice")
	if got := b.text("p.notice"); got != "The subscription goes on." || b.count("[data-ends]") != 0 {
		t.Errorf("after keeping it: %q, %d end shown", got, b.count("[data-ends]"))
	}
}

// TestWebSpendAlerts drives spend alerts in Chromium: the buyer sets its
// thresholds and webhook on the finance alerts page, makes a key with a
// budget, and once calls spend half of it the alert shows on its
// Subscriptions page and on the alerts page.
func TestWebSpendAlerts(t *testing.T) {
	b := newBrowser(t)
	// The wall clock's time: the meter reads budgets' spend up to its own
	// clock (metering.Spend), which starts at the wall clock here.
	// The plan's per-call ceiling is what the test's call uses, so the call
	// fits in the budget with its reservation (docs/billing.md, "Budgets").
	pricing := map[string]any{"max_call_input_tokens": 9, "max_call_output_tokens": 13}
	for k, v := range changePricing {
		pricing[k] = v
	}
	cm := newCommerceMarketAt(t, map[string]string{"AGENTMARKET_PUSH_RETRY_BASE": "100ms"}, pricing, time.Now().UTC().Truncate(time.Second))
	hook := newAlertHook(t)
	base := cm.m.URL

	b.signUp(base, "Globex Alerts", "it@globex-alerts.example")
	b.open(base + "/finance/alerts")
	if n := b.count("[data-no-alerts]"); n != 1 {
		t.Errorf("alerts before any spend")
	}
	b.fill(map[string]string{"#thresholds": "50, 100", "#webhook_url": hook.srv.URL + "/alerts", "#webhook_token": "tok-web"})
	b.submit(`form[action="/finance/alerts"] button.primary`, "p.notice")
	if got := b.text("p.notice"); got != "The alert settings are saved." {
		t.Errorf("notice %q", got)
	}
	b.subscribe(base, cm)
	b.open(base + "/keys")
	b.fill(map[string]string{"#name": "orchestrator", "#budget": "0.0004"})
	b.submit(`form[action="/keys"] button[type=submit]`, `#new-key`)
	key := b.text("#new-key")

	// 222 micros a call (9 × 3 + 13 × 15), a budget of 400: past 50%.
	cm.call(t, key)
	waitFor(t, "the webhook's alert", 15*time.Second, func() bool {
		cm.clock.Advance(time.Second)
		return len(hook.received()) >= 2 // refused once, then taken
	})
	b.open(base + "/buyer")
	if got := b.text("#alerts li"); !strings.HasPrefix(got, "50% of the $0.0004 budget of key orchestrator") || !strings.Contains(got, "($0.000222 spent") {
		t.Errorf("the buyer page's alert: %q", got)
	}
	b.open(base + "/finance/alerts")
	if got := b.text("[data-alert] [data-percent]"); got != "50%" {
		t.Errorf("the alerts page: %q", got)
	}
	if got := hook.received()[1]; got.token != "tok-web" || got.body.Percent != 50 {
		t.Errorf("the webhook got %+v", got)
	}
}

// TestWebCostAllocation drives tags in Chromium: the buyer makes a tagged
// key and an untagged one on the keys page; after a call with each, the
// finance view offers the tag's grouping and shows each value's cost, and
// the untagged usage as such.
func TestWebCostAllocation(t *testing.T) {
	b := newBrowser(t)
	cm := newCommerceMarketAt(t, nil, changePricing, browserT0())
	base := cm.m.URL

	b.signUp(base, "Globex Tags", "it@globex-tags.example")
	b.subscribe(base, cm)
	keys := map[string]string{}
	for name, tags := range map[string]string{"payments": "team=payments, project=kyc", "plain": ""} {
		b.open(base + "/keys")
		fields := map[string]string{"#name": name}
		if tags != "" {
			fields["#tags"] = tags
		}
		b.fill(fields)
		b.submit(`form[action="/keys"] button[type=submit]`, `#new-key`)
		keys[name] = b.text("#new-key")
	}
	b.open(base + "/keys")
	tagged, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`[...document.querySelectorAll("[data-tags]")].map(e => e.textContent.trim()).filter(s => s).join("|")`))
	if err != nil || strings.Join(strings.Fields(tagged), " ") != "project=kyc team=payments" {
		t.Errorf("the tagged key's tags on the keys page: %q, %v", tagged, err)
	}
	cm.clock.Advance(time.Minute)
	cm.call(t, keys["payments"])
	cm.clock.Advance(time.Minute)
	cm.call(t, keys["plain"])

	b.open(base + "/finance")
	b.click(`nav.tabs a[href*="group=tag%3Ateam"]`)
	b.must("the tag grouping", chromedp.Do(b.ctx, chromedp.WaitVisible(chromedp.CSS(`tr[data-key="payments"]`))))
	for sel, want := range map[string]string{
		`tr[data-key="payments"] td.cost`: "under $0.01", // $0.000222, on hover
		`tr[data-key=""] th`:              "(untagged)",
		`tr[data-key=""] td.cost`:         "under $0.01",
		`#table-heading`:                  "Cost per tag team",
	} {
		if got := b.text(sel); got != want {
			t.Errorf("%s = %q, want %q", sel, got, want)
		}
	}
}

// TestWebFocusExport: the invoice previews page offers the org's FOCUS
// CSV of this month and the last; the browser downloads this month's with
// its session, and the rows' micros add up to the invoice total the page
// shows.
func TestWebFocusExport(t *testing.T) {
	b := newBrowser(t)
	t0 := browserT0()
	cm := newCommerceMarketAt(t, nil, changePricing, t0)
	base := cm.m.URL

	b.signUp(base, "Globex Focus", "it@globex-focus.example")
	b.subscribe(base, cm)
	b.open(base + "/keys")
	b.fill(map[string]string{"#name": "payments", "#tags": "team=payments"})
	b.submit(`form[action="/keys"] button[type=submit]`, `#new-key`)
	key := b.text("#new-key")
	cm.clock.Advance(time.Minute)
	cm.call(t, key)

	b.open(base + "/finance/invoices")
	month := t0.Format("January 2006")
	if got := b.text("#focus-export"); got != "Cost and usage export" {
		t.Errorf("the export's heading: %q", got)
	}
	if got := b.text("a.focus-export"); got != "FOCUS CSV, "+month {
		t.Errorf("the export's link: %q", got)
	}
	if n := b.count("a.focus-export"); n != 2 {
		t.Errorf("%d export links, want this month's and the last's", n)
	}
	total := b.text("section.invoice tfoot strong")
	cents := atoi64(strings.NewReplacer("$", "", ",", "", ".", "").Replace(total))
	type download struct {
		Status int
		Type   string
		Body   string
	}
	d, err := chromedp.Run(b.ctx, chromedp.Evaluate[download](`(async () => {
		const r = await fetch(document.querySelector("a.focus-export").href);
		return {Status: r.status, Type: r.headers.get("content-type"), Body: await r.text()};
	})()`, chromedp.EvalAwaitPromise))
	if err != nil || d.Status != 200 || !strings.HasPrefix(d.Type, "text/csv") {
		t.Fatalf("the download: %v %d %s %s", err, d.Status, d.Type, d.Body)
	}
	rows := focusRecords(t, d.Body)
	if got := focusTotal(rows); got != cents*10_000 || cents == 0 {
		t.Errorf("the CSV's rows add up to %d micros, the page's total is %s", got, total)
	}
	if got := tagsOf(rows, "input_tokens", "1"); len(got) != 1 || got[0] != `Task {"team":"payments"} 9` {
		t.Errorf("the call's row: %q", got)
	}
}

// TestWebVerifiedStats: a listing's page says its figures are hidden
// until 20 tasks from 3 buyer orgs were metered; after 20 tasks of three
// orgs, the catalog's card and the listing page show what the meter
// measured.
func TestWebVerifiedStats(t *testing.T) {
	b := newBrowser(t)
	cm := newCommerceMarketAt(t, nil, changePricing, browserT0())
	base := cm.m.URL

	b.open(base + "/listings/" + cm.listing)
	if got := b.text(`[data-stat="hidden"]`); got != "Not enough traffic to show measured figures yet: they show once at least 20 tasks from 3 or more buyer organisations were metered in the last 30 days." {
		t.Errorf("before any call: %q", got)
	}
	if n := b.count(`[data-stat="calls"]`); n != 0 {
		t.Errorf("figures shown before any call")
	}
	cm.subscribe(t, cm.buyer, map[string]any{})
	cm.subscribe(t, cm.other, map[string]any{})
	third := cm.subscribedBuyer(t, "Umbrella", "it@umbrella.example")
	// The agent takes 10 ms, 20 ms, … 200 ms.
	cm.timedCalls(t, cm.buyer, 1, 18)
	cm.timedCalls(t, cm.other, 19, 19)
	cm.timedCalls(t, third, 20, 20)
	cm.clock.Advance(6 * time.Minute) // past the five minutes figures are kept

	b.open(base + "/")
	if got, want := b.text(`[data-verified]`), "Measured over the last 30 days: 20 calls · 100.0 % success · p50 110 ms · p95 200 ms · $0.000222 a task"; got != want {
		t.Errorf("the catalog card: %q, want %q", got, want)
	}
	b.open(base + "/listings/" + cm.listing)
	for stat, want := range map[string]string{"calls": "20", "success": "100.0 %", "latency": "110 ms / 200 ms", "cost": "$0.000222",
		"estimated": "0.0 %"} {
		if got := b.text(`[data-stat="` + stat + `"]`); got != want {
			t.Errorf("%s: %q, want %q", stat, got, want)
		}
	}
	if got := b.text("#verified-heading"); got != "Measured by AgentMarket (last 30 days)" {
		t.Errorf("heading %q", got)
	}
}
