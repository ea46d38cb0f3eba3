// Package storetest is the contract every billing.Store must meet. Each
// implementation's tests call Run; the same assertions then hold on SQLite
// and on PostgreSQL alike.
package storetest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
)

// Factory returns a fresh, empty store.
type Factory func(t *testing.T) billing.Store

var t0 = time.Date(2026, 5, 3, 10, 17, 42, 123456000, time.UTC)

var may = billing.MonthOf(t0)

func prices(suffix string) billing.PlanPrices {
	return billing.PlanPrices{ProductID: "prod_" + suffix, FlatPriceID: "price_flat_" + suffix, MeteredPriceIDs: map[billing.LineKind]string{
		billing.LineInputTokens: "price_in_" + suffix, billing.LineOutputTokens: "price_out_" + suffix,
		billing.LineCompute: "price_cpu_" + suffix, billing.LineTasks: "price_task_" + suffix,
	}}
}

func refs(id string) billing.SubscriptionRefs {
	return billing.SubscriptionRefs{ID: id, FlatItemID: "si_flat_" + id, MeteredItemIDs: map[billing.LineKind]string{
		billing.LineInputTokens: "si_in_" + id, billing.LineOutputTokens: "si_out_" + id,
		billing.LineCompute: "si_cpu_" + id, billing.LineTasks: "si_task_" + id,
	}}
}

func wantKind(t *testing.T, err error, kind agentmarket.Kind) {
	t.Helper()
	if agentmarket.KindOf(err) != kind {
		t.Fatalf("err = %v, want kind %s", err, kind)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func hour(h int) time.Time { return time.Date(2026, 5, 3, h, 0, 0, 0, time.UTC) }

// Run runs the contract suite.
func Run(t *testing.T, newStore Factory) {
	ctx := context.Background()

	t.Run("plan prices are created once", func(t *testing.T) {
		s := newStore(t)
		_, err := s.PlanPrices(ctx, "lst_1", 1)
		wantKind(t, err, agentmarket.NotFound)
		got, err := s.SavePlanPrices(ctx, "lst_1", 1, prices("a"), t0)
		must(t, err)
		if !reflect.DeepEqual(got, prices("a")) {
			t.Fatalf("saved %+v, want %+v", got, prices("a"))
		}
		got, err = s.SavePlanPrices(ctx, "lst_1", 1, prices("b"), t0)
		must(t, err)
		if !reflect.DeepEqual(got, prices("a")) {
			t.Fatalf("second save returned %+v, want the first %+v", got, prices("a"))
		}
		must2(t)(s.SavePlanPrices(ctx, "lst_1", 2, prices("c"), t0))
		if got, err := s.PlanPrices(ctx, "lst_1", 2); err != nil || !reflect.DeepEqual(got, prices("c")) {
			t.Fatalf("version 2 = %+v, %v", got, err)
		}
	})

	t.Run("customers are created once", func(t *testing.T) {
		s := newStore(t)
		_, err := s.Customer(ctx, "org_a")
		wantKind(t, err, agentmarket.NotFound)
		must2(t)(s.SaveCustomer(ctx, "org_a", billing.Customer{ID: "cus_1"}, t0))
		got, err := s.SaveCustomer(ctx, "org_a", billing.Customer{ID: "cus_2"}, t0)
		must(t, err)
		if got.ID != "cus_1" {
			t.Fatalf("customer %q, want the first, cus_1", got.ID)
		}
		if got, err := s.Customer(ctx, "org_a"); err != nil || got.ID != "cus_1" {
			t.Fatalf("Customer = %+v, %v", got, err)
		}
	})

	t.Run("subscriptions", func(t *testing.T) {
		s := newStore(t)
		_, err := s.Subscription(ctx, "ctr_1")
		wantKind(t, err, agentmarket.NotFound)
		want := &billing.Subscription{ContractID: "ctr_1", CustomerID: "cus_1", Refs: refs("sub_1"), CreatedAt: t0}
		got, err := s.SaveSubscription(ctx, want)
		must(t, err)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("saved %+v, want %+v", got, want)
		}
		again, err := s.SaveSubscription(ctx, &billing.Subscription{ContractID: "ctr_1", CustomerID: "cus_1", Refs: refs("sub_other"), CreatedAt: t0.Add(time.Hour)})
		must(t, err)
		if !reflect.DeepEqual(again, want) {
			t.Fatalf("second save returned %+v, want the first", again)
		}
		_, err = s.SaveSubscription(ctx, &billing.Subscription{ContractID: "ctr_2", CustomerID: "cus_1", Refs: refs("sub_1"), CreatedAt: t0})
		wantKind(t, err, agentmarket.Conflict)
		must2(t)(s.SaveSubscription(ctx, &billing.Subscription{ContractID: "ctr_2", CustomerID: "cus_2", Refs: refs("sub_2"), CreatedAt: t0}))

		if id, err := s.ContractOfSubscription(ctx, "sub_2"); err != nil || id != "ctr_2" {
			t.Fatalf("ContractOfSubscription(sub_2) = %q, %v", id, err)
		}
		_, err = s.ContractOfSubscription(ctx, "sub_nope")
		wantKind(t, err, agentmarket.NotFound)

		open, err := s.OpenSubscriptions(ctx)
		must(t, err)
		if len(open) != 2 || open[0].ContractID != "ctr_1" || open[1].ContractID != "ctr_2" {
			t.Fatalf("open = %+v", open)
		}
		must(t, s.SetSubscriptionCanceled(ctx, "ctr_1", t0.Add(time.Hour)))
		must(t, s.SetSubscriptionCanceled(ctx, "ctr_1", t0.Add(2*time.Hour)))
		wantKind(t, s.SetSubscriptionCanceled(ctx, "ctr_nope", t0), agentmarket.NotFound)
		got, err = s.Subscription(ctx, "ctr_1")
		must(t, err)
		if got.CanceledAt == nil || !got.CanceledAt.Equal(t0.Add(time.Hour)) {
			t.Fatalf("canceled at %v, want the first cancellation %v", got.CanceledAt, t0.Add(time.Hour))
		}
		open, err = s.OpenSubscriptions(ctx)
		must(t, err)
		if len(open) != 1 || open[0].ContractID != "ctr_2" || !reflect.DeepEqual(open[0].Refs, refs("sub_2")) {
			t.Fatalf("open after cancel = %+v", open)
		}

		// A trial's subscription reports usage from the trial's end, which
		// may be brought forward.
		trialEnd := t0.Add(14 * 24 * time.Hour)
		trial := &billing.Subscription{ContractID: "ctr_3", CustomerID: "cus_1", Refs: refs("sub_3"), CreatedAt: t0, UsageFrom: trialEnd}
		got, err = s.SaveSubscription(ctx, trial)
		must(t, err)
		if !got.UsageFrom.Equal(trialEnd) || got.UsageFrom.Location() != time.UTC {
			t.Fatalf("usage from %v, want %v in UTC", got.UsageFrom, trialEnd)
		}
		early := t0.Add(3*24*time.Hour + 1500*time.Millisecond)
		must(t, s.SetSubscriptionUsageFrom(ctx, "ctr_3", early))
		if got, err := s.Subscription(ctx, "ctr_3"); err != nil || !got.UsageFrom.Equal(early) {
			t.Fatalf("usage from after the trial ended early = %v, %v; want %v", got.UsageFrom, err, early)
		}
		wantKind(t, s.SetSubscriptionUsageFrom(ctx, "ctr_nope", early), agentmarket.NotFound)
		if got, _ := s.Subscription(ctx, "ctr_2"); !got.UsageFrom.IsZero() {
			t.Fatalf("a subscription without a trial reports from %v", got.UsageFrom)
		}
	})

	t.Run("usage outbox and watermark", func(t *testing.T) {
		s := newStore(t)
		kind := billing.LineInputTokens
		w0, err := s.Watermark(ctx, "ctr_1", kind, may.Start)
		must(t, err)
		if w0.Reported != 0 || !w0.Through.IsZero() || w0.ContractID != "ctr_1" || w0.Kind != kind || !w0.PeriodStart.Equal(may.Start) {
			t.Fatalf("empty watermark = %+v", w0)
		}
		_, err = s.LatestWatermark(ctx, "ctr_1", kind)
		wantKind(t, err, agentmarket.NotFound)

		win := billing.Period{Start: hour(10), End: hour(11)}
		rep := &billing.UsageReport{ContractID: "ctr_1", Kind: kind, Window: win, PeriodStart: may.Start, ItemID: "si_in",
			Quantity: 1500, IdempotencyKey: billing.UsageReportKey("ctr_1", kind, win), Status: billing.ReportPending, CreatedAt: t0}
		must(t, s.AddReport(ctx, rep, w0))
		// The same window again, another window while one is pending, a
		// skip while one is pending: all refused.
		wantKind(t, s.AddReport(ctx, rep, w0), agentmarket.Conflict)
		rep2 := *rep
		rep2.Window = billing.Period{Start: hour(11), End: hour(12)}
		rep2.IdempotencyKey = billing.UsageReportKey("ctr_1", kind, rep2.Window)
		wantKind(t, s.AddReport(ctx, &rep2, w0), agentmarket.Conflict)
		wantKind(t, s.SkipWindow(ctx, w0, hour(12)), agentmarket.Conflict)
		// Another kind is independent.
		wOut, err := s.Watermark(ctx, "ctr_1", billing.LineOutputTokens, may.Start)
		must(t, err)
		must(t, s.SkipWindow(ctx, wOut, hour(11)))

		pending, err := s.PendingReports(ctx, "")
		must(t, err)
		if len(pending) != 1 || !reflect.DeepEqual(pending[0], *rep) {
			t.Fatalf("pending = %+v, want [%+v]", pending, *rep)
		}
		if p, err := s.PendingReports(ctx, "ctr_other"); err != nil || len(p) != 0 {
			t.Fatalf("pending of another contract = %+v, %v", p, err)
		}

		sentAt := t0.Add(time.Hour)
		ok, err := s.MarkReportSent(ctx, rep.Key(), sentAt)
		must(t, err)
		if !ok {
			t.Fatal("MarkReportSent did not mark a pending report")
		}
		ok, err = s.MarkReportSent(ctx, rep.Key(), sentAt.Add(time.Minute))
		must(t, err)
		if ok {
			t.Fatal("MarkReportSent marked a sent report again")
		}
		w1, err := s.Watermark(ctx, "ctr_1", kind, may.Start)
		must(t, err)
		if w1.Reported != 1500 || !w1.Through.Equal(hour(11)) {
			t.Fatalf("watermark after send = %+v, want 1500 through 11:00", w1)
		}
		if lw, err := s.LatestWatermark(ctx, "ctr_1", kind); err != nil || !reflect.DeepEqual(lw, w1) {
			t.Fatalf("LatestWatermark = %+v, %v; want %+v", lw, err, w1)
		}
		// A stale view of the watermark is refused.
		wantKind(t, s.AddReport(ctx, &rep2, w0), agentmarket.Conflict)
		wantKind(t, s.SkipWindow(ctx, w0, hour(12)), agentmarket.Conflict)

		// A refused report moves Through but not Reported.
		must(t, s.AddReport(ctx, &rep2, w1))
		ok, err = s.MarkReportFailed(ctx, rep2.Key(), sentAt, "refused: timestamp outside the period")
		must(t, err)
		if !ok {
			t.Fatal("MarkReportFailed did not mark a pending report")
		}
		if ok, _ := s.MarkReportSent(ctx, rep2.Key(), sentAt); ok {
			t.Fatal("a failed report was marked sent")
		}
		w2, err := s.Watermark(ctx, "ctr_1", kind, may.Start)
		must(t, err)
		if w2.Reported != 1500 || !w2.Through.Equal(hour(12)) {
			t.Fatalf("watermark after failure = %+v, want 1500 through 12:00", w2)
		}
		// A skip moves Through only, and never back.
		must(t, s.SkipWindow(ctx, w2, hour(13)))
		w3, err := s.Watermark(ctx, "ctr_1", kind, may.Start)
		must(t, err)
		if w3.Reported != 1500 || !w3.Through.Equal(hour(13)) {
			t.Fatalf("watermark after skip = %+v", w3)
		}

		// The next period has its own watermark; the latest is its.
		june := billing.MonthOf(may.End)
		wj, err := s.Watermark(ctx, "ctr_1", kind, june.Start)
		must(t, err)
		jw := billing.Period{Start: june.Start, End: june.Start.Add(time.Hour)}
		rep3 := &billing.UsageReport{ContractID: "ctr_1", Kind: kind, Window: jw, PeriodStart: june.Start, ItemID: "si_in",
			Quantity: 7, IdempotencyKey: billing.UsageReportKey("ctr_1", kind, jw), Status: billing.ReportPending, CreatedAt: t0}
		must(t, s.AddReport(ctx, rep3, wj))
		if lw, err := s.LatestWatermark(ctx, "ctr_1", kind); err != nil || !lw.PeriodStart.Equal(may.Start) {
			t.Fatalf("latest watermark before anything of June is sent = %+v, %v; want May's", lw, err)
		}
		must2(t)(s.MarkReportSent(ctx, rep3.Key(), sentAt))
		lw, err := s.LatestWatermark(ctx, "ctr_1", kind)
		must(t, err)
		if !lw.PeriodStart.Equal(june.Start) || lw.Reported != 7 || !lw.Through.Equal(jw.End) {
			t.Fatalf("latest watermark = %+v, want June's", lw)
		}

		all, err := s.Reports(ctx, billing.ReportQuery{ContractID: "ctr_1"})
		must(t, err)
		if len(all) != 3 || all[0].Status != billing.ReportSent || all[0].SentAt == nil || !all[0].SentAt.Equal(sentAt) ||
			all[1].Status != billing.ReportFailed || all[1].Error == "" || all[2].Window != jw {
			t.Fatalf("reports = %+v", all)
		}
		sent, err := s.Reports(ctx, billing.ReportQuery{From: may.Start, To: may.End, Status: billing.ReportSent})
		must(t, err)
		if len(sent) != 1 || sent[0].Quantity != 1500 {
			t.Fatalf("May's sent reports = %+v", sent)
		}
		if r, err := s.Reports(ctx, billing.ReportQuery{From: june.Start}); err != nil || len(r) != 1 || r[0].Quantity != 7 {
			t.Fatalf("June's reports = %+v, %v", r, err)
		}
	})

	t.Run("a watermark past int64 saturates", func(t *testing.T) {
		// Reports of usage sums that saturated (metering.Sum): the watermark
		// stays at the largest int64, never wraps to a negative quantity.
		s := newStore(t)
		kind := billing.LineTasks
		report := func(seen billing.Watermark, h int, q int64) billing.Watermark {
			t.Helper()
			win := billing.Period{Start: hour(h), End: hour(h + 1)}
			rep := &billing.UsageReport{ContractID: "ctr_big", Kind: kind, Window: win, PeriodStart: may.Start, ItemID: "si_task",
				Quantity: q, IdempotencyKey: billing.UsageReportKey("ctr_big", kind, win), Status: billing.ReportPending, CreatedAt: t0}
			must(t, s.AddReport(ctx, rep, seen))
			must2(t)(s.MarkReportSent(ctx, rep.Key(), t0))
			w, err := s.Watermark(ctx, "ctr_big", kind, may.Start)
			must(t, err)
			return w
		}
		w, err := s.Watermark(ctx, "ctr_big", kind, may.Start)
		must(t, err)
		const maxI = 1<<63 - 1
		if w = report(w, 10, maxI-10); w.Reported != maxI-10 {
			t.Fatalf("watermark = %d, want %d", w.Reported, int64(maxI-10))
		}
		if w = report(w, 11, 100); w.Reported != maxI {
			t.Fatalf("watermark past int64 = %d, want %d", w.Reported, int64(maxI))
		}
	})

	t.Run("a report of another watermark is refused", func(t *testing.T) {
		s := newStore(t)
		w, err := s.Watermark(ctx, "ctr_1", billing.LineTasks, may.Start)
		must(t, err)
		win := billing.Period{Start: hour(10), End: hour(11)}
		rep := &billing.UsageReport{ContractID: "ctr_2", Kind: billing.LineTasks, Window: win, PeriodStart: may.Start, ItemID: "si",
			Quantity: 1, IdempotencyKey: "k", Status: billing.ReportPending, CreatedAt: t0}
		wantKind(t, s.AddReport(ctx, rep, w), agentmarket.Invalid)
	})

	t.Run("webhook events are recorded once", func(t *testing.T) {
		s := newStore(t)
		if seen, err := s.WebhookEventSeen(ctx, "evt_1"); err != nil || seen {
			t.Fatalf("seen = %v, %v", seen, err)
		}
		if last, err := s.LastAppliedEvent(ctx, "ctr_1"); err != nil || !last.IsZero() {
			t.Fatalf("last = %v, %v", last, err)
		}
		created := time.Date(2026, 5, 3, 10, 0, 5, 0, time.UTC)
		e := &billing.WebhookEvent{ID: "evt_1", Type: "invoice.paid", Created: created, ReceivedAt: t0, ContractID: "ctr_1", Outcome: billing.WebhookApplied}
		ok, err := s.RecordWebhookEvent(ctx, e)
		must(t, err)
		if !ok {
			t.Fatal("first record not recorded")
		}
		ok, err = s.RecordWebhookEvent(ctx, e)
		must(t, err)
		if ok {
			t.Fatal("second record recorded")
		}
		if seen, err := s.WebhookEventSeen(ctx, "evt_1"); err != nil || !seen {
			t.Fatalf("seen = %v, %v", seen, err)
		}
		if last, err := s.LastAppliedEvent(ctx, "ctr_1"); err != nil || !last.Equal(created) {
			t.Fatalf("last = %v, %v; want %v", last, err, created)
		}
		// Older applied events and ignored newer ones do not move it.
		must2(t)(s.RecordWebhookEvent(ctx, &billing.WebhookEvent{ID: "evt_0", Type: "invoice.payment_failed", Created: created.Add(-time.Minute),
			ReceivedAt: t0, ContractID: "ctr_1", Outcome: billing.WebhookApplied}))
		must2(t)(s.RecordWebhookEvent(ctx, &billing.WebhookEvent{ID: "evt_9", Type: "invoice.payment_failed", Created: created.Add(time.Hour),
			ReceivedAt: t0, ContractID: "ctr_1", Outcome: billing.WebhookStale}))
		must2(t)(s.RecordWebhookEvent(ctx, &billing.WebhookEvent{ID: "evt_x", Type: "charge.succeeded", Created: created.Add(time.Hour),
			ReceivedAt: t0, Outcome: billing.WebhookIgnoredType}))
		if last, err := s.LastAppliedEvent(ctx, "ctr_1"); err != nil || !last.Equal(created) {
			t.Fatalf("last = %v, %v; want %v", last, err, created)
		}
		must2(t)(s.RecordWebhookEvent(ctx, &billing.WebhookEvent{ID: "evt_2", Type: "invoice.payment_failed", Created: created.Add(time.Minute),
			ReceivedAt: t0, ContractID: "ctr_1", Outcome: billing.WebhookApplied}))
		if last, err := s.LastAppliedEvent(ctx, "ctr_1"); err != nil || !last.Equal(created.Add(time.Minute)) {
			t.Fatalf("last = %v, %v; want %v", last, err, created.Add(time.Minute))
		}
	})

	t.Run("commitment charges are recorded once and marked sent", func(t *testing.T) {
		s := newStore(t)
		_, err := s.CommitmentCharge(ctx, "ctr_1", may.Start)
		wantKind(t, err, agentmarket.NotFound)
		c := &billing.CommitmentCharge{ContractID: "ctr_1", PeriodStart: may.Start, Currency: "usd", AmountMinor: 1451,
			IdempotencyKey: "am1/contract/ctr_1/commitment/1777593600", Description: "Minimum commitment shortfall, May 2026", CreatedAt: t0}
		got, err := s.AddCommitmentCharge(ctx, c)
		must(t, err)
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("stored %+v, want %+v", got, c)
		}
		again, err := s.AddCommitmentCharge(ctx, &billing.CommitmentCharge{ContractID: "ctr_1", PeriodStart: may.Start, Currency: "usd",
			AmountMinor: 9, IdempotencyKey: "other", CreatedAt: t0})
		must(t, err)
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("second record returned %+v, want the first", again)
		}
		sent := t0.Add(time.Minute)
		must(t, s.MarkCommitmentChargeSent(ctx, "ctr_1", may.Start, sent))
		must(t, s.MarkCommitmentChargeSent(ctx, "ctr_1", may.Start, sent.Add(time.Hour)))
		got, err = s.CommitmentCharge(ctx, "ctr_1", may.Start)
		must(t, err)
		if got.SentAt == nil || !got.SentAt.Equal(sent) || got.AmountMinor != 1451 {
			t.Fatalf("after marking it sent: %+v, want sent at %v (the first mark)", got, sent)
		}
	})

	t.Run("credit items are kept apart from commitment charges, once each", func(t *testing.T) {
		s := newStore(t)
		c := &billing.CommitmentCharge{ContractID: "ctr_1", PeriodStart: may.Start, Currency: "usd", AmountMinor: -1235,
			IdempotencyKey: "am1/contract/ctr_1/credit/1777593600", Description: "Prepaid credit applied, May 2026", CreatedAt: t0}
		got, err := s.AddCreditItem(ctx, c)
		must(t, err)
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("stored %+v, want %+v", got, c)
		}
		_, err = s.CommitmentCharge(ctx, "ctr_1", may.Start)
		wantKind(t, err, agentmarket.NotFound)
		if again, err := s.AddCreditItem(ctx, &billing.CommitmentCharge{ContractID: "ctr_1", PeriodStart: may.Start, Currency: "usd",
			AmountMinor: -9, IdempotencyKey: "other", CreatedAt: t0}); err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("second record returned %+v, %v; want the first", again, err)
		}
		must(t, s.MarkCreditItemSent(ctx, "ctr_1", may.Start, t0.Add(time.Minute)))
		if got, err := s.CreditItem(ctx, "ctr_1", may.Start); err != nil || got.SentAt == nil || got.AmountMinor != -1235 {
			t.Fatalf("after marking it sent: %+v, %v", got, err)
		}
	})

	t.Run("invoices are stored once per contract and period", func(t *testing.T) {
		s := newStore(t)
		inv := &billing.LocalInvoice{ContractID: "ctr_1", CreatedAt: t0, Invoice: billing.Invoice{
			Currency: "usd", PlanVersion: 3, Period: may,
			Active:         billing.Period{Start: time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC), End: may.End},
			SubtotalMicros: 1234, SubtotalFraction: billing.Fraction{Num: 1, Den: 10}, MinorUnitDigits: 2, TotalMinor: 0,
			Lines: []billing.Line{
				{Kind: billing.LineFlatFee, Description: "Monthly fee", Used: 100, PerUnits: 2678400, UnitPriceMicros: 5, AmountMicros: 0, AmountFraction: billing.Fraction{Num: 0, Den: 1}},
				{Kind: billing.LineCompute, Description: "Compute", Used: 7, Included: 2, Quantity: 5, UnitPriceMicros: 360_000, PerUnits: 3_600_000,
					AmountMicros: 0, AmountFraction: billing.Fraction{Num: 1, Den: 2}, AmountMinor: 0},
			},
		}}
		_, err := s.Invoice(ctx, "ctr_1", may.Start)
		wantKind(t, err, agentmarket.NotFound)
		ok, err := s.SaveInvoice(ctx, inv)
		must(t, err)
		if !ok {
			t.Fatal("first invoice not stored")
		}
		other := *inv
		other.Invoice.TotalMinor = 999
		ok, err = s.SaveInvoice(ctx, &other)
		must(t, err)
		if ok {
			t.Fatal("second invoice of the same period stored")
		}
		got, err := s.Invoice(ctx, "ctr_1", may.Start)
		must(t, err)
		if !reflect.DeepEqual(got, inv) {
			t.Fatalf("invoice = %+v\nwant %+v", got, inv)
		}
		// An invoice of parts (a trial, then paid) keeps them, and which
		// part each line rates.
		trialEnd := time.Date(2026, 5, 20, 7, 30, 0, 0, time.UTC)
		parts := *inv
		parts.ContractID = "ctr_parts"
		parts.Invoice.Parts = []billing.PartInfo{
			{PlanVersion: 3, Active: billing.Period{Start: inv.Invoice.Active.Start, End: trialEnd}, Trial: true},
			{PlanVersion: 4, Active: billing.Period{Start: trialEnd, End: may.End}},
		}
		parts.Invoice.Lines = append([]billing.Line{{Kind: billing.LineFlatFee, Description: "Free trial", Used: 5, Quantity: 5, PerUnits: 2678400,
			AmountFraction: billing.Fraction{Num: 0, Den: 1}}}, inv.Invoice.Lines...)
		parts.Invoice.Lines[1].Part, parts.Invoice.Lines[2].Part = 1, 1
		must2(t)(s.SaveInvoice(ctx, &parts))
		got, err = s.Invoice(ctx, "ctr_parts", may.Start)
		must(t, err)
		if !reflect.DeepEqual(got, &parts) {
			t.Fatalf("invoice of parts = %+v\nwant %+v", got, &parts)
		}
		june := *inv
		june.Invoice.Period = billing.MonthOf(may.End)
		must2(t)(s.SaveInvoice(ctx, &june))
		b := *inv
		b.ContractID = "ctr_0"
		must2(t)(s.SaveInvoice(ctx, &b))
		list, err := s.Invoices(ctx, may.Start)
		must(t, err)
		if len(list) != 3 || list[0].ContractID != "ctr_0" || list[1].ContractID != "ctr_1" || list[2].ContractID != "ctr_parts" {
			t.Fatalf("May's invoices = %+v", list)
		}
	})
}

// must2 fails the test on the error of a two-result call.
func must2(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		must(t, err)
	}
}
