package web

import (
	"net/url"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts/audit"
	"github.com/agentmarket/agentmarket/web/api"
)

type auditData struct {
	Filter  map[string]string
	Entries []auditEntry
	// Next is the link to the page of older entries ("" for none); CSV
	// the link to this page as CSV.
	Next, CSV string
	Report    *audit.Report
	Operator  bool
}

// auditEntry is an entry with its actor's names, as the viewer may see
// them ("" where it may not, or there is none: the page shows the id).
type auditEntry struct {
	audit.Entry
	OrgName, UserName, KeyName string
	// Changes are the object's fields that changed, in words; Created and
	// Removed: the object came or went.
	Changes          []fieldChange
	Created, Removed bool
}

// named gives entries their actors' names.
func (u *UI) named(r *req, es []audit.Entry) []auditEntry {
	n := u.d.Accounts.Names(r.actor)
	out := make([]auditEntry, len(es))
	for i, e := range es {
		out[i] = auditEntry{Entry: e, OrgName: n.Org(r.ctx, e.ActorOrgID), UserName: n.User(r.ctx, e.ActorUserID), KeyName: n.Key(r.ctx, e.ActorKeyID).Name}
		out[i].Changes, out[i].Created, out[i].Removed = auditChanges(e.Before, e.After)
	}
	return out
}

// auditFields are the filters the page's form sends, as the API names
// them.
var auditFields = []string{"actor", "action", "object_type", "object_id", "from", "to"}

// mayAudit: the page is for those the log's own rule lets read it
// (audit.Scope): admins (their org's entries), the platform's admins
// (every entry).
func (u *UI) mayAudit(r *req) bool {
	if u.d.Audit == nil || !r.signedIn {
		return false
	}
	_, err := audit.Scope(r.actor)
	return err == nil
}

// entries reads the entries the request's filters select (at most
// limit when the request names no limit), as the audit log lets the
// signed-in actor read them.
func (u *UI) entries(r *req, limit int) ([]audit.Entry, audit.Filter, error) {
	if !r.signedIn {
		return nil, audit.Filter{}, agentmarket.Errorf(agentmarket.Unauthorized, "no_session", "sign in to see this page")
	}
	if u.d.Audit == nil {
		return nil, audit.Filter{}, agentmarket.Errorf(agentmarket.NotFound, "audit_not_available", "this marketplace keeps no audit log")
	}
	f, err := api.AuditFilter(r.c)
	if err != nil {
		return nil, f, err
	}
	if f.Limit == 0 {
		f.Limit = limit
	}
	es, err := u.d.Audit.List(r.ctx, r.actor, f)
	return es, f, err
}

// auditLog shows the audit entries the filters select, newest first, with
// what verifying the chain found when asked (?verify=1).
func (u *UI) auditLog(r *req) error {
	es, f, err := u.entries(r, 50)
	if err != nil {
		return err
	}
	all, _ := audit.Scope(r.actor)
	d := &auditData{Filter: map[string]string{}, Entries: u.named(r, es), Operator: all}
	q := url.Values{}
	for _, k := range auditFields {
		if v := r.c.Query(k); v != "" {
			d.Filter[k] = v
			q.Set(k, v)
		}
	}
	d.CSV = "/audit.csv?" + q.Encode()
	if len(es) == f.Limit {
		q.Set("before", strconv.FormatInt(es[len(es)-1].Seq, 10))
		d.Next = "/audit?" + q.Encode()
	}
	if r.c.Query("verify") == "1" && all {
		if d.Report, err = u.d.Audit.Verify(r.ctx, r.actor); err != nil {
			return err
		}
	}
	return u.render(r, "audit", "Audit log", d)
}

// auditCSV is the page's entries as CSV.
func (u *UI) auditCSV(r *req) error {
	es, _, err := u.entries(r, audit.MaxLimit)
	if err != nil {
		return err
	}
	r.c.Set(fiber.HeaderContentType, "text/csv; charset=utf-8")
	r.c.Set(fiber.HeaderContentDisposition, `attachment; filename="audit.csv"`)
	return api.WriteAuditCSV(r.c, es)
}
