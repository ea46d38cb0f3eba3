package audit_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts/audit"
)

// TestCanonical pins the bytes an entry is hashed in: a change of the
// form would make every stored chain fail to verify, so it must be a new
// version, never an accident.
func TestCanonical(t *testing.T) {
	e := &audit.Entry{Seq: 7, At: time.Date(2026, 5, 1, 12, 30, 0, 123456789, time.FixedZone("CEST", 2*3600)),
		ActorOrgID: "org_a", ActorKeyID: "key_k", ActorRole: "admin", Operator: true, ActorIP: "192.0.2.1",
		Action: "listing.approve", ObjectType: "listing", ObjectID: "lst_1", OrgID: "org_s",
		Before: json.RawMessage(`{"status":"pending_review"}`), After: json.RawMessage(`{"status":"published"}`),
		RequestID: "req_1", PrevHash: "ab"}
	want := `{"v":1,"seq":7,"at":"2026-05-01T10:30:00.123456Z","actor_org_id":"org_a","actor_user_id":"","actor_key_id":"key_k",` +
		`"actor_role":"admin","operator":true,"actor_ip":"192.0.2.1","via":"","action":"listing.approve","object_type":"listing",` +
		`"object_id":"lst_1","org_id":"org_s","before":{"status":"pending_review"},"after":{"status":"published"},"request_id":"req_1","prev_hash":"ab"}`
	if got := string(audit.Canonical(e)); got != want {
		t.Errorf("canonical:\n got %s\nwant %s", got, want)
	}
	// The SHA-256 of want, as sha256sum computes it.
	if got := audit.HashOf(e); got != "e9a367016b652c015d0a6ea99431e34e96af66f93a1e7fd65908b3f7b4e38717" {
		t.Errorf("hash %s", got)
	}
	// No before is null, as is a before of null.
	a, b := *e, *e
	a.Before, b.Before = nil, json.RawMessage("null")
	if audit.HashOf(&a) != audit.HashOf(&b) || audit.HashOf(&a) == audit.HashOf(e) {
		t.Errorf("an empty before and a null one hash differently, or like the entry with a before")
	}
	// Every field counts.
	c := *e
	c.ActorIP = "192.0.2.2"
	if audit.HashOf(&c) == audit.HashOf(e) {
		t.Errorf("the address does not count in the hash")
	}
}

func TestFilterValidate(t *testing.T) {
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		f    audit.Filter
		want string // the first field error, "" for none
	}{
		{audit.Filter{}, ""},
		{audit.Filter{Limit: audit.MaxLimit, Action: "listing.", From: at, To: at.Add(time.Hour)}, ""},
		{audit.Filter{Limit: audit.MaxLimit + 1}, "limit:range"},
		{audit.Filter{Limit: -1}, "limit:range"},
		{audit.Filter{Before: -1}, "before:range"},
		{audit.Filter{From: at, To: at}, "to:after"},
		{audit.Filter{Actor: "a\nb"}, "actor:control_character"},
	} {
		err := c.f.Validate()
		got := ""
		if ae, ok := err.(*agentmarket.Error); ok && len(ae.Fields) > 0 {
			got = ae.Fields[0].Field + ":" + ae.Fields[0].Rule
		}
		if got != c.want {
			t.Errorf("%+v: %v, want %q", c.f, err, c.want)
		}
	}
}
