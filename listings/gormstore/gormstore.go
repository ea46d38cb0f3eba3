// Package gormstore keeps listings in SQL through GORM: PostgreSQL in
// production, SQLite in the embedded default. The schema is created by the
// versioned files in migrations/, never by GORM. Rows map to domain types
// explicitly in this file.
package gormstore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/agentcard"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

// Store implements listings.Store.
type Store struct {
	db    *gorm.DB
	known knownTerms
}

var _ listings.Store = (*Store)(nil)

// New returns a store over db, whose schema the migrations have created.
func New(db *gorm.DB) *Store { return &Store{db: db} }

type listingRow struct {
	ID                string `gorm:"primaryKey"`
	SellerOrgID       string
	Status            string
	Health            string
	HealthDetail      string
	Name              string
	Description       string
	CardURL           string `gorm:"column:card_url"`
	CardJSON          string `gorm:"column:card_json"`
	CardHash          string
	CardEtag          string
	CardFetchedAt     time.Time
	ProtocolVersions  string
	Streaming         bool
	PushNotifications bool
	SearchText        string
	PlanVersion       int
	Currency          string
	MonthlyFeeMicros  int64
	UpstreamAuth      string
	RefreshSeconds    int
	Limits            string
	AgentEndpoints    string
	NextRefreshAt     *time.Time
	Incident          string
	IncidentAt        *time.Time
	LostTasks         int64
	LostTaskAt        *time.Time
	CardSignature     string
	CardKeys          string
	SignaturePolicy   string
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

func (listingRow) TableName() string { return "listings" }

type cardVersionRow struct {
	ID        int64 `gorm:"primaryKey;autoIncrement"`
	ListingID string
	CardHash  string
	CardJSON  string `gorm:"column:card_json"`
	SourceURL string `gorm:"column:source_url"`
	FetchedAt time.Time
	Signature string
}

func (cardVersionRow) TableName() string { return "listing_card_versions" }

type planRow struct {
	ListingID                    string `gorm:"primaryKey"`
	Version                      int    `gorm:"primaryKey"`
	Currency                     string
	MonthlyFeeMicros             int64
	InputTokensPerMillionMicros  int64
	OutputTokensPerMillionMicros int64
	ComputePerHourMicros         int64
	PerTaskMicros                int64
	IncludedInputTokens          int64
	IncludedOutputTokens         int64
	IncludedComputeMs            int64
	IncludedTasks                int64
	TrialDays                    int64
	TrialTokens                  int64
	TrialCapMicros               int64
	MinCommitMicros              int64
	MaxCallInputTokens           int64
	MaxCallOutputTokens          int64
	MaxCallComputeMs             int64
	BuyerOrgID                   string
	CreatedAt                    time.Time
}

func (planRow) TableName() string { return "listing_plans" }

type skillRow struct {
	ListingID string `gorm:"primaryKey"`
	Position  int    `gorm:"primaryKey"`
	SkillID   string
	Name      string
}

func (skillRow) TableName() string { return "listing_skills" }

type tagRow struct {
	ListingID string `gorm:"primaryKey"`
	Tag       string `gorm:"primaryKey"`
}

func (tagRow) TableName() string { return "listing_tags" }

type modeRow struct {
	ListingID string `gorm:"primaryKey"`
	Direction string `gorm:"primaryKey"`
	MediaType string `gorm:"primaryKey"`
}

func (modeRow) TableName() string { return "listing_modes" }

func toRow(l *listings.Listing) *listingRow {
	r := &listingRow{
		ID:               l.ID,
		SellerOrgID:      l.SellerOrgID,
		Status:           string(l.Status),
		Health:           string(l.Health),
		HealthDetail:     l.HealthDetail,
		CardURL:          l.CardURL,
		CardJSON:         string(l.CardJSON),
		CardHash:         l.CardHash,
		CardEtag:         l.CardETag,
		CardFetchedAt:    l.CardFetchedAt.UTC(),
		SearchText:       searchText(l),
		PlanVersion:      l.Plan.Version,
		Currency:         l.Plan.Currency,
		MonthlyFeeMicros: l.Plan.MonthlyFeeMicros,
		UpstreamAuth:     encodeSealed(l.UpstreamAuth),
		RefreshSeconds:   int(l.RefreshInterval / time.Second),
		Limits:           encodeLimits(l.Limits),
		AgentEndpoints:   encodeEndpoints(l.AgentEndpoints),
		CardSignature:    encodeSignature(l.CardSignature),
		CardKeys:         string(l.CardKeys),
		SignaturePolicy:  string(l.SignaturePolicy),
		CreatedAt:        l.CreatedAt.UTC(),
		UpdatedAt:        l.UpdatedAt.UTC(),
	}
	if l.Card != nil {
		r.Name = l.Card.Name
		r.Description = l.Card.Description
		r.ProtocolVersions = strings.Join(l.Card.ProtocolVersions, ",")
		r.Streaming = l.Card.Capabilities.Streaming
		r.PushNotifications = l.Card.Capabilities.PushNotifications
	}
	if !l.NextRefreshAt.IsZero() {
		t := l.NextRefreshAt.UTC()
		r.NextRefreshAt = &t
	}
	return r
}

func fromRow(r *listingRow, p *planRow) *listings.Listing {
	l := &listings.Listing{
		ID:              r.ID,
		SellerOrgID:     r.SellerOrgID,
		Status:          listings.Status(r.Status),
		Health:          listings.Health(r.Health),
		HealthDetail:    r.HealthDetail,
		CardURL:         r.CardURL,
		CardJSON:        []byte(r.CardJSON),
		CardHash:        r.CardHash,
		CardETag:        r.CardEtag,
		CardFetchedAt:   r.CardFetchedAt.UTC(),
		UpstreamAuth:    decodeSealed(r.UpstreamAuth),
		RefreshInterval: time.Duration(r.RefreshSeconds) * time.Second,
		Limits:          decodeLimits(r.Limits),
		AgentEndpoints:  decodeEndpoints(r.AgentEndpoints),
		CardSignature:   decodeSignature(r.CardSignature),
		SignaturePolicy: listings.SignaturePolicy(r.SignaturePolicy),
		CreatedAt:       r.CreatedAt.UTC(),
		UpdatedAt:       r.UpdatedAt.UTC(),
	}
	if r.CardKeys != "" {
		l.CardKeys = []byte(r.CardKeys)
	}
	if l.SignaturePolicy == "" {
		l.SignaturePolicy = listings.SignaturesMark
	}
	if r.NextRefreshAt != nil {
		l.NextRefreshAt = r.NextRefreshAt.UTC()
	}
	if r.IncidentAt != nil {
		l.Incident = &listings.Incident{At: r.IncidentAt.UTC(), Detail: r.Incident}
	}
	if r.LostTaskAt != nil {
		l.LostTasks = &listings.LostTasks{Count: r.LostTasks, LastAt: r.LostTaskAt.UTC()}
	}
	// The card was valid when stored; parse errors here would mean a
	// corrupted row, which the API then shows as a listing without a card.
	if c, err := agentcard.Parse(l.CardJSON); err == nil {
		l.Card = c
	}
	if p != nil {
		l.Plan = planFromRow(p)
	}
	return l
}

func planToRow(listingID string, p listings.Plan) *planRow {
	return &planRow{
		ListingID:                    listingID,
		Version:                      p.Version,
		Currency:                     p.Currency,
		MonthlyFeeMicros:             p.MonthlyFeeMicros,
		InputTokensPerMillionMicros:  p.InputTokensPerMillionMicros,
		OutputTokensPerMillionMicros: p.OutputTokensPerMillionMicros,
		ComputePerHourMicros:         p.ComputePerHourMicros,
		PerTaskMicros:                p.PerTaskMicros,
		IncludedInputTokens:          p.IncludedInputTokens,
		IncludedOutputTokens:         p.IncludedOutputTokens,
		IncludedComputeMs:            p.IncludedComputeMs,
		IncludedTasks:                p.IncludedTasks,
		TrialDays:                    p.TrialDays,
		TrialTokens:                  p.TrialTokens,
		TrialCapMicros:               p.TrialCapMicros,
		MinCommitMicros:              p.MinCommitMicros,
		MaxCallInputTokens:           p.MaxCallInputTokens,
		MaxCallOutputTokens:          p.MaxCallOutputTokens,
		MaxCallComputeMs:             p.MaxCallComputeMs,
		BuyerOrgID:                   p.BuyerOrgID,
		CreatedAt:                    p.CreatedAt.UTC(),
	}
}

func planFromRow(r *planRow) listings.Plan {
	return listings.Plan{
		Version:                      r.Version,
		Currency:                     r.Currency,
		MonthlyFeeMicros:             r.MonthlyFeeMicros,
		InputTokensPerMillionMicros:  r.InputTokensPerMillionMicros,
		OutputTokensPerMillionMicros: r.OutputTokensPerMillionMicros,
		ComputePerHourMicros:         r.ComputePerHourMicros,
		PerTaskMicros:                r.PerTaskMicros,
		IncludedInputTokens:          r.IncludedInputTokens,
		IncludedOutputTokens:         r.IncludedOutputTokens,
		IncludedComputeMs:            r.IncludedComputeMs,
		IncludedTasks:                r.IncludedTasks,
		TrialDays:                    r.TrialDays,
		TrialTokens:                  r.TrialTokens,
		TrialCapMicros:               r.TrialCapMicros,
		MinCommitMicros:              r.MinCommitMicros,
		MaxCallInputTokens:           r.MaxCallInputTokens,
		MaxCallOutputTokens:          r.MaxCallOutputTokens,
		MaxCallComputeMs:             r.MaxCallComputeMs,
		BuyerOrgID:                   r.BuyerOrgID,
		CreatedAt:                    r.CreatedAt.UTC(),
	}
}

// searchText fills the listings.search_text column, which searches no
// longer read (see listing_search): the words of the listing's text.
func searchText(l *listings.Listing) string {
	d := l.SearchDoc()
	return strings.Join(slices.Concat(d.Name, d.Skills, d.Description), " ")
}

// CreateListing implements listings.Store.
func (s *Store) CreateListing(ctx context.Context, l *listings.Listing, v *listings.CardVersion) error {
	return s.CreateListings(ctx, []*listings.Listing{l}, []*listings.CardVersion{v})
}

// CreateListings is CreateListing of many listings in one transaction
// (v[i] is l[i]'s first card version): what seeding and imports use, since
// a transaction per listing costs a commit per listing.
func (s *Store) CreateListings(ctx context.Context, ls []*listings.Listing, vs []*listings.CardVersion) error {
	if len(ls) != len(vs) {
		return fmt.Errorf("gormstore: %d listings with %d card versions", len(ls), len(vs))
	}
	var terms []string
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for i, l := range ls {
			if err := tx.Create(toRow(l)).Error; err != nil {
				return err
			}
			if err := tx.Create(planToRow(l.ID, l.Plan)).Error; err != nil {
				return err
			}
			if err := addVersion(tx, vs[i]); err != nil {
				return err
			}
			if err := reindex(tx, l); err != nil {
				return err
			}
			words, err := s.index(tx, l)
			if err != nil {
				return err
			}
			terms = append(terms, words...)
		}
		var err error
		terms, err = s.writeVariants(tx, terms)
		return err
	})
	if err == nil {
		s.known.add(terms)
	}
	return relational.Translate(err, "listing")
}

// UpdateListing implements listings.Store.
func (s *Store) UpdateListing(ctx context.Context, l *listings.Listing, v *listings.CardVersion) error {
	var terms []string
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) (err error) {
		res := tx.Model(&listingRow{ID: l.ID}).Select("*").Omit("id", "created_at", "seller_org_id", "incident", "incident_at", "lost_tasks", "lost_task_at").Updates(toRow(l))
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return gorm.ErrRecordNotFound
		}
		// Plan versions are immutable: an existing (listing, version) is left
		// exactly as it was first written. A private offer's version never
		// becomes the listing's (a race with the offer took it).
		if err := privateVersion(tx, l.ID, l.Plan.Version); err != nil {
			return err
		}
		if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(planToRow(l.ID, l.Plan)).Error; err != nil {
			return err
		}
		if v != nil {
			if err := addVersion(tx, v); err != nil {
				return err
			}
			if err := reindex(tx, l); err != nil {
				return err
			}
		}
		// Status, plan and card all show in search: the search row is
		// rewritten on every update.
		words, err := s.index(tx, l)
		if err != nil {
			return err
		}
		terms, err = s.writeVariants(tx, words)
		return err
	})
	if err == nil {
		s.known.add(terms)
	}
	return relational.Translate(err, "listing")
}

// SetIncident records or clears a listing's incident.
func (s *Store) SetIncident(ctx context.Context, listingID string, inc *listings.Incident) error {
	cols := map[string]any{"incident": "", "incident_at": nil}
	if inc != nil {
		cols = map[string]any{"incident": inc.Detail, "incident_at": inc.At.UTC()}
	}
	res := s.db.WithContext(ctx).Model(&listingRow{}).Where("id = ?", listingID).Updates(cols)
	if res.Error == nil && res.RowsAffected == 0 {
		return relational.Translate(gorm.ErrRecordNotFound, "listing")
	}
	return relational.Translate(res.Error, "listing")
}

// CountLostTask implements listings.Store.
func (s *Store) CountLostTask(ctx context.Context, listingID string, at time.Time) error {
	res := s.db.WithContext(ctx).Model(&listingRow{}).Where("id = ?", listingID).
		Updates(map[string]any{"lost_tasks": gorm.Expr("lost_tasks + 1"), "lost_task_at": at.UTC()})
	if res.Error == nil && res.RowsAffected == 0 {
		return relational.Translate(gorm.ErrRecordNotFound, "listing")
	}
	return relational.Translate(res.Error, "listing")
}

func addVersion(tx *gorm.DB, v *listings.CardVersion) error {
	if v == nil {
		return nil
	}
	row := &cardVersionRow{ListingID: v.ListingID, CardHash: v.CardHash, CardJSON: string(v.CardJSON), SourceURL: v.SourceURL, FetchedAt: v.FetchedAt.UTC(),
		Signature: encodeSignature(v.Signature)}
	if err := tx.Create(row).Error; err != nil {
		return err
	}
	v.ID = row.ID
	return nil
}

// reindex rewrites the search rows of a listing from its card.
func reindex(tx *gorm.DB, l *listings.Listing) error {
	for _, m := range []any{&skillRow{}, &tagRow{}, &modeRow{}} {
		if err := tx.Where("listing_id = ?", l.ID).Delete(m).Error; err != nil {
			return err
		}
	}
	if l.Card == nil {
		return nil
	}
	var skills []skillRow
	for i, sk := range l.Card.Skills {
		skills = append(skills, skillRow{ListingID: l.ID, Position: i, SkillID: sk.ID, Name: sk.Name})
	}
	var tags []tagRow
	for _, t := range distinctLower(l.Card.Tags()) {
		tags = append(tags, tagRow{ListingID: l.ID, Tag: t})
	}
	var modes []modeRow
	for _, m := range distinctLower(l.Card.InputModes()) {
		modes = append(modes, modeRow{ListingID: l.ID, Direction: "in", MediaType: m})
	}
	for _, m := range distinctLower(l.Card.OutputModes()) {
		modes = append(modes, modeRow{ListingID: l.ID, Direction: "out", MediaType: m})
	}
	if len(skills) > 0 {
		if err := tx.Create(&skills).Error; err != nil {
			return err
		}
	}
	if len(tags) > 0 {
		if err := tx.Create(&tags).Error; err != nil {
			return err
		}
	}
	if len(modes) > 0 {
		if err := tx.Create(&modes).Error; err != nil {
			return err
		}
	}
	return nil
}

func distinctLower(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		s = strings.ToLower(strings.TrimSpace(s))
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// GetListing implements listings.Store.
func (s *Store) GetListing(ctx context.Context, id string) (*listings.Listing, error) {
	var r listingRow
	if err := s.db.WithContext(ctx).Where("id = ?", id).Take(&r).Error; err != nil {
		return nil, relational.Translate(err, "listing")
	}
	var p planRow
	if err := s.db.WithContext(ctx).Where("listing_id = ? AND version = ?", r.ID, r.PlanVersion).Take(&p).Error; err != nil {
		return nil, relational.Translate(err, "plan")
	}
	l := fromRow(&r, &p)
	eps, err := s.endpointsOf(ctx, []string{l.ID})
	if err != nil {
		return nil, err
	}
	l.Endpoints = eps[l.ID]
	return l, nil
}

// CardVersions implements listings.Store.
func (s *Store) CardVersions(ctx context.Context, listingID string) ([]listings.CardVersion, error) {
	var rows []cardVersionRow
	if err := s.db.WithContext(ctx).Where("listing_id = ?", listingID).Order("id DESC").Find(&rows).Error; err != nil {
		return nil, relational.Translate(err, "card version")
	}
	out := make([]listings.CardVersion, len(rows))
	for i, r := range rows {
		out[i] = listings.CardVersion{ID: r.ID, ListingID: r.ListingID, CardHash: r.CardHash, CardJSON: []byte(r.CardJSON), SourceURL: r.SourceURL, FetchedAt: r.FetchedAt.UTC(),
			Signature: decodeSignature(r.Signature)}
	}
	return out, nil
}

// Plan implements listings.Store.
func (s *Store) Plan(ctx context.Context, listingID string, version int) (*listings.Plan, error) {
	var p planRow
	if err := s.db.WithContext(ctx).Where("listing_id = ? AND version = ?", listingID, version).Take(&p).Error; err != nil {
		return nil, relational.Translate(err, "plan")
	}
	pl := planFromRow(&p)
	return &pl, nil
}

func (s *Store) withPlans(ctx context.Context, rows []listingRow) ([]*listings.Listing, error) {
	if len(rows) == 0 {
		return []*listings.Listing{}, nil
	}
	var conds []string
	var args []any
	for _, r := range rows {
		conds = append(conds, "(listing_id = ? AND version = ?)")
		args = append(args, r.ID, r.PlanVersion)
	}
	var plans []planRow
	if err := s.db.WithContext(ctx).Where(strings.Join(conds, " OR "), args...).Find(&plans).Error; err != nil {
		return nil, relational.Translate(err, "plan")
	}
	byID := map[string]*planRow{}
	for i := range plans {
		byID[plans[i].ListingID] = &plans[i]
	}
	ids := make([]string, len(rows))
	for i := range rows {
		ids[i] = rows[i].ID
	}
	eps, err := s.endpointsOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]*listings.Listing, len(rows))
	for i := range rows {
		out[i] = fromRow(&rows[i], byID[rows[i].ID])
		out[i].Endpoints = eps[rows[i].ID]
	}
	return out, nil
}

// DueForRefresh implements listings.Store.
func (s *Store) DueForRefresh(ctx context.Context, now time.Time, limit int) ([]*listings.Listing, error) {
	var rows []listingRow
	err := s.db.WithContext(ctx).
		Where("next_refresh_at IS NOT NULL AND next_refresh_at <= ? AND status <> ?", now.UTC(), string(listings.StatusRetired)).
		Order("next_refresh_at ASC, id ASC").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, relational.Translate(err, "listing")
	}
	return s.withPlans(ctx, rows)
}

// Sealed credentials are binary; the column is text on every database.
func encodeSealed(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return base64.StdEncoding.EncodeToString(b)
}

func decodeSealed(s string) []byte {
	if s == "" {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil
	}
	return b
}

type limitsRow struct {
	RequestTimeoutMs    int64 `json:"request_timeout_ms,omitempty"`
	StreamIdleTimeoutMs int64 `json:"stream_idle_timeout_ms,omitempty"`
	MaxRequestBytes     int   `json:"max_request_bytes,omitempty"`
	MaxResultBytes      int   `json:"max_result_bytes,omitempty"`
	TaskTimeoutMs       int64 `json:"task_timeout_ms,omitempty"`
	MaxPauseMs          int64 `json:"max_pause_ms,omitempty"`
	IdempotencyWindowMs int64 `json:"idempotency_window_ms,omitempty"`
	StallAfterMs        int64 `json:"stall_after_ms,omitempty"`
	// The listing's rate limits (issue 25), omitted when none.
	Rate *agentmarket.RateLimits `json:"rate,omitempty"`
}

func encodeLimits(l listings.Limits) string {
	if l == (listings.Limits{}) {
		return ""
	}
	row := limitsRow{l.RequestTimeout.Milliseconds(), l.StreamIdleTimeout.Milliseconds(), l.MaxRequestBytes, l.MaxResultBytes,
		l.TaskTimeout.Milliseconds(), l.MaxPause.Milliseconds(), l.IdempotencyWindow.Milliseconds(), l.StallAfter.Milliseconds(), nil}
	if !l.Rate.IsZero() {
		row.Rate = &l.Rate
	}
	b, _ := json.Marshal(row)
	return string(b)
}

func decodeLimits(s string) listings.Limits {
	var r limitsRow
	if s == "" || json.Unmarshal([]byte(s), &r) != nil {
		return listings.Limits{}
	}
	l := listings.Limits{RequestTimeout: time.Duration(r.RequestTimeoutMs) * time.Millisecond,
		StreamIdleTimeout: time.Duration(r.StreamIdleTimeoutMs) * time.Millisecond, MaxRequestBytes: r.MaxRequestBytes, MaxResultBytes: r.MaxResultBytes,
		TaskTimeout: time.Duration(r.TaskTimeoutMs) * time.Millisecond, MaxPause: time.Duration(r.MaxPauseMs) * time.Millisecond,
		IdempotencyWindow: time.Duration(r.IdempotencyWindowMs) * time.Millisecond, StallAfter: time.Duration(r.StallAfterMs) * time.Millisecond}
	if r.Rate != nil {
		l.Rate = *r.Rate
	}
	return l
}

// endpointRow is an agent endpoint as the agent_endpoints column holds it
// (a JSON array; "" when the seller set none).
type endpointRow struct {
	URL             string `json:"url"`
	Binding         string `json:"binding"`
	ProtocolVersion string `json:"protocol_version"`
	Weight          int    `json:"weight"`
}

func encodeEndpoints(es []listings.AgentEndpoint) string {
	if len(es) == 0 {
		return ""
	}
	rs := make([]endpointRow, len(es))
	for i, e := range es {
		rs[i] = endpointRow(e)
	}
	b, _ := json.Marshal(rs)
	return string(b)
}

func decodeEndpoints(s string) []listings.AgentEndpoint {
	var rs []endpointRow
	if s == "" || json.Unmarshal([]byte(s), &rs) != nil || len(rs) == 0 {
		return nil
	}
	es := make([]listings.AgentEndpoint, len(rs))
	for i, r := range rs {
		es[i] = listings.AgentEndpoint(r)
	}
	return es
}

// encodeSignature is a card's signature result as its column holds it
// (JSON); decodeSignature reads it back, "unsigned" for rows from before.
func encodeSignature(sig listings.CardSignature) string {
	if sig.Status == "" {
		return ""
	}
	sig.CheckedAt = sig.CheckedAt.UTC()
	b, _ := json.Marshal(sig)
	return string(b)
}

func decodeSignature(s string) listings.CardSignature {
	var sig listings.CardSignature
	if s != "" && json.Unmarshal([]byte(s), &sig) == nil && sig.Status != "" {
		return sig
	}
	return listings.CardSignature{Status: listings.SignatureNone}
}
