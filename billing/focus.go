package billing

import (
	"context"
	"math/big"
	"sort"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/metering"
)

// FocusVersion is the FinOps FOCUS version the export follows.
const FocusVersion = "1.2"

// FocusStatus is where a FOCUS row's invoice is.
type FocusStatus string

const (
	// FocusIssued: the own ledger's invoice of the closed period.
	FocusIssued FocusStatus = "issued"
	// FocusRated: a closed period not issued by the own ledger (the
	// provider invoices it, or the month is not closed yet), rated here
	// as CloseMonth rates it.
	FocusRated FocusStatus = "rated"
	// FocusPreview: the open period so far (Preview).
	FocusPreview FocusStatus = "preview"
	// FocusUnratable: a contract whose month cannot be rated (a plan in a
	// currency AgentMarket does not bill in, stored before currencies
	// were checked, or amounts past the int64 range): one row without
	// cost whose description says why, in place of its charges, so that
	// the rest of the export stands.
	FocusUnratable FocusStatus = "unratable"
)

// FocusRow is one charge of an org's FOCUS export: one invoice line of
// one contract, or the part of it one resource (a task, under one set of
// tags) accounts for. Its cost is in micros and exact: the rows of an
// invoice sum to its TotalMinor (see Focus).
type FocusRow struct {
	// BillingAccount is the buyer org; SubAccount the contract.
	BillingAccountID, BillingAccountName string
	SubAccountID, SubAccountName         string
	BillingPeriod                        Period
	// ChargePeriod is the part's active span (the fee and the
	// commitment) or the window its usage was metered in.
	ChargePeriod Period
	Kind         LineKind
	Description  string
	Currency     string
	// CostMicros is the row's share of the invoice, in micros.
	CostMicros int64
	// UnitPriceMicros is the price of one PricingUnit; Quantity the
	// billable units (the line's Quantity, or this resource's share of it)
	// and PerUnits the units in one PricingUnit: PricingQuantity is
	// Quantity / PerUnits.
	UnitPriceMicros int64
	Quantity        int64
	PerUnits        int64
	// Consumed is the units used (usage lines only; the fee is no
	// consumption).
	Consumed     int64
	InvoiceID    string
	Status       FocusStatus
	ListingID    string
	ListingName  string
	SellerName   string
	PlanVersion  int
	Trial        bool
	ResourceID   string
	ResourceName string
	ResourceType string
	Tags         agentmarket.Tags
}

// Usage reports whether the row charges for usage (a metered line kind).
func (r FocusRow) Usage() bool {
	return r.Kind != LineFlatFee && r.Kind != LineCommitment
}

// Focus builds the FOCUS rows of an org's contracts (those it buys) in a
// period, from the invoices billing computes.
type Focus struct {
	Service *Service
	// OrgName and ListingName name the parties (cmd/ wires them).
	OrgName     func(ctx context.Context, orgID string) (string, error)
	ListingName func(ctx context.Context, listingID string) (string, error)
}

// FocusInput selects an export: the buyer org and a calendar month.
type FocusInput struct {
	OrgID  string
	Period Period
}

// Validate reports every broken rule.
func (in FocusInput) Validate() error {
	var fe agentmarket.Fields
	if in.OrgID == "" {
		fe.Add("org_id", "required", "the org is required")
	}
	if in.Period.check(&fe, "period") {
		if m := MonthOf(in.Period.Start); !in.Period.Start.Equal(m.Start) || !in.Period.End.Equal(m.End) {
			fe.Add("period", "month", "the period must be a calendar month (UTC)")
		}
	}
	return fe.Err("invalid_focus_export", "the FOCUS export request is not valid")
}

// Rows returns the FOCUS rows of every contract the org buys that is
// active in the period, contract after contract (by id), each invoice's
// lines in their order. The invoice of each contract is the own ledger's
// when it issued one; otherwise the period rated now (as CloseMonth
// would), or, for the month still open, its preview as of now.
//
// Every line becomes rows whose CostMicros sum to the line's AmountMinor
// in micros, so the rows of a contract sum to its invoice's TotalMinor to
// the micro. The fee and a commitment shortfall are one row each, on the
// listing. A usage line is split among the resources that used it — each
// task (its listing and task id) under each set of tags its usage rows
// carry, calls without a task on the listing — in proportion to the
// units each used (the allowance is shared pro rata), by largest
// remainder (apportion): the amount is divided, never rounded again. A
// contract whose amounts are past the int64 range of micros has no
// invoice (CloseMonth refuses it), and no rows.
func (f *Focus) Rows(ctx context.Context, in FocusInput) ([]FocusRow, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	s := f.Service
	now := s.Clock.Now().UTC()
	if !in.Period.Start.Before(now) {
		return []FocusRow{}, nil // a month to come has no charges yet
	}
	list, err := s.Contracts.ContractsActiveIn(ctx, in.Period)
	if err != nil {
		return nil, err
	}
	account, err := f.OrgName(ctx, in.OrgID)
	if err != nil {
		return nil, err
	}
	out := []FocusRow{}
	for i := range list {
		c := &list[i]
		if c.BuyerOrgID != in.OrgID {
			continue
		}
		rows, err := f.contractRows(ctx, c, in.Period, now)
		if agentmarket.KindOf(err) == agentmarket.Invalid {
			// Not billable, as CloseMonth refuses it (Reconcile lists it):
			// said in one row, and the rest of the export stands.
			rows, err = []FocusRow{f.unratable(ctx, c, in.Period, err)}, nil
		}
		if err != nil {
			return nil, err
		}
		for j := range rows {
			rows[j].BillingAccountID, rows[j].BillingAccountName = in.OrgID, account
		}
		out = append(out, rows...)
	}
	return out, nil
}

// unratable is the one row of a contract whose period cannot be rated.
func (f *Focus) unratable(ctx context.Context, c *contracts.Contract, period Period, why error) FocusRow {
	listingName, _ := f.ListingName(ctx, c.ListingID)
	seller, _ := f.OrgName(ctx, c.SellerOrgID)
	msg := whyUnratable(why)
	return FocusRow{SubAccountID: c.ID, SubAccountName: listingName, BillingPeriod: period, ChargePeriod: period, Kind: LineFlatFee,
		Description: "Not rated: " + msg, PerUnits: 1, Status: FocusUnratable, ListingID: c.ListingID, ListingName: listingName,
		SellerName: seller, PlanVersion: c.PlanVersion, ResourceID: c.ListingID, ResourceName: listingName, ResourceType: "Listing"}
}

// focusInvoice is a contract's invoice of a period with the windows its
// parts' usage was taken from.
type focusInvoice struct {
	inv     *Invoice
	windows []Period
	usageTo time.Time
	status  FocusStatus
	id      string
}

func (f *Focus) invoiceOf(ctx context.Context, c *contracts.Contract, period Period, now time.Time) (*focusInvoice, error) {
	s := f.Service
	if period.Contains(now) {
		to := now.Add(time.Millisecond)
		parts, windows, err := s.terms().partsIn(ctx, c, period, to)
		if err != nil || len(parts) == 0 {
			return nil, err
		}
		inv, err := PreviewParts(period, parts, now)
		if err != nil {
			return nil, err
		}
		return &focusInvoice{inv: inv, windows: windows, usageTo: to, status: FocusPreview}, nil
	}
	stored, err := s.Store.Invoice(ctx, c.ID, period.Start)
	switch {
	case err == nil && stored.Invoice.Period.End.Equal(period.End):
		spans, windows, err := contractWindows(ctx, s.History, c, period, period.End)
		if err != nil {
			return nil, err
		}
		if len(spans) != len(stored.Invoice.Parts) {
			windows = storedWindows(&stored.Invoice)
		}
		return &focusInvoice{inv: &stored.Invoice, windows: windows, usageTo: period.End, status: FocusIssued,
			id: c.ID + "/" + period.Start.Format("2006-01")}, nil
	case err != nil && agentmarket.KindOf(err) != agentmarket.NotFound:
		return nil, err
	}
	if _, ok := activeIn(c, period); !ok {
		return nil, nil
	}
	parts, windows, err := s.terms().partsIn(ctx, c, period, period.End)
	if err != nil || len(parts) == 0 {
		return nil, err
	}
	inv, err := RateParts(period, parts)
	if err != nil {
		return nil, err
	}
	return &focusInvoice{inv: inv, windows: windows, usageTo: period.End, status: FocusRated}, nil
}

// storedWindows are the usage windows of an invoice whose parts no longer
// match the contract's history: each part's from its active start (the
// first's from the period's), to the next part's.
func storedWindows(inv *Invoice) []Period {
	if len(inv.Parts) == 0 { // issued before invoices had parts: one
		return []Period{inv.Period}
	}
	out := make([]Period, len(inv.Parts))
	for i, p := range inv.Parts {
		out[i] = Period{Start: p.Active.Start, End: inv.Period.End}
		if i == 0 {
			out[i].Start = inv.Period.Start
		}
		if i > 0 {
			out[i-1].End = p.Active.Start
		}
	}
	return out
}

// resourceKey is one resource under one set of tags.
type resourceKey struct {
	id, name string
	task     bool
	tags     agentmarket.Tags
}

// windowUse is what each resource used in one window.
type windowUse struct {
	keys []resourceKey
	used map[resourceKey]*Usage
}

func (w *windowUse) add(k resourceKey, r *metering.Usage) {
	u := w.used[k]
	if u == nil {
		u = &Usage{}
		w.used[k] = u
		w.keys = append(w.keys, k)
	}
	u.InputTokens = agentmarket.AddSat(u.InputTokens, r.InputTokens)
	u.OutputTokens = agentmarket.AddSat(u.OutputTokens, r.OutputTokens)
	u.ComputeMs = agentmarket.AddSat(u.ComputeMs, r.ComputeMs)
	u.Tasks = agentmarket.AddSat(u.Tasks, r.Tasks)
}

func (f *Focus) contractRows(ctx context.Context, c *contracts.Contract, period Period, now time.Time) ([]FocusRow, error) {
	fi, err := f.invoiceOf(ctx, c, period, now)
	if err != nil || fi == nil {
		return nil, err
	}
	listingName, err := f.ListingName(ctx, c.ListingID)
	if err != nil {
		return nil, err
	}
	seller, err := f.OrgName(ctx, c.SellerOrgID)
	if err != nil {
		return nil, err
	}
	rows, err := f.Service.Usage.Rows(ctx, metering.Query{ContractID: c.ID, From: period.Start, To: fi.usageTo})
	if err != nil {
		return nil, err
	}
	uses := make([]windowUse, len(fi.windows))
	for i := range uses {
		uses[i].used = map[resourceKey]*Usage{}
	}
	for i := range rows {
		r := &rows[i]
		k := resourceKey{id: c.ListingID, name: listingName, tags: r.Tags}
		if r.TaskID != "" {
			k = resourceKey{id: r.ListingID + "/" + r.TaskID, name: r.TaskID, task: true, tags: r.Tags}
		}
		for w := range fi.windows {
			if fi.windows[w].Contains(r.Time) {
				uses[w].add(k, r)
				break
			}
		}
	}
	for i := range uses {
		sort.SliceStable(uses[i].keys, func(a, b int) bool {
			ka, kb := uses[i].keys[a], uses[i].keys[b]
			if ka.id != kb.id {
				return ka.id < kb.id
			}
			return ka.tags < kb.tags
		})
	}

	inv := fi.inv
	perMinor := pow10(6 - inv.MinorUnitDigits)
	listing := resourceKey{id: c.ListingID, name: listingName, tags: c.Tags}
	var out []FocusRow
	for _, l := range inv.Lines {
		part := PartInfo{PlanVersion: inv.PlanVersion, Active: inv.Active}
		if l.Part < len(inv.Parts) {
			part = inv.Parts[l.Part]
		}
		base := FocusRow{
			SubAccountID: c.ID, SubAccountName: listingName, BillingPeriod: inv.Period, ChargePeriod: part.Active,
			Kind: l.Kind, Description: l.Description, Currency: inv.Currency, UnitPriceMicros: l.UnitPriceMicros, PerUnits: l.PerUnits,
			InvoiceID: fi.id, Status: fi.status, ListingID: c.ListingID, ListingName: listingName, SellerName: seller,
			PlanVersion: part.PlanVersion, Trial: part.Trial,
		}
		amount := l.AmountMinor * perMinor // at most the exact amount rounded up: fits
		exactZero := l.AmountMicros == 0 && l.AmountFraction.Num == 0
		if !base.Usage() {
			if exactZero && (l.Kind == LineCommitment || l.Used == 0) {
				continue // no shortfall; no second of the fee
			}
			out = append(out, resourceRow(base, listing, amount, l.Quantity, 0))
			continue
		}
		var use windowUse
		if l.Part < len(uses) {
			use = uses[l.Part]
			if w := fi.windows[l.Part]; w.Start.After(base.ChargePeriod.Start) || base.ChargePeriod.End.IsZero() {
				base.ChargePeriod.Start = w.Start
			}
			base.ChargePeriod.End = fi.windows[l.Part].End
		}
		var keys []resourceKey
		var weights []int64
		for _, k := range use.keys {
			if n := use.used[k].Of(l.Kind); n > 0 {
				keys, weights = append(keys, k), append(weights, n)
			}
		}
		if len(keys) == 0 { // usage no longer in the store, or none
			if exactZero && l.Used == 0 {
				continue
			}
			out = append(out, resourceRow(base, listing, amount, l.Quantity, l.Used))
			continue
		}
		costs, quantities := apportion(amount, weights), apportion(l.Quantity, weights)
		for i, k := range keys {
			out = append(out, resourceRow(base, k, costs[i], quantities[i], weights[i]))
		}
	}
	return out, nil
}

func resourceRow(base FocusRow, k resourceKey, cost, quantity, consumed int64) FocusRow {
	base.CostMicros, base.Quantity, base.Consumed = cost, quantity, consumed
	base.ResourceID, base.ResourceName, base.Tags = k.id, k.name, k.tags
	base.ResourceType = "Listing"
	if k.task {
		base.ResourceType = "Task"
	}
	return base
}

// apportion divides total (non-negative) among weights (positive) in
// proportion, by largest remainder: each share is total × weight / sum
// rounded down, and what is still missing goes one each to the largest
// remainders, ties to the earlier. The shares sum to total exactly; it
// divides an amount already rounded (never rounds one), as allocate does
// for an invoice's lines.
func apportion(total int64, weights []int64) []int64 {
	out := make([]int64, len(weights))
	sum := new(big.Int)
	for _, w := range weights {
		sum.Add(sum, big.NewInt(w))
	}
	if sum.Sign() == 0 {
		return out
	}
	rems := make([]*big.Int, len(weights))
	order := make([]int, len(weights))
	missing := total
	for i, w := range weights {
		q, r := new(big.Int).QuoRem(new(big.Int).Mul(big.NewInt(total), big.NewInt(w)), sum, new(big.Int))
		out[i], rems[i], order[i] = q.Int64(), r, i // q ≤ total: fits
		missing -= out[i]
	}
	sort.SliceStable(order, func(a, b int) bool { return rems[order[a]].Cmp(rems[order[b]]) > 0 })
	for _, i := range order[:missing] {
		out[i]++
	}
	return out
}

func pow10(n int) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}

// focusUnits are the FOCUS units of each line kind: the unit its price is
// per (PricingUnit) and the unit its usage is counted in (ConsumedUnit).
var focusUnits = map[LineKind][2]string{
	LineFlatFee:      {"Months", ""},
	LineCommitment:   {"Months", ""},
	LineInputTokens:  {"1000000 Tokens", "Tokens"},
	LineOutputTokens: {"1000000 Tokens", "Tokens"},
	LineCompute:      {"Hours", "Milliseconds"},
	LineTasks:        {"Tasks", "Tasks"},
}

// meterName is what a line kind meters (FOCUS SkuMeter).
func meterName(k LineKind) string {
	return strings.ToUpper(string(k[:1])) + strings.ReplaceAll(string(k[1:]), "_", " ")
}
