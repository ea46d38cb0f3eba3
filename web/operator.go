package web

import (
	"html/template"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/metering"
)

type operatorRow struct {
	listingCard
	Actions []statusAction
	Updated string
}

// statusTabs name the listing statuses in the operator's words: the
// tab, and the sentence when a tab is empty (statusNone).
var (
	statusTabs = map[listings.Status]string{listings.StatusDraft: "Drafts", listings.StatusPendingReview: "Waiting for review",
		listings.StatusPublished: "Published", listings.StatusSuspended: "Suspended", listings.StatusRetired: "Retired"}
	statusNone = map[listings.Status]string{listings.StatusDraft: "No listing is a draft.",
		listings.StatusPendingReview: "No listing is waiting for review.", listings.StatusPublished: "No listing is published.",
		listings.StatusSuspended: "No listing is suspended.", listings.StatusRetired: "No listing is retired."}
)

type operatorData struct {
	Tabs       []option
	Status     listings.Status
	None       string // what an empty tab says
	Rows       []operatorRow
	Total      int
	Prev, Next string
	// Platform revenue this month: metered usage through the platform and
	// the platform's fee on it.
	Usage    template.HTML // to the cent, the exact amount on hover
	Fee      template.HTML
	FeeRate  string
	Month    string
	HasUsage bool
}

// operatorActions are the moves an operator may make from a status.
func operatorActions(s listings.Status) []statusAction {
	retire := statusAction{listings.StatusRetired, "Retire"}
	switch s {
	case listings.StatusPendingReview:
		return []statusAction{{listings.StatusPublished, "Approve"}, {listings.StatusDraft, "Send back to draft"}, retire}
	case listings.StatusPublished:
		return []statusAction{{listings.StatusSuspended, "Suspend"}, retire}
	case listings.StatusSuspended:
		return []statusAction{{listings.StatusPublished, "Reinstate"}, retire}
	case listings.StatusDraft:
		return []statusAction{retire}
	}
	return nil
}

func (u *UI) requireOperator(r *req) error {
	if !r.signedIn {
		return agentmarket.Errorf(agentmarket.Unauthorized, "no_session", "sign in to see this page")
	}
	if !r.actor.Operator || r.actor.Role != agentmarket.RoleAdmin {
		return agentmarket.Errorf(agentmarket.Forbidden, "operator_only", "only the platform operator's admins may review listings")
	}
	return nil
}

// feeBasisPoints is the platform fee as integer basis points (the billing
// setting is a percentage), so that the fee is computed in integers.
func (u *UI) feeBasisPoints() int64 {
	if u.d.Billing == nil {
		return 0
	}
	return int64(math.Round(u.d.Billing.PlatformFeePercent * 100))
}

// operator reviews listings by status: approve, send back, suspend,
// reinstate, retire.
func (u *UI) operator(r *req) error {
	if err := u.requireOperator(r); err != nil {
		return err
	}
	st := listings.Status(r.c.Query("status", string(listings.StatusPendingReview)))
	if !st.Valid() {
		st = listings.StatusPendingReview
	}
	d := &operatorData{Status: st, None: statusNone[st], Month: u.d.Clock.Now().UTC().Format("January 2006")}
	for _, s := range allStatuses {
		d.Tabs = append(d.Tabs, option{Value: string(s), Label: statusTabs[s], Current: s == st,
			Href: "/operator?status=" + url.QueryEscape(string(s))})
	}
	page, _ := strconv.Atoi(r.c.Query("page", "1"))
	res, err := u.d.Listings.Search(r.ctx, r.actor, listings.Query{Statuses: []listings.Status{st}, Sort: "-created", Page: max(page, 1)})
	if err != nil {
		return err
	}
	d.Total = res.Total
	for _, l := range res.Items {
		d.Rows = append(d.Rows, operatorRow{listingCard: u.card(r, l), Actions: operatorActions(l.Status), Updated: l.UpdatedAt.UTC().Format("2006-01-02 15:04")})
	}
	base := "/operator?status=" + url.QueryEscape(string(st)) + "&page="
	if res.Page > 1 {
		d.Prev = base + strconv.Itoa(res.Page-1)
	}
	if res.Page*res.PageSize < res.Total {
		d.Next = base + strconv.Itoa(res.Page+1)
	}
	if u.d.Usage != nil {
		lb := u.newLabeler(r)
		tables, err := u.usageTables(r, lb, metering.ScopePlatform, u.monthToDate(), "", metering.ByListing)
		if err != nil {
			return err
		}
		t := tables[0]
		bps := u.feeBasisPoints()
		d.HasUsage = true
		d.Usage = moneyHTML(t.Total.CostMicros, t.Currency)
		d.Fee = moneyHTML(t.Total.CostMicros/10000*bps+t.Total.CostMicros%10000*bps/10000, t.Currency)
		d.FeeRate = strconv.FormatInt(bps/100, 10) + "." + strconv.FormatInt(bps%100+100, 10)[1:] + "%"
	}
	return u.render(r, "operator", "Operator", d)
}

func (u *UI) operatorStatus(r *req) error {
	if err := u.requireOperator(r); err != nil {
		return err
	}
	st := listings.Status(r.c.FormValue("status"))
	from := r.c.FormValue("from", string(listings.StatusPendingReview))
	if _, err := u.d.Listings.Update(r.ctx, r.actor, strings.Clone(r.c.Params("id")), listings.UpdateInput{Status: &st}); err != nil {
		return err
	}
	return redirect(r, "/operator?notice=status&status="+url.QueryEscape(from))
}

type unratableRow struct {
	billing.UnratableContract
	Listing, Buyer, Seller string
}

type unratableData struct {
	monthPage
	Rows []unratableRow
}

// unratable lists the subscriptions whose month cannot be rated, with
// why: the month close skips them (and logs them) until their cause is
// fixed, so nothing of that month is invoiced. The month shown is the
// last one that ended, unless ?period= names another.
func (u *UI) unratable(r *req) error {
	if err := u.requireOperator(r); err != nil {
		return err
	}
	if u.d.Billing == nil {
		return agentmarket.Errorf(agentmarket.Unavailable, "no_billing", "billing is not configured on this marketplace")
	}
	last := billing.MonthOf(billing.MonthOf(u.d.Clock.Now()).Start.Add(-time.Second))
	d := &unratableData{monthPage: newMonthPage(r, last, "/operator/unratable")}
	if len(d.Errors) > 0 {
		return u.render(r, "unratable", "Unratable subscriptions", d)
	}
	list, err := u.d.Billing.Unratable(r.ctx, d.period)
	if err != nil {
		return err
	}
	lb := u.newLabeler(r)
	for _, x := range list {
		d.Rows = append(d.Rows, unratableRow{UnratableContract: x, Listing: lb.listing(x.Contract.ListingID).name,
			Buyer: u.orgName(r.ctx, x.Contract.BuyerOrgID), Seller: u.orgName(r.ctx, x.Contract.SellerOrgID)})
	}
	return u.render(r, "unratable", "Unratable subscriptions", d)
}
