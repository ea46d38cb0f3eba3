package api

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts/audit"
)

// RequestIDHeader carries a request's id: the caller's, when it sends a
// usable one, else one made here; the audit log records it, and the
// answer says it.
const RequestIDHeader = "X-Request-Id"

// RequestID returns the request's id: the caller's X-Request-Id when it
// is short plain text, else a new one.
func RequestID(c *fiber.Ctx) string {
	if id := c.Get(RequestIDHeader); id != "" && len(id) <= 128 {
		var fe agentmarket.Fields
		if fe.Text("id", id, 128) {
			return id
		}
	}
	return agentmarket.NewID("req")
}

// withRequest puts the request's id and the client's address in the
// request's context, where the audit log reads them, and sends the id
// back.
func (s *Server) withRequest(c *fiber.Ctx) error {
	id := RequestID(c)
	c.Set(RequestIDHeader, id)
	c.SetUserContext(agentmarket.WithRequest(c.UserContext(), agentmarket.Request{ID: id, IP: ClientAddrOf(c, s.Proxies).String()}))
	return c.Next()
}

type auditActorJSON struct {
	OrgID    string `json:"org_id,omitempty"`
	UserID   string `json:"user_id,omitempty"`
	KeyID    string `json:"key_id,omitempty"`
	Role     string `json:"role,omitempty"`
	Operator bool   `json:"operator,omitempty"`
	IP       string `json:"ip,omitempty"`
}

type auditObjectJSON struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

type auditEntryJSON struct {
	Seq       int64           `json:"seq"`
	At        time.Time       `json:"at"`
	Actor     auditActorJSON  `json:"actor"`
	Via       string          `json:"via,omitempty"`
	Action    string          `json:"action"`
	Object    auditObjectJSON `json:"object"`
	OrgID     string          `json:"org_id,omitempty"`
	Before    json.RawMessage `json:"before"`
	After     json.RawMessage `json:"after"`
	RequestID string          `json:"request_id,omitempty"`
	PrevHash  string          `json:"prev_hash"`
	Hash      string          `json:"hash"`
}

func auditEntryView(e *audit.Entry) auditEntryJSON {
	return auditEntryJSON{Seq: e.Seq, At: e.At, Actor: auditActorJSON{OrgID: e.ActorOrgID, UserID: e.ActorUserID, KeyID: e.ActorKeyID,
		Role: e.ActorRole, Operator: e.Operator, IP: e.ActorIP}, Via: e.Via, Action: e.Action, Object: auditObjectJSON{e.ObjectType, e.ObjectID},
		OrgID: e.OrgID, Before: e.Before, After: e.After, RequestID: e.RequestID, PrevHash: e.PrevHash, Hash: e.Hash}
}

func (s *Server) audit() error {
	if s.Audit == nil {
		return agentmarket.Errorf(agentmarket.NotFound, "audit_not_available", "this marketplace keeps no audit log")
	}
	return nil
}

// AuditFilter reads the audit log's filters from a request's query:
// actor, action, object (a type, or type:id) or object_type and
// object_id, from and to (RFC 3339, or a day in UTC), before and limit.
func AuditFilter(c *fiber.Ctx) (audit.Filter, error) {
	f := audit.Filter{Actor: c.Query("actor"), Action: c.Query("action"), ObjectType: c.Query("object_type"), ObjectID: c.Query("object_id")}
	if o := c.Query("object"); o != "" {
		// object=listing, or object=listing:lst_… for one.
		f.ObjectType, f.ObjectID, _ = strings.Cut(o, ":")
	}
	var fe agentmarket.Fields
	when := func(name string, dst *time.Time) {
		if v := c.Query(name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				// A day alone is its start, in UTC.
				t, err = time.Parse(time.DateOnly, v)
			}
			if err != nil {
				fe.Add(name, "format", "%s must be a day like 2026-05-01 or an RFC 3339 time like 2026-05-01T00:00:00Z", name)
			}
			*dst = t
		}
	}
	when("from", &f.From)
	when("to", &f.To)
	num := func(name string, dst *int64) {
		if v := c.Query(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 {
				fe.Add(name, "format", "%s must be a positive integer", name)
			}
			*dst = n
		}
	}
	var limit int64
	num("before", &f.Before)
	num("limit", &limit)
	f.Limit = int(min(limit, audit.MaxLimit+1))
	return f, fe.Err("invalid_audit_filter", "the audit filter is not valid")
}

// listAudit answers the audit entries the filters select, newest first:
// an org's admin sees its org's, the platform's operators every one. As
// JSON, a page ("next_before" asks for the next); as CSV (Accept:
// text/csv), the same page.
func (s *Server) listAudit(c *fiber.Ctx) error {
	if err := s.audit(); err != nil {
		return err
	}
	f, err := AuditFilter(c)
	if err != nil {
		return err
	}
	es, err := s.Audit.List(c.UserContext(), actorOf(c), f)
	if err != nil {
		return err
	}
	if strings.Contains(c.Get(fiber.HeaderAccept), "text/csv") {
		c.Set(fiber.HeaderContentType, "text/csv; charset=utf-8")
		c.Set(fiber.HeaderContentDisposition, `attachment; filename="audit.csv"`)
		return WriteAuditCSV(c, es)
	}
	out := make([]auditEntryJSON, len(es))
	for i := range es {
		out[i] = auditEntryView(&es[i])
	}
	body := fiber.Map{"entries": out}
	if n := len(es); n > 0 && n == cmp.Or(f.Limit, audit.DefaultLimit) {
		body["next_before"] = es[n-1].Seq
	}
	return c.JSON(body)
}

// AuditCSVHeader are the audit CSV's columns.
var AuditCSVHeader = []string{"seq", "at", "actor_org_id", "actor_user_id", "actor_key_id", "actor_role", "operator", "actor_ip", "via",
	"action", "object_type", "object_id", "org_id", "request_id", "before", "after", "prev_hash", "hash"}

// WriteAuditCSV writes es as CSV, cells made safe for spreadsheets.
func WriteAuditCSV(c *fiber.Ctx, es []audit.Entry) error {
	w := csv.NewWriter(c.Response().BodyWriter())
	if err := w.Write(AuditCSVHeader); err != nil {
		return err
	}
	for _, e := range es {
		rec := agentmarket.CSVRecord([]string{strconv.FormatInt(e.Seq, 10), e.At.UTC().Format(time.RFC3339Nano), e.ActorOrgID, e.ActorUserID,
			e.ActorKeyID, e.ActorRole, strconv.FormatBool(e.Operator), e.ActorIP, e.Via, e.Action, e.ObjectType, e.ObjectID, e.OrgID,
			e.RequestID, string(e.Before), string(e.After), e.PrevHash, e.Hash})
		if err := w.Write(rec); err != nil {
			return err
		}
	}
	w.Flush()
	return w.Error()
}

// verifyAudit walks the whole chain and answers what it found: ok, or
// the first broken row and why (200 either way: the check ran).
func (s *Server) verifyAudit(c *fiber.Ctx) error {
	if err := s.audit(); err != nil {
		return err
	}
	r, err := s.Audit.Verify(c.UserContext(), actorOf(c))
	if err != nil {
		return err
	}
	return c.JSON(r)
}

// auditJWKS serves the public keys the audit checkpoints are signed with.
func (s *Server) auditJWKS(c *fiber.Ctx) error {
	return serveJWKS(c, s.AuditKeys, "audit", "the audit log's checkpoints are not signed here")
}
