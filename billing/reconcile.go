package billing

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

// DriftSource is what metered usage is compared with.
type DriftSource string

const (
	// DriftReported: the usage reported to the provider (the sent
	// reports of the period).
	DriftReported DriftSource = "reported"
	// DriftInvoiced: the usage on the own ledger's invoice of the period.
	DriftInvoiced DriftSource = "invoiced"
)

// Drift is one difference between a contract's metered usage of one line
// kind in a period and what was reported or invoiced for it. Quantities
// are in the kind's units (tokens, milliseconds, tasks).
type Drift struct {
	ContractID string
	// BuyerOrgID, SellerOrgID and ListingID are the contract's, when it
	// was active in the period (empty for one known only from its reports
	// or invoice), so that callers can show each party its own drift.
	BuyerOrgID  string
	SellerOrgID string
	ListingID   string
	Kind        LineKind
	// Source is the side that differs from Metered.
	Source DriftSource
	// Metered is the usage in the usage store; compared with what was
	// reported, only from the end of the contract's free trial (a trial's
	// usage is free, and never reported).
	Metered int64
	// Reported is what the provider was sent, nil when the contract has
	// no subscription at the provider.
	Reported *int64
	// Invoiced is the invoice's Used, nil when the contract has no invoice
	// of the period.
	Invoiced *int64
	// Difference is Source's quantity minus Metered: negative when less
	// was billed than used.
	Difference int64
}

// Reconcile compares, per contract and metered line kind, the usage
// metered in the period (the usage store) with the usage reported to the
// provider (the period's sent reports, for contracts with a subscription)
// and with the usage invoiced (the own ledger's invoice of the period,
// when there is one), and returns a Drift for every difference, ordered by
// contract, kind and source. The contracts are those active in the period
// and those with reports or invoices in it.
//
// For a period still open, usage of windows not reported yet shows as
// drift; a closed period (and its last windows reported) should have none.
// A report still pending or refused counts as not reported.
func (s *Service) Reconcile(ctx context.Context, period Period) ([]Drift, error) {
	if err := period.Validate(); err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	active, err := s.Contracts.ContractsActiveIn(ctx, period)
	if err != nil {
		return nil, err
	}
	parties := map[string]contracts.Contract{}
	for _, c := range active {
		ids[c.ID] = true
		parties[c.ID] = c
	}
	reports, err := s.Store.Reports(ctx, ReportQuery{From: period.Start, To: period.End, Status: ReportSent})
	if err != nil {
		return nil, err
	}
	reported := map[string]map[LineKind]int64{}
	for _, r := range reports {
		if reported[r.ContractID] == nil {
			reported[r.ContractID] = map[LineKind]int64{}
		}
		reported[r.ContractID][r.Kind] = agentmarket.AddSat(reported[r.ContractID][r.Kind], r.Quantity)
		ids[r.ContractID] = true
	}
	invoices, err := s.Store.Invoices(ctx, period.Start)
	if err != nil {
		return nil, err
	}
	invoiced := map[string]map[LineKind]int64{}
	for _, inv := range invoices {
		if !inv.Invoice.Period.End.Equal(period.End) {
			continue // an invoice of another period starting there
		}
		m := map[LineKind]int64{}
		for _, l := range inv.Invoice.Lines { // every part's, a trial's too
			m[l.Kind] = agentmarket.AddSat(m[l.Kind], l.Used)
		}
		invoiced[inv.ContractID] = m
		ids[inv.ContractID] = true
	}

	sorted := make([]string, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	sort.Strings(sorted)
	var out []Drift
	for _, id := range sorted {
		usage, err := usageIn(ctx, s.Usage, id, period)
		if err != nil {
			return nil, err
		}
		hasSub := reported[id] != nil
		reportable := usage // what the provider should have been sent
		if sub, err := s.Store.Subscription(ctx, id); err == nil {
			hasSub = true
			if from := sub.UsageFrom; from.After(period.Start) {
				reportable = Usage{}
				if from.Before(period.End) {
					if reportable, err = usageIn(ctx, s.Usage, id, Period{Start: from, End: period.End}); err != nil {
						return nil, err
					}
				}
			}
		} else if agentmarket.KindOf(err) != agentmarket.NotFound {
			return nil, err
		}
		inv, hasInv := invoiced[id]
		for _, kind := range MeteredLineKinds {
			c := parties[id]
			d := Drift{ContractID: id, BuyerOrgID: c.BuyerOrgID, SellerOrgID: c.SellerOrgID, ListingID: c.ListingID,
				Kind: kind, Metered: usage.Of(kind)}
			if hasSub {
				v := reported[id][kind]
				d.Reported = &v
			}
			if hasInv {
				v := inv[kind]
				d.Invoiced = &v
			}
			if r := reportable.Of(kind); d.Reported != nil && *d.Reported != r {
				e := d
				e.Source, e.Metered, e.Difference = DriftReported, r, *d.Reported-r
				out = append(out, e)
			}
			if d.Invoiced != nil && *d.Invoiced != d.Metered {
				e := d
				e.Source, e.Difference = DriftInvoiced, *d.Invoiced-d.Metered
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// IssuedInvoice is an invoice of the own ledger with its contract's
// parties.
type IssuedInvoice struct {
	LocalInvoice
	ListingID   string
	BuyerOrgID  string
	SellerOrgID string
}

// Issued lists the invoices the own ledger issued for a month (CloseMonth)
// that orgID buys or sells under; every one when all is set (the
// operator). Ordered by contract id.
func (s *Service) Issued(ctx context.Context, period Period, orgID string, all bool) ([]IssuedInvoice, error) {
	if err := period.Validate(); err != nil {
		return nil, err
	}
	active, err := s.Contracts.ContractsActiveIn(ctx, period)
	if err != nil {
		return nil, err
	}
	parties := map[string]contracts.Contract{}
	for _, c := range active {
		parties[c.ID] = c
	}
	invoices, err := s.Store.Invoices(ctx, period.Start)
	if err != nil {
		return nil, err
	}
	out := []IssuedInvoice{}
	for _, inv := range invoices {
		c, ok := parties[inv.ContractID]
		if !ok || !inv.Invoice.Period.End.Equal(period.End) {
			continue
		}
		if !all && c.BuyerOrgID != orgID && c.SellerOrgID != orgID {
			continue
		}
		out = append(out, IssuedInvoice{LocalInvoice: inv, ListingID: c.ListingID, BuyerOrgID: c.BuyerOrgID, SellerOrgID: c.SellerOrgID})
	}
	slices.SortFunc(out, func(a, b IssuedInvoice) int { return strings.Compare(a.ContractID, b.ContractID) })
	return out, nil
}
