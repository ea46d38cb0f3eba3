package web

import (
	"strconv"

	"github.com/agentmarket/agentmarket/metering"
)

// verifiedView is a listing's verified stats as the catalog and the
// listing page show them: measured by the meter, never the seller's.
type verifiedView struct {
	Calls       string
	SuccessRate string // "—" when no task ended nor failed
	P50, P95    string // of message/send; "—" when none
	MedianCost  string // per task; "—" when no task
	Estimated   string // share of calls with estimated tokens
}

// percent writes part/whole as a percentage with one decimal, rounded
// half up for display ("98.5 %").
func percent(part, whole int64) string {
	tenths := (part*2000 + whole) / (2 * whole)
	return strconv.FormatInt(tenths/10, 10) + "." + strconv.FormatInt(tenths%10, 10) + " %"
}

func verifiedOf(s metering.ListingStats) *verifiedView {
	v := &verifiedView{Calls: formatCount(s.Calls), SuccessRate: "—", P50: "—", P95: "—", MedianCost: "—", Estimated: "0.0 %"}
	if n := s.Completed + s.Failed; n > 0 {
		v.SuccessRate = percent(s.Completed, n)
	}
	if s.Sends > 0 {
		v.P50, v.P95 = formatDuration(s.LatencyP50Ms), formatDuration(s.LatencyP95Ms)
	}
	if s.Tasks > 0 {
		v.MedianCost = formatMicros(s.MedianTaskCostMicros, s.Currency)
	}
	if s.Calls > 0 {
		v.Estimated = percent(s.EstimatedCalls, s.Calls)
	}
	return v
}

// verified is the listing's verified stats, nil when it has none (too few
// tasks or buyer orgs) or they cannot be read now (the page shows without them).
func (u *UI) verified(r *req, listingID string) *verifiedView {
	if u.d.Verified == nil {
		return nil
	}
	all, err := u.d.Verified.Listings(r.ctx)
	if err != nil {
		u.d.Logger.WarnContext(r.ctx, "verified listing stats unavailable", "err", err)
		return nil
	}
	if s, ok := all[listingID]; ok {
		return verifiedOf(s)
	}
	return nil
}
