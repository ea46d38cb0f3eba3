package listings

import (
	"fmt"
	"time"

	"github.com/agentmarket/agentmarket"
)

// listingRecord is what the audit log keeps of a listing: its state and
// settings, not its card (kept by hash; the card versions keep the bytes)
// nor its credentials (only whether there are any).
type listingRecord struct {
	ID              string          `json:"id"`
	SellerOrgID     string          `json:"seller_org_id"`
	Status          Status          `json:"status"`
	Health          Health          `json:"health"`
	CardURL         string          `json:"card_url"`
	CardHash        string          `json:"card_hash"`
	CardSignature   SignatureStatus `json:"card_signature"`
	SignaturePolicy SignaturePolicy `json:"signature_policy"`
	CardKeys        bool            `json:"card_keys"`
	PlanVersion     int             `json:"plan_version"`
	UpstreamAuth    bool            `json:"upstream_auth"`
	Limits          LimitsInput     `json:"limits"`
	RefreshSeconds  int64           `json:"refresh_seconds"`
}

func recordOf(l *Listing) *listingRecord {
	if l == nil {
		return nil
	}
	return &listingRecord{ID: l.ID, SellerOrgID: l.SellerOrgID, Status: l.Status, Health: l.Health, CardURL: l.CardURL, CardHash: l.CardHash,
		CardSignature: l.CardSignature.Status, SignaturePolicy: l.SignaturePolicy, CardKeys: len(l.CardKeys) > 0, PlanVersion: l.Plan.Version,
		UpstreamAuth: l.HasUpstreamAuth(), Limits: l.Limits.Input(), RefreshSeconds: int64(l.RefreshInterval / time.Second)}
}

// PlanObjectID names a plan version in the audit log: "lst_…/v3".
func PlanObjectID(listingID string, version int) string {
	return fmt.Sprintf("%s/v%d", listingID, version)
}

// listingChange is the audit record of a change of l.
func listingChange(actor agentmarket.Actor, action string, before *listingRecord, l *Listing) agentmarket.Change {
	c := agentmarket.Change{Actor: actor, Action: action, ObjectType: "listing", ObjectID: l.ID, OrgID: l.SellerOrgID, After: recordOf(l)}
	if before != nil {
		c.Before = before
	}
	return c
}

// planChange is the audit record of a new plan version of listing l.
func planChange(actor agentmarket.Actor, action string, before *Plan, after Plan, listingID, sellerOrgID string) agentmarket.Change {
	c := agentmarket.Change{Actor: actor, Action: action, ObjectType: "plan", ObjectID: PlanObjectID(listingID, after.Version), OrgID: sellerOrgID, After: after}
	if before != nil {
		c.Before = *before
	}
	return c
}

// statusAction names a change of a listing's status for the audit log:
// an operator's review of another org's listing, or the seller's own.
func statusAction(actor agentmarket.Actor, owner bool, from, to Status) string {
	if from == to {
		return "listing.update"
	}
	if actor.Operator && !owner {
		switch to {
		case StatusPublished:
			return "listing.approve"
		case StatusSuspended:
			return "listing.suspend"
		case StatusDraft:
			return "listing.reject"
		case StatusRetired:
			return "listing.retire"
		}
	}
	return "listing.status"
}

// offerChange is the audit record of a change of offer o.
func offerChange(actor agentmarket.Actor, action string, before, after *Offer) agentmarket.Change {
	c := agentmarket.Change{Actor: actor, Action: action, ObjectType: "offer", ObjectID: after.ID, OrgID: after.SellerOrgID, After: after}
	if before != nil {
		c.Before = before
	}
	return c
}
