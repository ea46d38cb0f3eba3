package billing_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/billing/stripe"
)

// TestAllowanceOncePerMonth: three short stays of one org on one listing
// in a month share one month's allowance (issue 23: cancel-and-resubscribe
// got an allowance each, and each stay's invoice was $0.00). The input
// charges of the three add up to those of one stay with all the usage.
func TestAllowanceOncePerMonth(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	stays := []struct {
		id         string
		start, end time.Time
	}{
		{"ctr_a", t0, t0.Add(time.Hour)},
		{"ctr_b", t0.Add(2 * time.Hour), t0.Add(3 * time.Hour)},
		{"ctr_c", t0.Add(4 * time.Hour), time.Time{}},
	}
	for _, s := range stays {
		c := e.contract(s.id, s.start)
		if !s.end.IsZero() {
			end := s.end
			e.ctrs.all[len(e.ctrs.all)-1].CanceledAt = &end
		}
		e.use(t, c.ID, s.start.Add(time.Minute), billing.Usage{InputTokens: 800_000, Tasks: 1})
	}
	may := billing.MonthOf(t0)

	// Mid-month, the last stay's preview already has no allowance left.
	e.at(t0.Add(5 * time.Hour))
	pv := &billing.Previews{Contracts: getter{e.ctrs.all[2]}, Plans: e.plans, Usage: e.usage, Clock: e.clock, Stays: e.ctrs}
	preview, err := pv.Preview(ctx, agentmarket.Actor{}, "ctr_c")
	if err != nil {
		t.Fatal(err)
	}
	if l := preview.Lines[1]; l.Kind != billing.LineInputTokens || l.Included != 0 || l.AmountMicros != 2_400_000 {
		t.Errorf("ctr_c's preview input line: %+v", l)
	}

	e.at(date(2026, 6, 1, 0, 5))
	if n, err := e.ledger().CloseMonth(ctx, may); err != nil || n != 3 {
		t.Fatalf("CloseMonth = %d, %v", n, err)
	}
	// The allowance is 1,000,000 input tokens: ctr_a uses 800,000 of it,
	// ctr_b the 200,000 left (600,000 × $3/M = 1,800,000 micros), ctr_c
	// none (800,000 × 3 = 2,400,000); 100 tasks included, 3 used.
	want := map[string]struct{ included, amount int64 }{
		"ctr_a": {1_000_000, 0}, "ctr_b": {200_000, 1_800_000}, "ctr_c": {0, 2_400_000},
	}
	var sum int64
	for id, w := range want {
		inv, err := e.store.Invoice(ctx, id, may.Start)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		l := inv.Invoice.Lines[1]
		if l.Included != w.included || l.AmountMicros != w.amount {
			t.Errorf("%s's input line: included %d, %d micros; want %d, %d", id, l.Included, l.AmountMicros, w.included, w.amount)
		}
		if tl := inv.Invoice.Lines[4]; tl.AmountMicros != 0 {
			t.Errorf("%s's tasks line: %+v", id, tl)
		}
		sum += l.AmountMicros
	}
	one, err := billing.RateParts(may, []billing.Part{{Plan: e.plans["lst_echo/3"], Span: billing.Period{Start: t0, End: may.End},
		Usage: billing.Usage{InputTokens: 2_400_000, Tasks: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	if sum != one.Lines[1].AmountMicros {
		t.Errorf("the stays' input charges sum to %d micros; one stay's would be %d", sum, one.Lines[1].AmountMicros)
	}
}

// TestSubSecondPartsRate: a part shorter than a second (a stay canceled in
// the second it began, a plan changed and canceled in one second, a trial
// used up in its first second) rates as zero seconds of fee with its usage
// kept, and the month closes with it (issue 23: the month's rating failed
// with invalid_rating_input, and the close skipped the contract).
func TestSubSecondPartsRate(t *testing.T) {
	ctx := context.Background()
	may := billing.MonthOf(t0)
	at := t0.Add(200 * time.Millisecond) // 10:17:42.2
	plan, dear := basePlan(49_000_000), basePlan(99_000_000)
	dear.Version = 4
	for name, parts := range map[string][]billing.Part{
		"one stay": {{Plan: plan, Span: billing.Period{Start: at, End: at.Add(500 * time.Millisecond)}, Usage: billing.Usage{Tasks: 150}}},
		"a plan change, then canceled": {
			{Plan: plan, Span: billing.Period{Start: at, End: at.Add(300 * time.Millisecond)}, Usage: billing.Usage{Tasks: 60}},
			{Plan: dear, Span: billing.Period{Start: at.Add(300 * time.Millisecond), End: at.Add(600 * time.Millisecond)}, Usage: billing.Usage{Tasks: 90}},
		},
		"a trial used up at once": {
			{Plan: plan, Trial: true, Span: billing.Period{Start: at, End: at.Add(100 * time.Millisecond)}, Usage: billing.Usage{InputTokens: 5_000}},
			{Plan: plan, Span: billing.Period{Start: at.Add(100 * time.Millisecond), End: at.Add(700 * time.Millisecond)}, Usage: billing.Usage{Tasks: 150}},
		},
	} {
		inv, err := billing.RateParts(may, parts)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// 150 tasks, 100 of them in the month's allowance: 50 × $0.01.
		var fee, tasks int64
		for _, l := range inv.Lines {
			switch l.Kind {
			case billing.LineFlatFee:
				fee += l.AmountMicros
			case billing.LineTasks:
				tasks += l.AmountMicros
			}
		}
		if fee != 0 || tasks != 500_000 {
			t.Errorf("%s: fee %d, tasks %d micros; want 0 and 500,000", name, fee, tasks)
		}
	}

	// Through the month close: a contract canceled within its first second.
	e := newEnv(t)
	c := e.contract("ctr_blink", at)
	end := at.Add(500 * time.Millisecond)
	e.ctrs.all[0].CanceledAt = &end
	e.use(t, c.ID, at.Add(100*time.Millisecond), billing.Usage{Tasks: 150})
	e.at(date(2026, 6, 1, 0, 5))
	if n, err := e.ledger().CloseMonth(ctx, may); err != nil || n != 1 {
		t.Fatalf("CloseMonth = %d, %v", n, err)
	}
	// Its partial second counts as a whole one (stays cycled within
	// seconds cannot avoid the fee); its usage is rated.
	inv, err := e.store.Invoice(ctx, "ctr_blink", may.Start)
	if err != nil || inv.Invoice.Lines[0].Used != 1 || inv.Invoice.Lines[4].AmountMicros != 500_000 {
		t.Fatalf("the blink's invoice: %+v, %v", inv, err)
	}
}

// TestStripeAllowanceShared: with a payment provider, whose metered
// prices give each subscription item its free first tier, the month's
// second stay is charged, as one invoice item, the allowance the first
// one used: the buyer pays at the provider what the own rating rates.
func TestStripeAllowanceShared(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	a := e.attach(t, "ctr_a")
	e.use(t, a.ID, t0.Add(time.Minute), billing.Usage{InputTokens: 800_000})
	end := t0.Add(time.Hour)
	e.ctrs.all[0].CanceledAt = &end
	e.at(t0.Add(2 * time.Hour))
	b := e.attach(t, "ctr_b")
	e.use(t, b.ID, t0.Add(3*time.Hour), billing.Usage{InputTokens: 800_000})
	may := billing.MonthOf(t0)
	e.at(date(2026, 6, 1, 0, 5))
	svc := e.service()
	if n, err := svc.ChargeCommitments(ctx, may); err != nil || n != 1 {
		t.Fatalf("ChargeCommitments = %d, %v", n, err)
	}
	// ctr_b's own rating leaves it 200,000 free tokens (600,000 × $3/M =
	// $1.80); the provider's tier would give it 1,000,000 ($0): 180 cents.
	// And the month is rounded once: ctr_a's hour of the fee (6.586
	// cents) was charged 7, so ctr_b's own invoice takes 0.414 cents off
	// its exact amount, and rounds to one cent less than the provider's
	// rounding of ctr_b alone: 179 cents.
	wantCalls(t, e.prov.take(), `AddInvoiceItem sub_ctr_b cus_org_buyer 179 usd "Monthly allowance already used by earlier subscriptions or plans and this month's earlier subscriptions rounded once with this one, May 2026" am1/contract/ctr_b/commitment/1777593600`)
	if n, err := svc.ChargeCommitments(ctx, may); err != nil || n != 0 {
		t.Fatalf("again = %d, %v", n, err)
	}
}

// TestStripeShortStaysRoundedOnce: with Stripe, which rounds each
// subscription's invoice itself, five stays of four minutes each on a
// $49 plan are each worth 0.439 cents of the fee, which Stripe's
// per-subscription rounding charges as nothing; the own ledger rounds the
// month once (2.195 cents: 2). Once the month is over, the stays whose own
// invoice, with the month's rounding carry, comes to a cent more than
// their own rounding (the second and the fourth) get that cent as an
// invoice item at Stripe, once: the buyer pays the month's amount rounded
// once there too, however short the stays it cycles. Against stripe-mock,
// recording what it was sent.
func TestStripeShortStaysRoundedOnce(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	for i := range 5 {
		e.at(t0.Add(time.Duration(i) * 10 * time.Minute))
		c := e.attach(t, fmt.Sprintf("ctr_%d", i+1))
		end := c.CreatedAt.Add(4 * time.Minute)
		e.ctrs.all[i].CanceledAt = &end
	}
	may := billing.MonthOf(t0)
	// One stay on its own rounds to nothing.
	one, err := billing.RateParts(may, []billing.Part{{Plan: e.plans["lst_echo/3"], Span: billing.Period{Start: t0, End: t0.Add(4 * time.Minute)}}})
	if err != nil || one.TotalMinor != 0 || one.ExactMicros().Cmp(big.NewRat(4_390, 1)) < 0 || one.ExactMicros().Cmp(big.NewRat(4_391, 1)) > 0 {
		t.Fatalf("one stay: %d cents for %s micros, %v", one.TotalMinor, one.ExactMicros().FloatString(3), err)
	}

	e.at(date(2026, 6, 1, 0, 5))
	svc := e.service()
	calls := &stripeRequests{next: http.DefaultTransport}
	svc.Provider = stripeMock(t, calls)
	if n, err := svc.ChargeCommitments(ctx, may); err != nil || n != 2 {
		t.Fatalf("ChargeCommitments = %d, %v; want the second and the fourth stay charged", n, err)
	}
	// Every stay has ended: their subscriptions invoice nothing more, so
	// each item is the customer's and goes on an invoice of its own.
	wantCalls(t, calls.take(), ownInvoice("ctr_2", "ctr_4")...)
	if n, err := svc.ChargeCommitments(ctx, may); err != nil || n != 0 {
		t.Fatalf("again = %d, %v", n, err)
	}
	wantCalls(t, calls.take())
}

// roundedOnce is the text of the short stays' rounding adjustment.
const roundedOnce = `description="This month's earlier subscriptions rounded once with this one, May 2026"`

// adjustment is the invoice item of a contract's May rounding adjustment
// of cents, on subscription sub ("" none).
func adjustment(ctr, sub string, cents int) string {
	s := ""
	if sub != "" {
		s = " subscription=" + sub
	}
	return `POST /v1/invoiceitems 200 key=am1/contract/` + ctr + `/commitment/1777593600 amount=` + strconv.Itoa(cents) + ` currency=usd customer=cus_org_buyer ` +
		roundedOnce + ` metadata[agentmarket_contract_id]=` + ctr + ` metadata[agentmarket_item_key]=am1/contract/` + ctr +
		`/commitment/1777593600 period[end]=1780272000 period[start]=1777593600` + s
}

// ownInvoice are the calls that charge ctrs' adjustments without a live
// subscription: each item on the customer, then an invoice that includes
// the customer's pending items and advances by itself.
func ownInvoice(ctrs ...string) []string {
	var out []string
	for _, c := range ctrs {
		out = append(out, adjustment(c, "", 1), `POST /v1/invoices 200 key=am1/contract/`+c+`/commitment/1777593600/invoice auto_advance=true currency=usd `+
			`customer=cus_org_buyer `+roundedOnce+` metadata[agentmarket_contract_id]=`+c+` metadata[agentmarket_item_key]=am1/contract/`+c+
			`/commitment/1777593600 pending_invoice_items_behavior=include`)
	}
	return out
}

// TestStripeAdjustmentOfEndedStays: a month's adjustment of a stay that
// has ended goes to the invoice of the org's live subscription on the
// listing (a canceled subscription issues no more invoices at Stripe, so
// an item on it would never be collected); with none, onto an invoice of
// the customer created at once. A run that fails before the provider took
// the item, or after it did but before it was marked sent, is run again:
// the item is looked for first, then sent with the same keys, and a third
// run sends nothing.
func TestStripeAdjustmentOfEndedStays(t *testing.T) {
	ctx := context.Background()
	may := billing.MonthOf(t0)
	short := func(e *env, n int) {
		for i := range n {
			e.at(t0.Add(time.Duration(i) * 10 * time.Minute))
			c := e.attach(t, fmt.Sprintf("ctr_%d", i+1))
			end := c.CreatedAt.Add(4 * time.Minute)
			e.ctrs.all[i].CanceledAt = &end
		}
	}

	t.Run("to the live subscription", func(t *testing.T) {
		e := newEnv(t)
		short(e, 4)
		e.at(t0.Add(50 * time.Minute))
		e.attach(t, "ctr_live") // stays until the month's end, and after
		e.at(date(2026, 6, 1, 0, 5))
		svc := e.service()
		calls := &stripeRequests{next: http.DefaultTransport}
		svc.Provider = stripeMock(t, calls)
		if _, err := svc.ChargeCommitments(ctx, may); err != nil {
			t.Fatal(err)
		}
		// The live stay's own item is a cent back: May's exact total,
		// 4 × 0.439 + 4,510.599 cents, rounds to 4,512 once, where the
		// short stays were charged 2 and the live one rounds to 4,511 alone.
		wantCalls(t, calls.take(), adjustment("ctr_2", "sub_ctr_live", 1), adjustment("ctr_4", "sub_ctr_live", 1),
			adjustment("ctr_live", "sub_ctr_live", -1))
	})

	t.Run("crash before and after the send", func(t *testing.T) {
		e := newEnv(t)
		short(e, 2)
		e.at(date(2026, 6, 1, 0, 5))
		svc := e.service()
		calls := &stripeRequests{next: http.DefaultTransport, failNext: 1}
		svc.Provider = stripeMock(t, calls)
		// The first call fails on the way: recorded, not sent.
		if n, err := svc.ChargeCommitments(ctx, may); err == nil || n != 0 {
			t.Fatalf("ChargeCommitments with Stripe unreachable = %d, %v", n, err)
		}
		calls.take()
		// Sent this time, but the run dies before marking it sent.
		e.store.crashCharge.Store(true)
		if _, err := svc.ChargeCommitments(ctx, may); err == nil {
			t.Fatal("the crash was not reported")
		}
		lookup := `GET /v1/invoiceitems 200 key= created[gte]=1780272000 customer=cus_org_buyer limit=100`
		wantCalls(t, calls.take(), append([]string{lookup}, ownInvoice("ctr_2")...)...)
		// Run again: looked for first (stripe-mock keeps nothing, so it
		// is sent again with the same keys, which Stripe answers from its
		// record within 24 hours; past them, the lookup finds it).
		e.store.crashCharge.Store(false)
		if n, err := svc.ChargeCommitments(ctx, may); err != nil || n != 1 {
			t.Fatalf("rerun = %d, %v", n, err)
		}
		wantCalls(t, calls.take(), append([]string{lookup}, ownInvoice("ctr_2")...)...)
		if n, err := svc.ChargeCommitments(ctx, may); err != nil || n != 0 {
			t.Fatalf("third run = %d, %v", n, err)
		}
		wantCalls(t, calls.take())
	})
}

// stripeMock is a Provider on the stripe-mock scripts/test.sh started,
// its requests going through rt. Without one the test skips, or fails
// under AGENTMARKET_TEST_REQUIRE_SERVICES=1.
func stripeMock(t *testing.T, rt http.RoundTripper) *stripe.Provider {
	t.Helper()
	base, key := os.Getenv("AGENTMARKET_TEST_STRIPE_API_BASE"), os.Getenv("AGENTMARKET_TEST_STRIPE_SECRET_KEY")
	if base == "" || key == "" {
		if os.Getenv("AGENTMARKET_TEST_REQUIRE_SERVICES") == "1" {
			t.Fatal("AGENTMARKET_TEST_STRIPE_API_BASE and _SECRET_KEY are not set: run the tests through scripts/test.sh")
		}
		t.Skip("AGENTMARKET_TEST_STRIPE_API_BASE not set: stripe-mock tests skipped (scripts/test.sh starts stripe-mock)")
	}
	return stripe.New(stripe.Config{SecretKey: key, APIBase: base, HTTPClient: &http.Client{Transport: rt}, MaxNetworkRetries: -1})
}

// stripeRequests records each request Stripe answered: method, path,
// status, idempotency key and its parameters but the period, sorted.
// failNext requests fail without reaching Stripe.
type stripeRequests struct {
	next     http.RoundTripper
	mu       sync.Mutex
	got      []string
	failNext int
}

func (r *stripeRequests) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	fail := r.failNext > 0
	r.failNext--
	r.mu.Unlock()
	if fail {
		return nil, errors.New("simulated network failure")
	}
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	resp, err := r.next.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	form, _ := url.ParseQuery(string(body))
	for k, vs := range req.URL.Query() {
		form[k] = append(form[k], vs...)
	}
	line := fmt.Sprintf("%s %s %d key=%s", req.Method, req.URL.Path, resp.StatusCode, req.Header.Get("Idempotency-Key"))
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := strings.Join(form[k], ",")
		if strings.ContainsAny(v, " \"'") {
			v = strconv.Quote(v)
		}
		line += " " + k + "=" + v
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, line)
	return resp, nil
}

// take returns the requests recorded since the last take.
func (r *stripeRequests) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}
