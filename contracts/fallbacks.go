package contracts

import (
	"context"
	"slices"
	"strconv"

	"github.com/agentmarket/agentmarket"
)

// Fallback agents (issue 26, item 4). A buyer names, per subscription, the
// listings the meter may send a new task to, in order, when the
// subscription's own agent cannot take it (every endpoint ejected, or the
// agent refused before it accepted anything: a2aproxy/fallback.go). Each
// fallback is a listing the buyer's org subscribes to as well: the call is
// admitted, billed and limited under that subscription, as if the buyer had
// called it. Fallbacks are one hop: a fallback's own fallbacks are never
// followed, so two subscriptions may name each other without a loop.

// MaxFallbacks is how many fallbacks a subscription may name.
const MaxFallbacks = 5

// SetFallbacks replaces a subscription's fallback listings (empty: none).
// A listing the org does not subscribe to, the subscription's own listing
// and a listing named twice are refused, each on its field.
func (s *Subscriptions) SetFallbacks(ctx context.Context, actor agentmarket.Actor, id string, listingIDs []string) (*Contract, error) {
	before, err := s.Get(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	var fe agentmarket.Fields
	if len(listingIDs) > MaxFallbacks {
		fe.Add("listing_ids", "max", "a subscription names at most %d fallbacks", MaxFallbacks)
	}
	for i, l := range listingIDs {
		field := "listing_ids[" + strconv.Itoa(i) + "]"
		switch {
		case l == "":
			fe.Add(field, "required", "%s must name a listing", field)
		case l == before.ListingID:
			fe.Add(field, "self", "%s is this subscription's own listing; a fallback is another agent", field)
		case slices.Contains(listingIDs[:i], l):
			fe.Add(field, "duplicate", "%s names listing %q a second time", field, l)
		default:
			if _, err := s.Store.OpenContract(ctx, actor.OrgID, l); err != nil {
				if agentmarket.KindOf(err) != agentmarket.NotFound {
					return nil, err
				}
				fe.Add(field, "not_subscribed", "your organisation does not subscribe to listing %q; subscribe to it first", l)
			}
		}
	}
	if err := fe.Err("invalid_fallbacks", "the fallbacks are not valid"); err != nil {
		return nil, err
	}
	if len(listingIDs) == 0 {
		listingIDs = nil
	}
	after, err := s.Changes.SetContractFallbacks(ctx, id, listingIDs, s.Clock.Now())
	return s.recordContract(ctx, actor, "subscription.fallbacks", before, after, err)
}

// FallbackCandidate is a listing a subscription may fall back to: another
// open subscription of the same org.
type FallbackCandidate struct {
	SubscriptionID string   `json:"subscription_id"`
	ListingID      string   `json:"listing_id"`
	Name           string   `json:"name"`
	SharedTags     []string `json:"shared_skill_tags"` // with the subscription's listing: the hint
	Position       int      `json:"position"`          // 1-based among the chosen; 0: not chosen
}

// FallbackCandidates lists the listings the subscription may fall back to:
// first those sharing a skill tag with its own listing (the hint), then the
// others, each group in the order the org subscribed.
func (s *Subscriptions) FallbackCandidates(ctx context.Context, actor agentmarket.Actor, id string) ([]FallbackCandidate, error) {
	c, err := s.Get(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	// A listing that left the catalog (suspended, retired) shares no tag
	// the org can see: its candidates are listed without the hint.
	own, err := s.Listings.ListingTerms(ctx, actor, c.ListingID)
	if err != nil && agentmarket.KindOf(err) != agentmarket.NotFound {
		return nil, err
	}
	if own == nil {
		own = &ListingTerms{}
	}
	all, err := s.Store.ListContracts(ctx, actor.OrgID)
	if err != nil {
		return nil, err
	}
	var out []FallbackCandidate
	for _, o := range all {
		if o.ID == c.ID || o.ListingID == c.ListingID || o.Status == ContractCanceled {
			continue
		}
		fc := FallbackCandidate{SubscriptionID: o.ID, ListingID: o.ListingID, Name: o.ListingID,
			Position: slices.Index(c.Fallbacks, o.ListingID) + 1}
		t, err := s.Listings.ListingTerms(ctx, actor, o.ListingID)
		switch {
		case agentmarket.KindOf(err) == agentmarket.NotFound:
			continue // left the catalog: it takes no call, so it is no fallback
		case err != nil:
			return nil, err
		}
		if t.Name != "" {
			fc.Name = t.Name
		}
		for _, tag := range t.SkillTags {
			if slices.Contains(own.SkillTags, tag) {
				fc.SharedTags = append(fc.SharedTags, tag)
			}
		}
		out = append(out, fc)
	}
	slices.SortStableFunc(out, func(a, b FallbackCandidate) int {
		return boolRank(len(b.SharedTags) > 0) - boolRank(len(a.SharedTags) > 0)
	})
	return out, nil
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}
