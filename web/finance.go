package web

import (
	"cmp"
	"encoding/csv"
	"html/template"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/billing"
	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/metering"
)

// periodForm is a from/to choice; To is inclusive on the page (a date),
// End exclusive for the query.
type periodForm struct {
	form
	Action     string
	From, To   string
	Start, End time.Time
	Keep       map[string]string
}

const dateLayout = "2006-01-02"

// parsePeriod reads ?from=&to= (dates, to inclusive); the default is the
// current month to date.
func (u *UI) parsePeriod(r *req, action string) periodForm {
	now := u.d.Clock.Now().UTC()
	p := periodForm{form: form{Values: map[string]string{}}, Action: action, Keep: map[string]string{}}
	p.Start = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	last := today
	if v := strings.TrimSpace(r.c.Query("from")); v != "" {
		t, err := time.Parse(dateLayout, v)
		if err != nil || !billing.InRange(t) {
			p.add("from", "The start must be a date like 2026-11-01, from 1970 to 2105.")
		} else {
			p.Start = t
		}
	}
	if v := strings.TrimSpace(r.c.Query("to")); v != "" {
		t, err := time.Parse(dateLayout, v)
		if err != nil || !billing.InRange(t) || !t.Before(billing.Latest) {
			p.add("to", "The end must be a date like 2026-11-30, from 1970 to 2105.")
		} else {
			last = t
		}
	}
	if len(p.Errors) == 0 && last.Before(p.Start) {
		p.add("to", "The end must not be before the start.")
	}
	p.End = last.AddDate(0, 0, 1)
	p.From, p.To = p.Start.Format(dateLayout), last.Format(dateLayout)
	return p
}

// usageRow is one line of a usage table.
type usageRow struct {
	Key, Label, Href string
	metering.Total
	Currency string
}

// Cost formats the row's cost in its currency, exactly (chart titles).
func (r usageRow) Cost() string { return formatMicros(r.CostMicros, r.Currency) }

// Shown is the row's cost as pages show amounts: to the cent, the exact
// cost on hover.
func (r usageRow) Shown() template.HTML { return moneyHTML(r.CostMicros, r.Currency) }

// usageTable is a grouping of usage, largest cost first (days in order).
type usageTable struct {
	Group    metering.GroupBy
	Title    string
	Rows     []usageRow
	Total    usageRow
	Hidden   int // rows not shown (in the CSV)
	CSV      string
	Currency string
	Mixed    bool
}

// maxRows is how many rows a page's table shows; the CSV has them all.
const maxRows = 50

var groupTitles = map[metering.GroupBy]string{
	metering.ByListing: "Agent", metering.BySeller: "Seller", metering.ByBuyer: "Buyer",
	metering.ByAPIKey: "API key", metering.ByDay: "Day", metering.ByTask: "Task",
}

// groupTitle names a grouping: a tag key's is "Tag team".
func groupTitle(g metering.GroupBy) string {
	if key, ok := g.TagKey(); ok {
		return "Tag " + key
	}
	return groupTitles[g]
}

// untagged is how usage without the grouping's tag is shown.
const untagged = "(untagged)"

// tagKeys are the tag keys of the actor's org's API keys and
// subscriptions, sorted: the tag groupings the finance view offers.
func (u *UI) tagKeys(r *req) []string {
	seen := map[string]bool{}
	add := func(t agentmarket.Tags) {
		for k := range t.Map() {
			seen[k] = true
		}
	}
	if ks, err := u.d.Accounts.ListKeys(r.ctx, r.actor); err == nil {
		for _, k := range ks {
			add(k.Tags)
		}
	}
	if u.d.Subscriptions != nil {
		if cs, err := u.d.Subscriptions.List(r.ctx, r.actor); err == nil {
			for _, c := range cs {
				add(c.Tags)
			}
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// labeler names the keys of usage groupings for one request, and tracks
// the currencies of the listings it met (usage totals carry no currency:
// the org's listings decide it).
type labeler struct {
	u          *UI
	r          *req
	listings   map[string]listingLabel
	keys       map[string]string
	currencies map[string]bool
	names      *contracts.Names // the page's, made at its first use
}

// nameReader reads other orgs' names as the visitor may see them (one reader
// a page, so each id is read once).
func (lb *labeler) nameReader() *contracts.Names {
	if lb.names == nil {
		lb.names = lb.u.d.Accounts.Names(lb.r.actor)
	}
	return lb.names
}

type listingLabel struct {
	name, currency string
	plan           listings.Plan // the public plan in force
	// gone is the status of a listing that left the catalog (suspended,
	// retired), whose page the org can no longer open; "" otherwise.
	gone listings.Status
}

func (u *UI) newLabeler(r *req) *labeler {
	return &labeler{u: u, r: r, listings: map[string]listingLabel{}, currencies: map[string]bool{}}
}

func (lb *labeler) listing(id string) listingLabel {
	if v, ok := lb.listings[id]; ok {
		return v
	}
	v := listingLabel{name: id}
	if l, err := lb.u.d.Listings.Get(lb.r.ctx, lb.r.actor, id); err == nil {
		v.currency, v.plan = l.Plan.Currency, l.Plan
		if l.Card != nil && l.Card.Name != "" {
			v.name = l.Card.Name
		}
		lb.currencies[v.currency] = true
	} else if name, st, err := lb.u.d.Listings.Withdrawn(lb.r.ctx, id); err == nil {
		v.name, v.gone = name, st
	}
	lb.listings[id] = v
	return v
}

func (lb *labeler) key(id string) string {
	if lb.keys == nil {
		lb.keys = map[string]string{}
		if ks, err := lb.u.d.Accounts.ListKeys(lb.r.ctx, lb.r.actor); err == nil {
			for _, k := range ks {
				lb.keys[k.ID] = k.Name + " (" + k.Prefix + "…)"
			}
		}
	}
	if v, ok := lb.keys[id]; ok {
		return v
	}
	// Another org's key, on the operator's pages.
	v := id
	n := lb.nameReader()
	if k := n.Key(lb.r.ctx, id); k.Name != "" {
		v = k.Name + " (" + k.Prefix + "…)"
		if o := n.Org(lb.r.ctx, k.OrgID); o != "" {
			v += " of " + o
		}
	}
	lb.keys[id] = v
	return v
}

// currency is the one currency of the listings met, or "" when they mix.
func (lb *labeler) currency() (string, bool) {
	delete(lb.currencies, "")
	if len(lb.currencies) > 1 {
		return "", true
	}
	for c := range lb.currencies {
		return c, false
	}
	return "usd", false
}

func (lb *labeler) label(g metering.GroupBy, key string) (label, href string) {
	switch g {
	case metering.ByListing:
		l := lb.listing(key)
		if l.gone != "" {
			return l.name + " (" + statusText(l.gone) + ")", "" // its page is no longer the viewer's
		}
		return l.name, "/listings/" + url.PathEscape(key)
	case metering.BySeller, metering.ByBuyer:
		return lb.u.orgName(lb.r.ctx, key), ""
	case metering.ByAPIKey:
		return lb.key(key), ""
	case metering.ByTask:
		if l, t, ok := strings.Cut(key, "/"); ok {
			return lb.listing(l).name + " / " + t, ""
		}
	}
	if _, tag := g.TagKey(); tag && key == "" {
		return untagged, ""
	}
	return key, ""
}

// totals runs the usage queries of groups at once (each is one aggregate
// query on the usage store).
func (u *UI) totals(r *req, scope metering.Scope, p periodForm, listingID string, groups ...metering.GroupBy) ([][]metering.Total, error) {
	out := make([][]metering.Total, len(groups))
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Go(func() {
			_, out[i], errs[i] = u.d.Usage.Totals(r.ctx, r.actor, metering.ReportInput{Scope: scope, GroupBy: g, From: p.Start, To: p.End, ListingID: listingID})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// usageTables queries and labels groupings. Listings are labelled first,
// so that the other tables know the currency.
func (u *UI) usageTables(r *req, lb *labeler, scope metering.Scope, p periodForm, listingID string, groups ...metering.GroupBy) ([]usageTable, error) {
	res, err := u.totals(r, scope, p, listingID, groups...)
	if err != nil {
		return nil, err
	}
	tables := make([]usageTable, len(groups))
	order := make([]int, 0, len(groups))
	for i, g := range groups {
		if g == metering.ByListing {
			order = append([]int{i}, order...)
		} else {
			order = append(order, i)
		}
	}
	for _, i := range order {
		tables[i] = lb.table(groups[i], res[i], scope, p)
	}
	cur, mixed := lb.currency()
	for i := range tables {
		t := &tables[i]
		t.Currency, t.Mixed, t.Total.Currency = cur, mixed, cur
		for j := range t.Rows {
			if t.Rows[j].Currency == "" || t.Group != metering.ByListing {
				t.Rows[j].Currency = cur
			}
		}
	}
	return tables, nil
}

func (lb *labeler) table(g metering.GroupBy, totals []metering.Total, scope metering.Scope, p periodForm) usageTable {
	t := usageTable{Group: g, Title: groupTitle(g), Total: usageRow{Label: "Total", Total: metering.Sum(totals)}}
	rows := slices.Clone(totals)
	if g != metering.ByDay {
		slices.SortStableFunc(rows, func(a, b metering.Total) int { return cmp.Compare(b.CostMicros, a.CostMicros) })
	}
	if len(rows) > maxRows && g != metering.ByDay {
		t.Hidden = len(rows) - maxRows
		rows = rows[:maxRows]
	}
	for _, x := range rows {
		label, href := lb.label(g, x.Key)
		row := usageRow{Key: x.Key, Label: label, Href: href, Total: x}
		if g == metering.ByListing {
			row.Currency = lb.listing(x.Key).currency
		}
		t.Rows = append(t.Rows, row)
	}
	q := url.Values{"group_by": {string(g)}, "from": {p.From}, "to": {p.To}, "scope": {string(scope)}}
	t.CSV = "/finance/usage.csv?" + q.Encode()
	return t
}

type option struct {
	Value, Label string
	Current      bool
	Href         string
}

type financeData struct {
	Period   *periodForm
	Scopes   []option
	Scope    metering.Scope
	Groups   []option
	Total    usageRow
	Trend    template.HTML
	Bars     template.HTML
	Days     usageTable
	Agents   usageTable
	Table    usageTable
	CSVTasks string
	Billing  bool
}

var scopeLabels = []option{{Value: string(metering.ScopeBuyer), Label: "What we bought"}, {Value: string(metering.ScopeSeller), Label: "What we sold"},
	{Value: string(metering.ScopePlatform), Label: "Whole platform"}}

var tableGroups = []metering.GroupBy{metering.ByListing, metering.BySeller, metering.ByBuyer, metering.ByAPIKey, metering.ByDay}

// finance shows cost per agent, seller, buyer, key and day for a period:
// a trend chart by day, a bar per agent, one table at a time, and CSV.
func (u *UI) finance(r *req) error {
	if err := u.require(r, contracts.ObjUsage, contracts.ActRead); err != nil {
		return err
	}
	d := &financeData{Billing: u.can(r, contracts.ObjBilling, contracts.ActRead)}
	p := u.parsePeriod(r, "/finance")
	d.Scope = metering.Scope(r.c.Query("scope", string(metering.ScopeBuyer)))
	group := metering.GroupBy(r.c.Query("group", string(metering.ByListing)))
	_, tag := group.TagKey()
	if !slices.Contains(tableGroups, group) && !tag || !d.Scope.Allows(group) {
		group = metering.ByListing
	}
	groups := slices.Clone(tableGroups)
	for _, k := range u.tagKeys(r) {
		groups = append(groups, metering.ByTag(k))
	}
	if tag && !slices.Contains(groups, group) {
		groups = append(groups, group)
	}
	p.Keep = map[string]string{"scope": string(d.Scope), "group": string(group)}
	for _, s := range scopeLabels {
		if s.Value == string(metering.ScopePlatform) && !r.actor.Operator {
			continue
		}
		q := url.Values{"scope": {s.Value}, "from": {p.From}, "to": {p.To}, "group": {string(group)}}
		d.Scopes = append(d.Scopes, option{Value: s.Value, Label: s.Label, Current: s.Value == string(d.Scope), Href: "/finance?" + q.Encode()})
	}
	for _, g := range groups {
		if !d.Scope.Allows(g) {
			continue
		}
		q := url.Values{"scope": {string(d.Scope)}, "from": {p.From}, "to": {p.To}, "group": {string(g)}}
		d.Groups = append(d.Groups, option{Value: string(g), Label: groupTitle(g), Current: g == group, Href: "/finance?" + q.Encode()})
	}
	d.CSVTasks = "/finance/usage.csv?" + url.Values{"group_by": {"task"}, "from": {p.From}, "to": {p.To}, "scope": {string(d.Scope)}}.Encode()
	d.Period = &p
	if len(p.Errors) > 0 {
		return u.render(r, "finance", "Finance", d)
	}
	queried := []metering.GroupBy{metering.ByDay, metering.ByListing}
	if group != metering.ByDay && group != metering.ByListing {
		queried = append(queried, group)
	}
	lb := u.newLabeler(r)
	tables, err := u.usageTables(r, lb, d.Scope, p, "", queried...)
	if err != nil {
		return err
	}
	d.Days, d.Agents = tables[0], tables[1]
	d.Total = d.Days.Total
	switch group {
	case metering.ByDay:
		d.Table = d.Days
	case metering.ByListing:
		d.Table = d.Agents
	default:
		d.Table = tables[2]
	}
	cur := d.Days.Currency
	format := func(v int64) string { return formatMicros(v, cur) }
	// The trend has a column for every day of the period, used or not.
	byDay := map[string]int64{}
	for _, row := range d.Days.Rows {
		byDay[row.Key] = row.CostMicros
	}
	var trend []point
	if days := int(p.End.Sub(p.Start) / (24 * time.Hour)); days <= 400 {
		for t := p.Start; t.Before(p.End); t = t.AddDate(0, 0, 1) {
			k := t.Format(dateLayout)
			trend = append(trend, point{Label: k, Value: byDay[k], Display: formatCents(byDay[k], cur), Exact: format(byDay[k])})
		}
	} else {
		for _, row := range d.Days.Rows {
			trend = append(trend, point{Label: row.Key, Value: row.CostMicros, Display: formatCents(row.CostMicros, cur), Exact: format(row.CostMicros)})
		}
	}
	d.Trend = trendChart("trend", "Cost per day", "Cost per day from "+p.From+" to "+p.To+", "+formatCents(d.Total.CostMicros, cur)+" in total. The table below lists the figures.", trend, format, 2*minorUnitMicros(cur))
	var bars []point
	for i, row := range d.Agents.Rows {
		if i == 10 {
			break
		}
		bars = append(bars, point{Label: row.Label, Value: row.CostMicros, Display: formatCents(row.CostMicros, row.Currency), Exact: row.Cost(), Href: row.Href})
	}
	d.Bars = barChart("agents", "Cost per agent", "The "+strconv.Itoa(len(bars))+" agents that cost most from "+p.From+" to "+p.To+".", bars)
	return u.render(r, "finance", "Finance", d)
}

// financeCSV exports a grouping, every row, with names.
func (u *UI) financeCSV(r *req) error {
	if err := u.require(r, contracts.ObjUsage, contracts.ActRead); err != nil {
		return err
	}
	p := u.parsePeriod(r, "")
	if len(p.Errors) > 0 {
		var fe agentmarket.Fields
		for _, e := range p.Errors {
			fe.Add(e.Field, "format", "%s", e.Message)
		}
		return fe.Err("invalid_usage_query", "the usage query is not valid")
	}
	g := metering.GroupBy(r.c.Query("group_by", string(metering.ByListing)))
	scope := metering.Scope(r.c.Query("scope", string(metering.ScopeBuyer)))
	res, err := u.totals(r, scope, p, "", g)
	if err != nil {
		return err
	}
	lb := u.newLabeler(r)
	r.c.Set("Content-Type", "text/csv; charset=utf-8")
	r.c.Set("Content-Disposition", `attachment; filename="usage-`+string(g)+"-"+p.From+"-"+p.To+`.csv"`)
	r.c.Set("Cache-Control", "no-store")
	w := csv.NewWriter(r.c.Response().BodyWriter())
	w.Write([]string{string(g), "name", "calls", "tasks", "input_tokens", "output_tokens", "compute_ms", "cost_micros", "estimated_calls"})
	i64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	for _, t := range res[0] {
		name := ""
		if g != metering.ByDay {
			name, _ = lb.label(g, t.Key)
		}
		w.Write([]string{agentmarket.CSVCell(t.Key), agentmarket.CSVCell(name), i64(t.Calls), i64(t.Tasks), i64(t.InputTokens), i64(t.OutputTokens), i64(t.ComputeMs), i64(t.CostMicros), i64(t.Estimated)})
	}
	w.Flush()
	return w.Error()
}

type driftRow struct {
	billing.Drift
	Listing, Buyer, Seller string
}

// monthPage is a page of one month (the "monthform" template).
type monthPage struct {
	form
	Action     string // the page's path
	Period     string
	Prev, Next string
	period     billing.Period
}

// newMonthPage reads the month a page at action shows from ?period=YYYY-MM
// (def when absent; an error on the period field when malformed), with
// the links to the months around it.
func newMonthPage(r *req, def billing.Period, action string) monthPage {
	m := monthPage{form: form{Values: map[string]string{}}, Action: action, period: def}
	if v := strings.TrimSpace(r.c.Query("period")); v != "" {
		m.Values["period"] = v
		if p, err := billing.ParseMonth("period", v); err != nil {
			m.add("period", "The month must look like 2026-11, from 1970-01 to 2105-12.")
		} else {
			m.period = p
		}
	}
	m.Period = m.period.Start.Format("2006-01")
	m.Values["period"] = m.Period
	m.Prev = action + "?period=" + m.period.Start.AddDate(0, -1, 0).Format("2006-01")
	m.Next = action + "?period=" + m.period.End.Format("2006-01")
	return m
}

type reconData struct {
	monthPage
	Drifts   []driftRow
	Operator bool
}

// Show formats a drift quantity (nil: none recorded).
func (d driftRow) Show(v *int64) string {
	if v == nil {
		return "—"
	}
	return formatCount(*v)
}

// reconciliation compares metered, reported and invoiced usage of a month.
func (u *UI) reconciliation(r *req) error {
	if err := u.require(r, contracts.ObjBilling, contracts.ActRead); err != nil {
		return err
	}
	if u.d.Billing == nil {
		return agentmarket.Errorf(agentmarket.Unavailable, "no_billing", "billing is not configured on this marketplace")
	}
	d := &reconData{monthPage: newMonthPage(r, billing.MonthOf(u.d.Clock.Now()), "/finance/reconciliation"), Operator: r.actor.Operator}
	if len(d.Errors) == 0 {
		drifts, err := u.d.Billing.Reconcile(r.ctx, d.period)
		if err != nil {
			return err
		}
		lb := u.newLabeler(r)
		for _, x := range drifts {
			if !r.actor.Operator && x.BuyerOrgID != r.actor.OrgID && x.SellerOrgID != r.actor.OrgID {
				continue
			}
			row := driftRow{Drift: x, Buyer: u.orgName(r.ctx, x.BuyerOrgID), Seller: u.orgName(r.ctx, x.SellerOrgID)}
			if x.ListingID != "" {
				row.Listing = lb.listing(x.ListingID).name
			}
			d.Drifts = append(d.Drifts, row)
		}
	}
	return u.render(r, "reconciliation", "Reconciliation", d)
}

type invoiceView struct {
	Contract contracts.Contract
	Listing  string
	Invoice  *billing.Invoice
	Err      string
}

// invoices previews the current month's invoice of each of the org's
// subscriptions.
func (u *UI) invoices(r *req) error {
	if err := u.require(r, contracts.ObjBilling, contracts.ActRead); err != nil {
		return err
	}
	if u.d.Subscriptions == nil || u.d.Invoices == nil {
		return agentmarket.Errorf(agentmarket.Unavailable, "no_meter", "this marketplace takes no subscriptions")
	}
	cs, err := u.d.Subscriptions.List(r.ctx, r.actor)
	if err != nil {
		return err
	}
	month := billing.MonthOf(u.d.Clock.Now())
	lb := u.newLabeler(r)
	var out []invoiceView
	for _, c := range cs {
		if c.CanceledAt != nil && c.CanceledAt.Before(month.Start) {
			continue
		}
		v := invoiceView{Contract: c, Listing: lb.listing(c.ListingID).name}
		inv, err := u.d.Invoices.Preview(r.ctx, r.actor, c.ID)
		if err != nil {
			if agentmarket.KindOf(err) == agentmarket.Internal || agentmarket.KindOf(err) == agentmarket.Unavailable {
				return err
			}
			v.Err = publicMessage(err)
		}
		v.Invoice = inv
		out = append(out, v)
	}
	data := map[string]any{"Invoices": out, "Month": month.Start.Format("January 2006")}
	if u.d.Focus != nil {
		prev := billing.MonthOf(month.Start.Add(-time.Second))
		data["Exports"] = []focusLink{
			{Month: month.Start.Format("January 2006"), Href: "/finance/focus.csv?period=" + month.Start.Format("2006-01"), Open: true},
			{Month: prev.Start.Format("January 2006"), Href: "/finance/focus.csv?period=" + prev.Start.Format("2006-01")},
		}
	}
	return u.render(r, "invoices", "Invoice previews", data)
}

// focusLink is a month's FOCUS export; Open marks the month not over.
type focusLink struct {
	Month, Href string
	Open        bool
}

// focusCSV downloads the org's FOCUS cost and usage rows of a month
// (period=YYYY-MM, default the current one), as the API's
// /exports/focus does.
func (u *UI) focusCSV(r *req) error {
	if err := u.require(r, contracts.ObjBilling, contracts.ActRead); err != nil {
		return err
	}
	if u.d.Focus == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "not_found", "this marketplace has no FOCUS export")
	}
	period := billing.MonthOf(u.d.Clock.Now())
	if v := strings.TrimSpace(r.c.Query("period")); v != "" {
		p, err := billing.ParseMonth("period", v)
		if err != nil {
			var fe agentmarket.Fields
			fe.Add("period", "format", "The month must look like 2026-11, from 1970-01 to 2105-12.")
			return fe.Err("invalid_focus_export", "the FOCUS export request is not valid")
		}
		period = p
	}
	rows, err := u.d.Focus.Rows(r.ctx, billing.FocusInput{OrgID: r.actor.OrgID, Period: period})
	if err != nil {
		return err
	}
	r.c.Set("Content-Type", "text/csv; charset=utf-8")
	r.c.Set("Content-Disposition", `attachment; filename="focus-`+period.Start.Format("2006-01")+`.csv"`)
	r.c.Set("Cache-Control", "no-store")
	return billing.WriteFocusCSV(r.c.Response().BodyWriter(), rows)
}
