package contracts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket"
)

// A kill switch stops, at once and on every meter, what goes through the
// meter to a listing, a seller's listings, a buyer org, one API key or one
// task: calls in flight and streams are ended, the tasks concerned are
// canceled at their agents, and new calls are refused (the meter's
// killswitch stage, a2aproxy/killswitch.go). A key or org switched off may
// still GetTask and CancelTask its tasks: an api_key switch finds none of
// the key's tasks to cancel (task_owners records the org, not the key), so
// the buyer must be able to stop them itself. Push notifications of the
// tasks concerned are still delivered (docs/operations.md#kill-switches).
// It is lifted by hand; every use and lift is in the audit log with who
// and why.
//
// Who may use which:
//
//	listing     the platform's operator; the listing's own seller (admin or seller role)
//	seller_org  the operator
//	buyer_org   the operator
//	api_key     the operator; the key's org's admin
//	task        the operator; the task's owner org's admin
//
// A switch is lifted by the operator, or by its target's org when that org
// set it (a seller cannot lift what the operator set on its listing). When
// the operator switches off a target whose org's switch is on, the
// operator's switch takes its place (the org's is lifted, by the operator).

// SwitchScope is what a kill switch stops.
type SwitchScope string

const (
	SwitchListing   SwitchScope = "listing"
	SwitchSellerOrg SwitchScope = "seller_org"
	SwitchBuyerOrg  SwitchScope = "buyer_org"
	SwitchAPIKey    SwitchScope = "api_key"
	SwitchTask      SwitchScope = "task"
)

// SwitchScopes lists every scope, in the order they are documented.
var SwitchScopes = []SwitchScope{SwitchListing, SwitchSellerOrg, SwitchBuyerOrg, SwitchAPIKey, SwitchTask}

// CanceledByKillSwitch is the actor of the cancels a kill switch makes
// (TaskEvent.Actor); the event's reason names the switch, who set it and
// why.
const CanceledByKillSwitch = "kill_switch"

// MaxSwitchReason bounds a switch's reason, in characters.
const MaxSwitchReason = 500

// Switch is one use of a kill switch.
type Switch struct {
	ID    string      `json:"id"`
	Scope SwitchScope `json:"scope"`
	// TargetID is the listing, org, API key or task switched off;
	// ListingID, for a task, is its listing.
	TargetID  string `json:"target_id"`
	ListingID string `json:"listing_id,omitempty"`
	// OrgID is the org the target belongs to (a listing's seller, a key's
	// or task's buyer, the org itself): its admins see the switch.
	OrgID  string `json:"org_id"`
	Reason string `json:"reason"`
	// SetBy is who set it ("key:<id>", "user:<id>", or "operator" as an
	// org other than the platform sees it), SetByOrg its org.
	SetBy      string     `json:"set_by"`
	SetByOrg   string     `json:"set_by_org,omitempty"`
	ByOperator bool       `json:"by_operator"`
	SetAt      time.Time  `json:"set_at"`
	LiftedAt   *time.Time `json:"lifted_at,omitempty"`
	LiftedBy   string     `json:"lifted_by,omitempty"`
	// LiftedByOperator: the platform's operator lifted it.
	LiftedByOperator bool   `json:"lifted_by_operator,omitempty"`
	LiftReason       string `json:"lift_reason,omitempty"`
}

// Active reports whether the switch is on.
func (s *Switch) Active() bool { return s.LiftedAt == nil }

// CancelReason is what the TaskCanceled events of the switch's cancels say.
func (s *Switch) CancelReason() string {
	who := s.SetBy
	if s.ByOperator {
		who = "the platform operator"
	}
	return fmt.Sprintf("kill switch %s (%s %s) set by %s: %s", s.ID, s.Scope, s.TargetID, who, s.Reason)
}

// SwitchStore persists kill switches. Every set and lift bumps one
// version number, which the meters poll (SwitchVersion): a cheap read of
// one row tells them whether to read the active switches again.
type SwitchStore interface {
	// CreateSwitch stores an active switch; a Conflict when one of the
	// same scope and target is on.
	CreateSwitch(ctx context.Context, s *Switch) error
	// TakeOverSwitch stores an operator's switch in place of the active
	// switch of the same target an org set, which it lifts in the same
	// transaction (lifted by s.SetBy, as the operator, with liftReason) and
	// returns lifted; nil when no org's switch was on. A Conflict when the
	// operator's own switch is on.
	TakeOverSwitch(ctx context.Context, s *Switch, liftReason string) (*Switch, error)
	// LiftSwitch marks an active switch lifted; NotFound when there is no
	// such active switch.
	LiftSwitch(ctx context.Context, id, by string, byOperator bool, reason string, at time.Time) (*Switch, error)
	GetSwitch(ctx context.Context, id string) (*Switch, error)
	// ListSwitches lists switches, newest first: of one target org (""
	// for all), active only or with the lifted ones, at most limit.
	ListSwitches(ctx context.Context, orgID string, activeOnly bool, limit int) ([]Switch, error)
	// SwitchTargetOrg is the org a target belongs to, NotFound for none.
	SwitchTargetOrg(ctx context.Context, scope SwitchScope, listingID, targetID string) (string, error)
	SwitchReader
}

// SwitchReader is what a meter reads of the switches.
type SwitchReader interface {
	// SwitchVersion is the number of sets and lifts ever made.
	SwitchVersion(ctx context.Context) (int64, error)
	// ActiveSwitches are the switches on, with the version they are of.
	ActiveSwitches(ctx context.Context) ([]Switch, int64, error)
	// RequestSwitchCancels records a cancel (RequestCancel) of every task
	// the switch concerns that has not ended and has none requested, due
	// at at; it returns how many. A key's tasks are not recorded by key:
	// none is found for an api_key switch.
	RequestSwitchCancels(ctx context.Context, s *Switch, at time.Time) (int64, error)
}

// SwitchSignal tells the meters at once that the switches changed (Redis
// publish); the version poll is the backstop. nil: the poll alone.
type SwitchSignal interface {
	SwitchesChanged(ctx context.Context) error
}

// Switches is the kill switch service.
type Switches struct {
	Store  SwitchStore
	Clock  agentmarket.Clock
	Signal SwitchSignal
	// CancelAfter is how long after a switch its tasks' cancels fall due:
	// two of the meters' polls of the switches, so that every meter has
	// ended the streams it relays with the switch's error before an agent
	// told to cancel ends them with a bare CANCELED. 0: at once.
	CancelAfter time.Duration
	// Audit records every set and lift (nil: none is).
	Audit agentmarket.ChangeRecorder
}

// SwitchInput is a request to switch something off.
type SwitchInput struct {
	Scope     SwitchScope `json:"scope"`
	TargetID  string      `json:"target_id"`
	ListingID string      `json:"listing_id"`
	Reason    string      `json:"reason"`
}

// Validate joins every broken rule.
func (in *SwitchInput) Validate() error {
	var fe agentmarket.Fields
	known := false
	for _, s := range SwitchScopes {
		known = known || in.Scope == s
	}
	if !known {
		fe.Add("scope", "one_of", "scope must be one of listing, seller_org, buyer_org, api_key, task")
	}
	if strings.TrimSpace(in.TargetID) == "" {
		fe.Add("target_id", "required", "target_id is required: the id of the listing, org, API key or task to switch off")
	} else {
		fe.Text("target_id", in.TargetID, 200)
	}
	if in.Scope == SwitchTask && strings.TrimSpace(in.ListingID) == "" {
		fe.Add("listing_id", "required", "listing_id is required for a task: task ids are the agent's, unique per listing")
	}
	if in.Scope != SwitchTask && in.ListingID != "" {
		fe.Add("listing_id", "task_only", "listing_id is only taken with scope task")
	}
	fe.Text("listing_id", in.ListingID, 200)
	if strings.TrimSpace(in.Reason) == "" {
		fe.Add("reason", "required", "reason is required: say why, it is recorded and shown")
	} else {
		fe.Text("reason", in.Reason, MaxSwitchReason)
	}
	return fe.Err("invalid_kill_switch", "the kill switch request is not valid")
}

// mayUse reports whether actor may set a switch of scope on a target of
// targetOrg (and lift one its org set).
func mayUse(actor agentmarket.Actor, scope SwitchScope, targetOrg string) bool {
	if actor.Operator && actor.Role == agentmarket.RoleAdmin {
		return true
	}
	if actor.OrgID != targetOrg {
		return false
	}
	switch scope {
	case SwitchListing:
		return actor.Role == agentmarket.RoleAdmin || actor.Role == agentmarket.RoleSeller
	case SwitchAPIKey, SwitchTask:
		return actor.Role == agentmarket.RoleAdmin
	}
	return false
}

// ownSwitch reports whether a switch of scope on target is of the acting
// key itself.
func ownSwitch(actor agentmarket.Actor, scope SwitchScope, target string) bool {
	return scope == SwitchAPIKey && actor.KeyID != "" && actor.KeyID == target
}

func actorName(a agentmarket.Actor) string {
	switch {
	case a.KeyID != "":
		return "key:" + a.KeyID
	case a.UserID != "":
		return "user:" + a.UserID
	}
	return "org:" + a.OrgID
}

// Set switches a target off. A target of another org is answered as one
// that does not exist (NotFound) for keys and tasks, whose ids are not
// public, and Forbidden for listings and orgs.
func (s *Switches) Set(ctx context.Context, actor agentmarket.Actor, in SwitchInput) (*Switch, error) {
	in.TargetID, in.ListingID, in.Reason = strings.TrimSpace(in.TargetID), strings.TrimSpace(in.ListingID), strings.TrimSpace(in.Reason)
	if err := in.Validate(); err != nil {
		return nil, err
	}
	org, err := s.Store.SwitchTargetOrg(ctx, in.Scope, in.ListingID, in.TargetID)
	if err != nil {
		return nil, err
	}
	if !mayUse(actor, in.Scope, org) {
		if in.Scope == SwitchAPIKey || in.Scope == SwitchTask {
			return nil, agentmarket.Errorf(agentmarket.NotFound, "not_found", "no %s %q", strings.ReplaceAll(string(in.Scope), "_", " "), in.TargetID)
		}
		return nil, agentmarket.Errorf(agentmarket.Forbidden, "forbidden", "you may not switch off this %s", strings.ReplaceAll(string(in.Scope), "_", " "))
	}
	if ownSwitch(actor, in.Scope, in.TargetID) {
		return nil, agentmarket.Errorf(agentmarket.Forbidden, "own_kill_switch", "a key does not switch itself off: use another of the org's admin keys")
	}
	sw := &Switch{ID: agentmarket.NewID("ks"), Scope: in.Scope, TargetID: in.TargetID, ListingID: in.ListingID, OrgID: org,
		Reason: in.Reason, SetBy: actorName(actor), SetByOrg: actor.OrgID, ByOperator: actor.Operator, SetAt: s.Clock.Now().UTC()}
	// An org's own switch must not stand in the operator's way (one switch
	// is on per target, and the org may lift its own at any time): the
	// operator's takes its place, and only the operator lifts it.
	var taken *Switch
	if sw.ByOperator {
		taken, err = s.Store.TakeOverSwitch(ctx, sw, "taken over by the platform operator's kill switch "+sw.ID)
	} else {
		err = s.Store.CreateSwitch(ctx, sw)
	}
	if err != nil {
		return nil, err
	}
	var liftAudit error
	if taken != nil {
		before := *taken
		before.LiftedAt, before.LiftedBy, before.LiftedByOperator, before.LiftReason = nil, "", false, ""
		liftAudit = agentmarket.RecordChange(ctx, s.Audit, agentmarket.Change{Actor: actor, Action: "kill_switch.lift", ObjectType: "kill_switch",
			ObjectID: taken.ID, OrgID: taken.OrgID, Before: &before, After: taken})
	}
	// The tasks it concerns fall due for cancelling CancelAfter later:
	// every meter's sweeper carries them out (each meter sweeps when that
	// time comes). A failure here is not the caller's: each meter requests
	// them again as it sees the switch.
	_, _ = s.Store.RequestSwitchCancels(ctx, sw, sw.SetAt.Add(s.CancelAfter))
	s.signal(ctx)
	return sw, errors.Join(liftAudit, agentmarket.RecordChange(ctx, s.Audit, agentmarket.Change{Actor: actor, Action: "kill_switch.set", ObjectType: "kill_switch",
		ObjectID: sw.ID, OrgID: org, After: sw}))
}

// Lift switches a target back on.
func (s *Switches) Lift(ctx context.Context, actor agentmarket.Actor, id, reason string) (*Switch, error) {
	reason = strings.TrimSpace(reason)
	var fe agentmarket.Fields
	if reason == "" {
		fe.Add("reason", "required", "reason is required: say why, it is recorded and shown")
	} else {
		fe.Text("reason", reason, MaxSwitchReason)
	}
	if err := fe.Err("invalid_kill_switch", "the lift request is not valid"); err != nil {
		return nil, err
	}
	before, err := s.Store.GetSwitch(ctx, id)
	if err != nil {
		return nil, err
	}
	operator := actor.Operator && actor.Role == agentmarket.RoleAdmin
	if !operator && before.OrgID != actor.OrgID {
		return nil, agentmarket.Errorf(agentmarket.NotFound, "not_found", "no kill switch %q", id)
	}
	if !operator && (before.ByOperator || !mayUse(actor, before.Scope, before.OrgID)) {
		return nil, agentmarket.Errorf(agentmarket.Forbidden, "forbidden", "only the platform operator lifts this kill switch")
	}
	if ownSwitch(actor, before.Scope, before.TargetID) {
		// The switched-off key would otherwise switch itself back on (the
		// API still takes it: the switch stops its calls through the meter).
		return nil, agentmarket.Errorf(agentmarket.Forbidden, "own_kill_switch", "a key does not lift its own kill switch: another admin of the org or the operator does")
	}
	after, err := s.Store.LiftSwitch(ctx, id, actorName(actor), actor.Operator, reason, s.Clock.Now().UTC())
	if err != nil {
		return nil, err
	}
	s.signal(ctx)
	return after, agentmarket.RecordChange(ctx, s.Audit, agentmarket.Change{Actor: actor, Action: "kill_switch.lift", ObjectType: "kill_switch",
		ObjectID: id, OrgID: after.OrgID, Before: before, After: after})
}

// List is the switches an actor sees: the operator every one, an org's
// members those on its own listings, keys, tasks and itself, with the
// operator's own key and org left out.
func (s *Switches) List(ctx context.Context, actor agentmarket.Actor, activeOnly bool) ([]Switch, error) {
	org := actor.OrgID
	if actor.Operator {
		org = ""
	}
	out, err := s.Store.ListSwitches(ctx, org, activeOnly, 500)
	if err != nil {
		return nil, err
	}
	if !actor.Operator {
		for i := range out {
			redactOperator(&out[i])
		}
	}
	return out, nil
}

// SwitchTenantView is a switch's audit JSON as an org other than the
// platform sees it: the operator's people and org are "operator", as in
// List (audit.Log.TenantViews). JSON that is not a switch is returned as
// it is.
func SwitchTenantView(raw json.RawMessage) json.RawMessage {
	var sw Switch
	if len(raw) == 0 || string(raw) == "null" || json.Unmarshal(raw, &sw) != nil || sw.ID == "" {
		return raw
	}
	if !sw.ByOperator && !sw.LiftedByOperator {
		return raw
	}
	redactOperator(&sw)
	out, err := json.Marshal(&sw)
	if err != nil {
		return raw
	}
	return out
}

// redactOperator names the operator's acts on sw as "operator".
func redactOperator(sw *Switch) {
	if sw.ByOperator {
		sw.SetBy, sw.SetByOrg = "operator", ""
	}
	if sw.LiftedByOperator {
		sw.LiftedBy = "operator"
	}
}

func (s *Switches) signal(ctx context.Context) {
	if s.Signal != nil {
		// The meters' poll sees the change within its interval anyway.
		_ = s.Signal.SwitchesChanged(ctx)
	}
}
