package contracts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// AlertAgentDown is the kind of the alert a seller gets when the active
// health checks find every endpoint of one of its listings' agents down
// (listings.Checker): recorded beside the spend alerts (its subject the
// listing, no budget) and POSTed to the seller's alert webhook through the
// same outbox, once per down period.
const AlertAgentDown BudgetKind = "agent_down"

// AgentDownBody is what the seller's alert webhook receives.
type AgentDownBody struct {
	Type        string    `json:"type"` // "agent_down"
	ID          string    `json:"id"`
	OrgID       string    `json:"org_id"`
	ListingID   string    `json:"listing_id"`
	ListingName string    `json:"listing_name"`
	Since       time.Time `json:"since"`
	Cause       string    `json:"cause"`
	CreatedAt   time.Time `json:"created_at"`
}

// AgentDown records that the agent of the seller org's listing has not
// answered since since, for cause, and enqueues its webhook delivery; the
// same listing and since (one down period) make one alert however often
// it is called. It reports whether it recorded it.
func (s *Alerts) AgentDown(ctx context.Context, orgID, listingID, listingName string, since time.Time, cause string) (bool, error) {
	now := s.Clock.Now().UTC()
	h := sha256.Sum256([]byte(fmt.Sprintf("%s|%s|%d", AlertAgentDown, listingID, since.UnixNano())))
	a := &Alert{ID: "alr_" + hex.EncodeToString(h[:12]), OrgID: orgID, Kind: AlertAgentDown, Subject: listingID,
		PeriodStart: time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC), CreatedAt: now}
	body, err := json.Marshal(AgentDownBody{Type: string(AlertAgentDown), ID: a.ID, OrgID: orgID, ListingID: listingID, ListingName: listingName,
		Since: since.UTC(), Cause: cause, CreatedAt: now})
	if err != nil {
		return false, err
	}
	d, err := s.webhookDelivery(ctx, a, body)
	if err != nil {
		return false, err
	}
	return s.Store.RecordAlert(ctx, a, d)
}
