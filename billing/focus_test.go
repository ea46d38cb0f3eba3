package billing_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/metering"
)

func (e *env) focus(s *billing.Service) *billing.Focus {
	return &billing.Focus{Service: s,
		OrgName:     func(_ context.Context, id string) (string, error) { return "Org " + id, nil },
		ListingName: func(_ context.Context, id string) (string, error) { return "Listing " + id, nil }}
}

// useTask stores one usage row of a contract's task, with tags.
func (e *env) useTask(t *testing.T, c *contracts.Contract, task string, tags agentmarket.Tags, at time.Time, u billing.Usage) {
	t.Helper()
	e.n++
	row := metering.Usage{ID: fmt.Sprintf("u%d", e.n), Time: at, ContractID: c.ID, ListingID: c.ListingID, BuyerOrgID: c.BuyerOrgID,
		SellerOrgID: c.SellerOrgID, TaskID: task, Tags: tags, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, ComputeMs: u.ComputeMs,
		Tasks: u.Tasks}
	if err := e.usage.Insert(context.Background(), []metering.Usage{row}); err != nil {
		t.Fatal(err)
	}
}

// focusLines renders FOCUS rows as "kind vN resource tags cost/quantity/consumed".
func focusLines(rows []billing.FocusRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprintf("%s v%d %s %s %d/%d/%d %s", r.Kind, r.PlanVersion, r.ResourceID, r.Tags, r.CostMicros, r.Quantity, r.Consumed, r.Status)
	}
	return out
}

func costOf(rows []billing.FocusRow, contractID string) int64 {
	var sum int64
	for _, r := range rows {
		if r.SubAccountID == contractID {
			sum += r.CostMicros
		}
	}
	return sum
}

// TestFocusRowsAddUpToTheInvoice: a month with a plan change and two
// tagged tasks becomes one row per fee and per task and line, each task's
// share of a line in proportion to its units; the rows add up to the
// invoice to the micro, whether the month is open (the preview), over
// (rated) or closed by the ledger (the invoice issued).
func TestFocusRowsAddUpToTheInvoice(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	dear := basePlan(99_000_000)
	dear.Version, dear.InputTokensPerMillionMicros, dear.IncludedInputTokens = 4, 5_000_000, 2_000_000
	e.plans["lst_echo/4"] = dear
	c := e.contract("ctr_1", t0)
	c.Tags = `{"team":"platform"}`
	at := date(2026, 5, 10, 12, 0, 0).Add(250 * time.Millisecond)
	h := history{"ctr_1": {{ContractID: "ctr_1", Seq: 1, At: at, FromVersion: 3, ToVersion: 4}}}
	c.PlanVersion = 4
	e.ctrs.all[0] = *c
	pay, search := agentmarket.Tags(`{"team":"payments"}`), agentmarket.Tags(`{"team":"search"}`)
	e.useTask(t, c, "task-a", pay, t0.Add(time.Hour), billing.Usage{InputTokens: 1_500_000, Tasks: 1})
	e.useTask(t, c, "task-b", search, t0.Add(2*time.Hour), billing.Usage{InputTokens: 500_000})
	e.useTask(t, c, "task-a", pay, at, billing.Usage{InputTokens: 2_500_000, Tasks: 1})
	other := e.contract("ctr_2", t0) // another org's: not in the export
	other.BuyerOrgID = "org_other"
	e.ctrs.all[1] = *other

	svc := e.ledger()
	svc.History = h
	f := e.focus(svc)
	may := billing.MonthOf(t0)
	in := billing.FocusInput{OrgID: "org_buyer", Period: may}

	e.at(date(2026, 5, 20))
	rows, err := f.Rows(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	preview, err := (&billing.Previews{Contracts: getter{*c}, Plans: e.plans, Usage: e.usage, Clock: e.clock, History: h}).Preview(ctx, agentmarket.Actor{}, "ctr_1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := costOf(rows, "ctr_1"), preview.TotalMinor*10_000; got != want || rows[0].Status != billing.FocusPreview {
		t.Errorf("the open month's rows cost %d micros (%s), want the preview's %d", got, rows[0].Status, want)
	}

	// v3 from t0 to the change: fee 11,176,807 + 74/93 micros, input
	// (2,000,000 − 1,000,000) × 3 = 3,000,000, split 3:1 between the
	// tasks; v4 from the change: fee 68,661,290 + 10/31, input: the
	// month's allowance is shared, v3 used 1,000,000 of it free, so v4's
	// 2,000,000 leaves 1,000,000: (2,500,000 − 1,000,000) × 5 = 7,500,000,
	// all task-a's. Total 9,033.8098 cents: 9,034, the missing cent to
	// v3's fee (.68 beats .129).
	want := []string{
		`flat_fee v3 lst_echo {"team":"platform"} 11180000/610938/0 %s`,
		`input_tokens v3 lst_echo/task-a {"team":"payments"} 2250000/750000/1500000 %s`,
		`input_tokens v3 lst_echo/task-b {"team":"search"} 750000/250000/500000 %s`,
		`tasks v3 lst_echo/task-a {"team":"payments"} 0/0/1 %s`,
		`flat_fee v4 lst_echo {"team":"platform"} 68660000/1857600/0 %s`,
		`input_tokens v4 lst_echo/task-a {"team":"payments"} 7500000/1500000/2500000 %s`,
		`tasks v4 lst_echo/task-a {"team":"payments"} 0/0/1 %s`,
	}
	check := func(status billing.FocusStatus) []billing.FocusRow {
		t.Helper()
		rows, err := f.Rows(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		w := make([]string, len(want))
		for i := range want {
			w[i] = fmt.Sprintf(want[i], status)
		}
		if got := focusLines(rows); !slices.Equal(got, w) {
			t.Errorf("%s rows\n  %s\nwant\n  %s", status, strings.Join(got, "\n  "), strings.Join(w, "\n  "))
		}
		if got := costOf(rows, "ctr_1"); got != 9034*10_000 {
			t.Errorf("%s rows cost %d micros, want the invoice's 9,034 cents", status, got)
		}
		return rows
	}
	e.at(date(2026, 6, 1, 0, 5))
	check(billing.FocusRated)
	if n, err := svc.CloseMonth(ctx, may); err != nil || n != 2 {
		t.Fatalf("CloseMonth = %d, %v", n, err)
	}
	inv, _ := e.store.Invoice(ctx, "ctr_1", may.Start)
	if inv.Invoice.TotalMinor != 9034 {
		t.Fatalf("the invoice: %s", summary(&inv.Invoice))
	}
	rows = check(billing.FocusIssued)
	if r := rows[5]; r.InvoiceID != "ctr_1/2026-05" || r.BillingAccountName != "Org org_buyer" || r.SellerName != "Org org_seller" ||
		r.ListingName != "Listing lst_echo" || !r.ChargePeriod.Start.Equal(at) || !r.ChargePeriod.End.Equal(may.End) ||
		!rows[1].ChargePeriod.Start.Equal(t0) || !rows[1].ChargePeriod.End.Equal(at) {
		t.Errorf("row 5: %+v", r)
	}

	var buf bytes.Buffer
	if err := billing.WriteFocusCSV(&buf, rows); err != nil {
		t.Fatal(err)
	}
	records, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(records) != len(rows)+1 || !slices.Equal(records[0], billing.FocusColumns) {
		t.Fatalf("the CSV: %v, %d records", err, len(records))
	}
	col := func(rec int, name string) string { return records[rec][slices.Index(billing.FocusColumns, name)] }
	for _, c := range []struct{ rec, name, want string }{
		{"1", "BilledCost", "11.180000"}, {"1", "EffectiveCost", "11.180000"}, {"1", "ListCost", "11.176808"},
		{"1", "ContractedCost", "11.176808"}, {"1", "ChargeCategory", "Purchase"}, {"1", "ChargeFrequency", "Recurring"},
		{"1", "PricingQuantity", "0.228098118280"}, {"1", "PricingUnit", "Months"}, {"1", "ListUnitPrice", "49.000000"},
		{"1", "ConsumedQuantity", ""}, {"1", "ResourceId", "lst_echo"}, {"1", "ResourceType", "Listing"},
		{"1", "ChargePeriodStart", "2026-05-03T10:17:42Z"}, {"1", "ChargePeriodEnd", "2026-05-10T12:00:00Z"},
		{"1", "BillingPeriodStart", "2026-05-01T00:00:00Z"}, {"1", "BillingPeriodEnd", "2026-06-01T00:00:00Z"},
		{"1", "BillingCurrency", "USD"}, {"1", "ServiceName", "Listing lst_echo"}, {"1", "SubAccountId", "ctr_1"},
		{"1", "InvoiceId", "ctr_1/2026-05"}, {"1", "Tags", `{"team":"platform"}`}, {"1", "x_InvoiceStatus", "issued"},
		{"2", "BilledCost", "2.250000"}, {"2", "ChargeCategory", "Usage"}, {"2", "ChargeFrequency", "Usage-Based"},
		{"2", "PricingQuantity", "1.5"}, {"2", "PricingUnit", "1000000 Tokens"}, {"2", "ListUnitPrice", "3.000000"},
		{"2", "ListCost", "4.500000"}, {"2", "ContractedCost", "4.500000"}, {"2", "EffectiveCost", "2.250000"},
		{"2", "ConsumedQuantity", "1500000"}, {"2", "ConsumedUnit", "Tokens"}, {"2", "ResourceId", "lst_echo/task-a"},
		{"2", "ResourceType", "Task"}, {"2", "SkuPriceId", "lst_echo/v3/input_tokens"}, {"2", "x_BilledCostMicros", "2250000"},
		{"6", "ChargePeriodStart", "2026-05-10T12:00:00.25Z"}, {"6", "x_PlanVersion", "4"},
	} {
		var rec int
		fmt.Sscan(c.rec, &rec)
		if got := col(rec, c.name); got != c.want {
			t.Errorf("record %d %s = %q, want %q", rec, c.name, got, c.want)
		}
	}

	// A hostile seller's names reach the buyer's spreadsheet as text, not
	// formulas; amounts, negative ones too, stay numbers.
	rows[0].ListingName, rows[0].SellerName, rows[0].ResourceID = `=HYPERLINK("https://evil.example","x")`, "@SUM(A1)", "+1+1"
	rows[0].CostMicros = -1_500_000
	buf.Reset()
	if err := billing.WriteFocusCSV(&buf, rows); err != nil {
		t.Fatal(err)
	}
	if records, err = csv.NewReader(&buf).ReadAll(); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"ServiceName": `'=HYPERLINK("https://evil.example","x")`, "PublisherName": "'@SUM(A1)",
		"ResourceId": "'+1+1", "x_BilledCostMicros": "-1500000"} {
		if got := col(1, name); got != want {
			t.Errorf("hostile record %s = %q, want %q", name, got, want)
		}
	}
}

// getter is a ContractSource of fixed contracts.
type getter []contracts.Contract

func (g getter) Get(_ context.Context, _ agentmarket.Actor, id string) (*contracts.Contract, error) {
	for i := range g {
		if g[i].ID == id {
			return &g[i], nil
		}
	}
	return nil, agentmarket.Errorf(agentmarket.NotFound, "contract_not_found", "no contract %s", id)
}

// TestFocusFreeTrialAndCommitment: a trial's rows are free and marked; a
// commitment shortfall is one row on the listing; untagged usage has no
// tags; calls without a task are charged to the listing.
func TestFocusFreeTrialAndCommitment(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	p := basePlan(10_000_000)
	p.MinCommitMicros = 100_000_000
	p.TrialDays = 7
	e.plans["lst_echo/3"] = p
	start := date(2026, 5, 1)
	c := e.contract("ctr_1", start)
	trialEnd := date(2026, 5, 8)
	c.TrialEnd = &trialEnd
	e.ctrs.all[0] = *c
	e.useTask(t, c, "", "", date(2026, 5, 2), billing.Usage{InputTokens: 5_000_000})
	e.useTask(t, c, "t1", "", date(2026, 5, 9), billing.Usage{InputTokens: 2_000_000, Tasks: 1})
	e.at(date(2026, 6, 2))
	svc := e.ledger()
	if _, err := svc.CloseMonth(ctx, billing.MonthOf(start)); err != nil {
		t.Fatal(err)
	}
	rows, err := e.focus(svc).Rows(ctx, billing.FocusInput{OrgID: "org_buyer", Period: billing.MonthOf(start)})
	if err != nil {
		t.Fatal(err)
	}
	inv, _ := e.store.Invoice(ctx, "ctr_1", start)
	// Trial 7 days free (5M input rated at 0); then 24 of 31 days of $10
	// (7,741,935 + 15/31) and (2M − 1M) × 3 = 3,000,000; the commitment
	// of $100 × 24/31 = 77,419,354 + 26/31 less those: 66,677,419 + 11/31.
	// Total 77,419,354.84 micros = 7,741.94 cents → 7,742.
	want := []string{
		"flat_fee v3 lst_echo  0/604800/0 issued",
		"input_tokens v3 lst_echo  0/5000000/5000000 issued",
		"flat_fee v3 lst_echo  7740000/2073600/0 issued",
		"input_tokens v3 lst_echo/t1  3000000/1000000/2000000 issued",
		"tasks v3 lst_echo/t1  0/0/1 issued",
		"commitment v3 lst_echo  66680000/2073600/0 issued",
	}
	if got := focusLines(rows); !slices.Equal(got, want) || inv.Invoice.TotalMinor != 7742 {
		t.Errorf("rows\n  %s\nwant\n  %s\n(invoice %s)", strings.Join(got, "\n  "), strings.Join(want, "\n  "), summary(&inv.Invoice))
	}
	if got := costOf(rows, "ctr_1"); got != inv.Invoice.TotalMinor*10_000 {
		t.Errorf("rows cost %d micros, invoice %d cents", got, inv.Invoice.TotalMinor)
	}
	if !rows[0].Trial || !rows[1].Trial || rows[2].Trial {
		t.Errorf("trial flags: %v %v %v", rows[0].Trial, rows[1].Trial, rows[2].Trial)
	}
}

// TestFocusInputValidate: an org and a calendar month are required.
func TestFocusInputValidate(t *testing.T) {
	for _, c := range []struct {
		in   billing.FocusInput
		want string
	}{
		{billing.FocusInput{}, "org_id:required period.start:required period.end:required"},
		{billing.FocusInput{OrgID: "o", Period: period(date(2026, 5, 2), date(2026, 6, 1))}, "period:month"},
		{billing.FocusInput{OrgID: "o", Period: period(date(2026, 5, 1), date(2026, 5, 31))}, "period:month"},
	} {
		if got := fieldRules(t, c.in.Validate(), "invalid_focus_export"); got != c.want {
			t.Errorf("%+v: %s, want %s", c.in, got, c.want)
		}
	}
	if err := (billing.FocusInput{OrgID: "o", Period: billing.MonthOf(t0)}).Validate(); err != nil {
		t.Error(err)
	}
}

// TestPropertyApportion: shares sum to the total, and each is its exact
// share rounded down or up.
func TestPropertyApportion(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 6))
	for range propertyRuns {
		total := magnitude(r) * int64(1+r.IntN(1000))
		weights := make([]int64, 1+r.IntN(8))
		sum := new(big.Int)
		for i := range weights {
			weights[i] = 1 + magnitude(r)
			sum.Add(sum, big.NewInt(weights[i]))
		}
		shares := billing.Apportion(total, weights)
		var got int64
		for i, s := range shares {
			got += s
			exact := new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(total), big.NewInt(weights[i])), sum)
			lo := new(big.Int).Quo(exact.Num(), exact.Denom()).Int64()
			if s != lo && s != lo+1 {
				t.Fatalf("apportion(%d, %v)[%d] = %d, exact %s", total, weights, i, s, exact.FloatString(3))
			}
		}
		if got != total {
			t.Fatalf("apportion(%d, %v) sums to %d", total, weights, got)
		}
	}
}

// TestPropertyFocusMatchesTheInvoice: on random plans (every currency),
// stays, plan changes, trials, tasks and tags, the rows of a contract sum
// to its invoice's total to the micro, and a usage line's rows to the
// line's billable quantity.
func TestPropertyFocusMatchesTheInvoice(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 7))
	e := newEnv(t)
	ctx := context.Background()
	month := billing.MonthOf(t0)
	e.at(month.End.Add(time.Hour))
	svc := e.ledger()
	h := history{}
	svc.History = h
	f := e.focus(svc)
	tags := []agentmarket.Tags{"", `{"team":"a"}`, `{"team":"b"}`}
	for run := range 150 {
		in := randomInput(r)
		p1, p2 := in.plan, in.plan
		p1.Version, p2.Version = 3, 4
		p2.MonthlyFeeMicros, p2.IncludedInputTokens = magnitude(r), magnitude(r)
		listing := fmt.Sprintf("lst_%d", run)
		e.plans[listing+"/3"], e.plans[listing+"/4"] = p1, p2
		start := month.Start.Add(time.Duration(r.Int64N(int64(20 * 24 * time.Hour)))).Truncate(time.Second)
		c := contracts.Contract{ID: fmt.Sprintf("ctr_%03d", run), BuyerOrgID: fmt.Sprintf("org_%d", run), ListingID: listing,
			SellerOrgID: "org_seller", PlanVersion: 3, Status: contracts.ContractActive, CreatedAt: start}
		if r.IntN(3) == 0 {
			end := start.Add(time.Duration(1+r.IntN(10)) * 24 * time.Hour)
			c.TrialEnd = &end
		}
		if r.IntN(2) == 0 {
			at := start.Add(time.Duration(r.Int64N(int64(month.End.Sub(start))))).Truncate(time.Millisecond)
			h[c.ID] = []contracts.PlanChange{{ContractID: c.ID, Seq: 1, At: at, FromVersion: 3, ToVersion: 4}}
			c.PlanVersion = 4
		}
		e.ctrs.all = append(e.ctrs.all, c)
		for range r.IntN(8) {
			at := start.Add(time.Duration(r.Int64N(int64(month.End.Sub(start))))).Truncate(time.Millisecond)
			e.useTask(t, &c, fmt.Sprintf("t%d", r.IntN(4)), tags[r.IntN(len(tags))], at,
				billing.Usage{InputTokens: magnitude(r) / 1000, OutputTokens: magnitude(r) / 1000, ComputeMs: magnitude(r) / 1000, Tasks: int64(r.IntN(2))})
		}
		if r.IntN(2) == 0 {
			if _, err := svc.CloseMonth(ctx, month); err != nil {
				t.Fatal(err)
			}
		}
		rows, err := f.Rows(ctx, billing.FocusInput{OrgID: c.BuyerOrgID, Period: month})
		if err != nil {
			t.Fatal(err)
		}
		parts, err := partsOf(ctx, svc, &c, month)
		if err != nil {
			t.Fatal(err)
		}
		inv, err := billing.RateParts(month, parts)
		if err != nil {
			continue // past the int64 range: refused, as CloseMonth refuses it
		}
		unit := int64(1)
		for range 6 - inv.MinorUnitDigits {
			unit *= 10
		}
		if got := costOf(rows, c.ID); got != inv.TotalMinor*unit {
			t.Fatalf("run %d: rows cost %d micros, invoice %d minor × %d\n%s", run, got, inv.TotalMinor, unit, strings.Join(focusLines(rows), "\n"))
		}
		if len(inv.Parts) == 1 {
			for _, l := range inv.Lines {
				var q int64
				n := 0
				for _, row := range rows {
					if row.SubAccountID == c.ID && row.Kind == l.Kind {
						q, n = q+row.Quantity, n+1
					}
				}
				if n > 0 && q != l.Quantity {
					t.Fatalf("run %d %s: the rows' quantities sum to %d, the line's is %d", run, l.Kind, q, l.Quantity)
				}
			}
		}
	}
}

// partsOf rates a contract's closed month as CloseMonth does, through
// the stored invoice when there is one.
func partsOf(ctx context.Context, svc *billing.Service, c *contracts.Contract, month billing.Period) ([]billing.Part, error) {
	return billing.ContractParts(ctx, svc, c, month)
}

// withUnratable gives e two contracts of org_buyer from t0: ctr_ok, and
// ctr_odd, on a listing whose plan is in a currency AgentMarket cannot
// rate (as stored before currencies were checked); it returns ctr_odd.
func withUnratable(e *env) *contracts.Contract {
	odd := basePlan(49_000_000)
	odd.Currency = "zzz"
	e.plans["lst_odd/3"] = odd
	e.contract("ctr_ok", t0)
	c := e.contract("ctr_odd", t0)
	e.ctrs.all[1].ListingID = "lst_odd"
	c.ListingID = "lst_odd"
	return c
}

// TestFocusSkipsAnUnratableContract: a contract whose plan is in a
// currency AgentMarket cannot rate (stored before currencies were checked)
// is one row that says so; the org's other contracts are exported as
// before (issue 23: that one contract made the whole export fail).
func TestFocusSkipsAnUnratableContract(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	c := withUnratable(e)
	e.use(t, "ctr_ok", t0.Add(time.Minute), billing.Usage{Tasks: 1})
	e.use(t, c.ID, t0.Add(time.Minute), billing.Usage{Tasks: 1})
	e.at(date(2026, 6, 1, 0, 5))
	rows, err := e.focus(e.ledger()).Rows(ctx, billing.FocusInput{OrgID: "org_buyer", Period: billing.MonthOf(t0)})
	if err != nil {
		t.Fatalf("Rows: %v", err)
	}
	var ok, odds int
	for _, r := range rows {
		switch r.SubAccountID {
		case "ctr_ok":
			ok++
		case "ctr_odd":
			odds++
			if r.Status != billing.FocusUnratable || r.CostMicros != 0 || !strings.Contains(r.Description, `"zzz"`) {
				t.Errorf("the unratable row: %+v", r)
			}
		}
	}
	if ok == 0 || odds != 1 {
		t.Errorf("%d rows of ctr_ok, %d of ctr_odd; want some and one", ok, odds)
	}
}
