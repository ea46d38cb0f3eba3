package listings

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/textproto"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings/agentcard"
)

// Limits and defaults of the catalog.
const (
	MaxCardBytes           = 64 << 10
	DefaultRefreshInterval = time.Hour
	MinRefreshInterval     = time.Minute
)

// Service holds the catalog's rules. Authorization of the role (may this
// role create listings at all?) happens at the transport through casbin;
// the service checks ownership (is this the seller's own listing?).
type Service struct {
	Store   Store
	Fetcher CardFetcher
	// Endpoints judges the agent endpoints of every card taken (pasted,
	// fetched, refreshed); required: without it no card is taken.
	Endpoints EndpointGuard
	Sealer    Sealer
	Clock     agentmarket.Clock
	// AutoApprove publishes new listings at once instead of waiting for an
	// operator (on in the embedded default).
	AutoApprove bool
	// DefaultRefresh is the refresh interval of listings that set none
	// (DefaultRefreshInterval in the shipped configuration); 0 disables it.
	DefaultRefresh time.Duration
	// Verifier checks the signatures of every card taken; nil records
	// every card as unsigned.
	Verifier CardVerifier
	// Audit records every change made by hand (nil: none is).
	Audit agentmarket.ChangeRecorder
}

// CreateInput is what a seller sends to list an agent: a card URL or a
// pasted card, a price plan, and optionally the upstream credentials.
type CreateInput struct {
	CardURL        string          `json:"card_url"`
	Card           json.RawMessage `json:"card"`
	Pricing        json.RawMessage `json:"pricing"`
	UpstreamAuth   *UpstreamAuth   `json:"upstream_auth"`
	RefreshSeconds *int            `json:"refresh_seconds"`
	Limits         *LimitsInput    `json:"limits"`
	Draft          bool            `json:"draft"`
	// CardKeys is a JWKS to verify the card's signatures with;
	// CardSignatures the policy for a card whose signatures fail.
	CardKeys       json.RawMessage  `json:"card_keys"`
	CardSignatures *SignaturePolicy `json:"card_signatures"`
}

// UpdateInput changes a listing; nil fields stay as they are. A new
// card_url or pasted card replaces the card in force (a new version).
type UpdateInput struct {
	CardURL        *string         `json:"card_url"`
	Card           json.RawMessage `json:"card"`
	Pricing        json.RawMessage `json:"pricing"`
	UpstreamAuth   *UpstreamAuth   `json:"upstream_auth"`
	RefreshSeconds *int            `json:"refresh_seconds"`
	Limits         *LimitsInput    `json:"limits"`
	Status         *Status         `json:"status"`
	// CardKeys replaces the registered JWKS (null or {} removes it).
	CardKeys       json.RawMessage  `json:"card_keys"`
	CardSignatures *SignaturePolicy `json:"card_signatures"`
	// Endpoints replaces the agent endpoints the meter balances over
	// (routing.go); [] removes them.
	Endpoints *[]AgentEndpointInput `json:"endpoints"`
}

func (s *Service) now() time.Time { return s.Clock.Now() }

// validateRefresh checks a refresh interval in seconds: 0 disables it,
// otherwise at least MinRefreshInterval.
func validateRefresh(fe *agentmarket.Fields, secs *int) {
	if secs == nil {
		return
	}
	if *secs < 0 || (*secs > 0 && time.Duration(*secs)*time.Second < MinRefreshInterval) {
		fe.Add("refresh_seconds", "range", "refresh_seconds must be 0 (never) or at least %d", int(MinRefreshInterval/time.Second))
	}
}

// Lengths of what sellers type in beside the card, in characters
// (agentmarket.Fields.Text).
const (
	MaxCardURL           = 2048
	MaxUpstreamHeader    = 256
	MaxUpstreamAuthValue = 8192
)

func validateCardURL(fe *agentmarket.Fields, u string) {
	fe.Text("card_url", u, MaxCardURL)
}

func validateUpstreamAuth(fe *agentmarket.Fields, a *UpstreamAuth) {
	if a == nil {
		return
	}
	if fe.Text("upstream_auth.header", a.Header, MaxUpstreamHeader) &&
		(a.Header == "" || textproto.CanonicalMIMEHeaderKey(a.Header) == "" || strings.ContainsAny(a.Header, " :")) {
		fe.Add("upstream_auth.header", "format", "upstream_auth.header must be an HTTP header name, like \"Authorization\"")
	}
	if fe.Text("upstream_auth.value", a.Value, MaxUpstreamAuthValue) && a.Value == "" {
		fe.Add("upstream_auth.value", "format", "upstream_auth.value must be a non-empty single-line header value")
	}
}

// Create lists an agent for the actor's org.
func (s *Service) Create(ctx context.Context, actor agentmarket.Actor, in CreateInput) (*Listing, error) {
	var fe agentmarket.Fields
	hasCard := len(bytes.TrimSpace(in.Card)) > 0 && !bytes.Equal(bytes.TrimSpace(in.Card), []byte("null"))
	switch {
	case in.CardURL == "" && !hasCard:
		fe.Add("card_url", "required", "give either card_url (the card's URL or the agent's base URL) or card (the card itself)")
	case in.CardURL != "" && hasCard:
		fe.Add("card", "exclusive", "give card_url or card, not both")
	}
	plan, err := ParsePricing(in.Pricing)
	if err != nil {
		var ae *agentmarket.Error
		errors.As(err, &ae)
		fe = append(fe, ae.Fields...)
	}
	validateCardURL(&fe, in.CardURL)
	validateUpstreamAuth(&fe, in.UpstreamAuth)
	validateRefresh(&fe, in.RefreshSeconds)
	limits, err := ParseLimits(in.Limits)
	fe = appendFields(fe, err)
	keys := cardKeys(in.CardKeys)
	validateSigning(&fe, s.Verifier, in.CardSignatures, keys)
	if err := fe.Err("invalid_listing", "the listing is not valid"); err != nil {
		return nil, err
	}
	policy := SignaturesMark
	if in.CardSignatures != nil {
		policy = *in.CardSignatures
	}

	now := s.now()
	raw, card, fetched, err := s.readCard(ctx, in.CardURL, in.Card, "")
	if err != nil {
		return nil, err
	}
	sig, err := s.checkSignature(ctx, raw, fetched.source(), keys, policy)
	if err != nil {
		return nil, err
	}
	l := &Listing{
		ID:            agentmarket.NewID("lst"),
		SellerOrgID:   actor.OrgID,
		Status:        StatusPendingReview,
		Health:        HealthHealthy,
		CardURL:       in.CardURL,
		Card:          card,
		CardJSON:      raw,
		CardHash:      Hash(raw),
		CardFetchedAt: now,
		CardSignature: sig,
		CardKeys:      keys,
		Limits:        limits,
		CreatedAt:     now,
		UpdatedAt:     now,
	}
	l.SignaturePolicy = policy
	if fetched != nil {
		l.CardURL = fetched.URL
		l.CardETag = fetched.ETag
	}
	switch {
	case in.Draft:
		l.Status = StatusDraft
	case s.AutoApprove:
		l.Status = StatusPublished
	}
	plan.Version = 1
	plan.CreatedAt = now
	l.Plan = plan
	if err := s.setUpstreamAuth(l, in.UpstreamAuth); err != nil {
		return nil, err
	}
	s.setRefresh(l, in.RefreshSeconds, now)
	v := &CardVersion{ListingID: l.ID, CardHash: l.CardHash, CardJSON: raw, SourceURL: l.CardURL, FetchedAt: now, Signature: sig}
	if err := s.Store.CreateListing(ctx, l, v); err != nil {
		return nil, err
	}
	if err := agentmarket.RecordChange(ctx, s.Audit, listingChange(actor, "listing.create", nil, l)); err != nil {
		return nil, err
	}
	return l, agentmarket.RecordChange(ctx, s.Audit, planChange(actor, "plan.create", nil, l.Plan, l.ID, l.SellerOrgID))
}

func (s *Service) setUpstreamAuth(l *Listing, a *UpstreamAuth) error {
	if a == nil {
		return nil
	}
	b, _ := json.Marshal(a)
	sealed, err := s.Sealer.Seal(b, []byte(l.ID))
	if err != nil {
		return agentmarket.Wrap(agentmarket.Internal, "seal_failed", err, "could not store the upstream credentials")
	}
	l.UpstreamAuth = sealed
	return nil
}

// OpenUpstreamAuth decrypts a listing's stored upstream credentials; the
// meter calls it, nothing that answers users does.
func (s *Service) OpenUpstreamAuth(l *Listing) (*UpstreamAuth, error) {
	if !l.HasUpstreamAuth() {
		return nil, nil
	}
	b, err := s.Sealer.Open(l.UpstreamAuth, []byte(l.ID))
	if err != nil {
		return nil, agentmarket.Wrap(agentmarket.Internal, "unseal_failed", err, "could not read the upstream credentials")
	}
	var a UpstreamAuth
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, agentmarket.Wrap(agentmarket.Internal, "unseal_failed", err, "could not read the upstream credentials")
	}
	return &a, nil
}

func (s *Service) setRefresh(l *Listing, secs *int, now time.Time) {
	switch {
	case l.CardURL == "":
		l.RefreshInterval = 0 // a pasted card has nowhere to be refreshed from
	case secs != nil:
		l.RefreshInterval = time.Duration(*secs) * time.Second
	case l.RefreshInterval == 0 && l.CreatedAt.Equal(now):
		l.RefreshInterval = s.DefaultRefresh
	}
	l.NextRefreshAt = time.Time{}
	if l.RefreshInterval > 0 {
		l.NextRefreshAt = now.Add(l.RefreshInterval)
	}
}

// readCard fetches (or takes the pasted) card and parses it. Errors about
// the card name the field they concern, prefixed with "card.".
func (s *Service) readCard(ctx context.Context, cardURL string, pasted json.RawMessage, etag string) ([]byte, *agentcard.Card, *FetchedCard, error) {
	var raw []byte
	var fetched *FetchedCard
	if cardURL != "" {
		f, err := s.Fetcher.FetchCard(ctx, cardURL, etag)
		if err != nil {
			return nil, nil, nil, err
		}
		if f.NotModified {
			return nil, nil, f, nil
		}
		raw, fetched = f.Body, f
	} else {
		raw = []byte(pasted)
		if len(raw) > MaxCardBytes {
			return nil, nil, nil, &agentmarket.Error{Kind: agentmarket.Invalid, Code: "card_too_large",
				Message: fmt.Sprintf("the card is %d bytes; the limit is %d (64 KiB)", len(raw), MaxCardBytes),
				Fields:  []agentmarket.FieldError{{Field: "card", Rule: "max_size", Message: "the card must be at most 64 KiB"}}}
		}
	}
	card, err := agentcard.Parse(raw)
	if err != nil {
		var ae *agentmarket.Error
		if errors.As(err, &ae) {
			prefixed := *ae
			prefixed.Fields = make([]agentmarket.FieldError, len(ae.Fields))
			for i, f := range ae.Fields {
				f.Field = "card." + f.Field
				prefixed.Fields[i] = f
			}
			if len(prefixed.Fields) == 0 {
				prefixed.Fields = []agentmarket.FieldError{{Field: "card", Rule: "json", Message: ae.Message}}
			}
			return nil, nil, nil, &prefixed
		}
		return nil, nil, nil, err
	}
	if err := s.checkEndpoints(ctx, card); err != nil {
		return nil, nil, nil, err
	}
	return raw, card, fetched, nil
}

// cardKeys is a registered JWKS as given: nil for none (absent, null or
// an object without keys).
func cardKeys(b json.RawMessage) []byte {
	t := bytes.TrimSpace(b)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) || bytes.Equal(t, []byte("{}")) {
		return nil
	}
	return t
}

// appendFields adds the field errors of err (an Invalid *agentmarket.Error)
// to fe.
func appendFields(fe agentmarket.Fields, err error) agentmarket.Fields {
	var ae *agentmarket.Error
	if errors.As(err, &ae) {
		fe = append(fe, ae.Fields...)
	}
	return fe
}

// publicDetail is what users may see of a refresh failure: the code and
// message, never the internal cause (addresses, driver text).
func publicDetail(err error) string {
	var ae *agentmarket.Error
	if errors.As(err, &ae) {
		return ae.Code + ": " + ae.Message
	}
	return "card_fetch_failed: the card could not be fetched"
}

// Hash is the hex SHA-256 that identifies a card version.
func Hash(raw []byte) string {
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// visible reports whether actor may see l at all. Others' listings that are
// not published do not exist for them.
func visible(actor agentmarket.Actor, l *Listing) bool {
	return l.Status == StatusPublished || actor.Operator || actor.OrgID == l.SellerOrgID
}

func notFound(id string) error {
	return agentmarket.Errorf(agentmarket.NotFound, "listing_not_found", "no listing %q", id)
}

// Get returns a listing the actor may see.
func (s *Service) Get(ctx context.Context, actor agentmarket.Actor, id string) (*Listing, error) {
	l, err := s.Store.GetListing(ctx, id)
	if err != nil {
		return nil, err
	}
	if !visible(actor, l) {
		return nil, notFound(id)
	}
	return l, nil
}

// Withdrawn names a listing that has left the catalog (suspended or
// retired), with its status, for the pages of an org that has dealings
// with it (a subscription, usage rows): they say what it bought and why
// it is gone, though the listing itself is no longer the org's to see.
// NotFound for any other listing, including one never published.
func (s *Service) Withdrawn(ctx context.Context, id string) (name string, st Status, err error) {
	l, err := s.Store.GetListing(ctx, id)
	if err != nil {
		return "", "", err
	}
	if l.Status != StatusSuspended && l.Status != StatusRetired {
		return "", "", notFound(id)
	}
	name = id
	if l.Card != nil && l.Card.Name != "" {
		name = l.Card.Name
	}
	return name, l.Status, nil
}

// own loads a listing the actor's org sells (operators may act on any).
func (s *Service) own(ctx context.Context, actor agentmarket.Actor, id string) (*Listing, error) {
	l, err := s.Get(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	if l.SellerOrgID != actor.OrgID && !actor.Operator {
		return nil, agentmarket.Errorf(agentmarket.Forbidden, "not_listing_owner", "listing %q belongs to another organisation", id)
	}
	return l, nil
}

// Update changes the price plan, credentials, refresh interval or status.
func (s *Service) Update(ctx context.Context, actor agentmarket.Actor, id string, in UpdateInput) (*Listing, error) {
	l, err := s.own(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	before, beforePlan := recordOf(l), l.Plan
	owner := l.SellerOrgID == actor.OrgID
	var fe agentmarket.Fields
	var plan Plan
	if in.Pricing != nil {
		p, err := ParsePricing(in.Pricing)
		if err != nil {
			var ae *agentmarket.Error
			errors.As(err, &ae)
			fe = append(fe, ae.Fields...)
		}
		plan = p
	}
	if in.CardURL != nil {
		validateCardURL(&fe, *in.CardURL)
	}
	validateUpstreamAuth(&fe, in.UpstreamAuth)
	validateRefresh(&fe, in.RefreshSeconds)
	limits, err := ParseLimits(in.Limits)
	fe = appendFields(fe, err)
	keys := cardKeys(in.CardKeys)
	validateSigning(&fe, s.Verifier, in.CardSignatures, keys)
	var endpoints []AgentEndpoint
	if in.Endpoints != nil && owner {
		if endpoints, err = s.parseEndpoints(ctx, &fe, *in.Endpoints, l.Card); err != nil {
			return nil, err
		}
	}
	signing := in.CardKeys != nil || in.CardSignatures != nil
	newCard := in.CardURL != nil || len(bytes.TrimSpace(in.Card)) > 0
	if in.CardURL != nil && len(bytes.TrimSpace(in.Card)) > 0 {
		fe.Add("card", "exclusive", "give card_url or card, not both")
	}
	if !owner && (in.Pricing != nil || in.UpstreamAuth != nil || in.RefreshSeconds != nil || in.Limits != nil || in.Endpoints != nil || newCard || signing) {
		return nil, agentmarket.Errorf(agentmarket.Forbidden, "not_listing_owner", "only the seller may change the card, pricing, credentials, endpoints or refresh of listing %q", id)
	}
	if in.Status != nil {
		if err := checkTransition(actor, owner, l.Status, *in.Status, s.AutoApprove); err != nil {
			var ae *agentmarket.Error
			if errors.As(err, &ae) && ae.Kind == agentmarket.Invalid {
				fe = append(fe, ae.Fields...)
			} else {
				return nil, err
			}
		}
	}
	if err := fe.Err("invalid_listing", "the change is not valid"); err != nil {
		return nil, err
	}
	now := s.now()
	if in.CardKeys != nil {
		l.CardKeys = keys
	}
	if in.CardSignatures != nil {
		l.SignaturePolicy = *in.CardSignatures
	}
	var version *CardVersion
	if signing && !newCard {
		// New keys or a new policy judge the card in force again.
		sig, err := s.checkSignature(ctx, l.CardJSON, l.CardURL, l.CardKeys, l.SignaturePolicy)
		if err != nil {
			return nil, err
		}
		l.CardSignature = sig
	}
	if newCard {
		cardURL := ""
		if in.CardURL != nil {
			cardURL = *in.CardURL
		}
		raw, card, fetched, err := s.readCard(ctx, cardURL, in.Card, "")
		if err != nil {
			return nil, err
		}
		sig, err := s.checkSignature(ctx, raw, fetched.source(), l.CardKeys, l.SignaturePolicy)
		if err != nil {
			return nil, err
		}
		l.CardSignature = sig
		l.CardURL, l.CardETag = cardURL, ""
		if fetched != nil {
			l.CardURL, l.CardETag = fetched.URL, fetched.ETag
		}
		l.Health, l.HealthDetail, l.CardFetchedAt = HealthHealthy, "", now
		if h := Hash(raw); h != l.CardHash {
			l.Card, l.CardJSON, l.CardHash = card, raw, h
			version = &CardVersion{ListingID: l.ID, CardHash: h, CardJSON: raw, SourceURL: l.CardURL, FetchedAt: now, Signature: sig}
		}
		if l.CardURL == "" {
			l.RefreshInterval, l.NextRefreshAt = 0, time.Time{}
		} else if l.RefreshInterval == 0 && in.RefreshSeconds == nil {
			l.RefreshInterval = s.DefaultRefresh
			if l.RefreshInterval > 0 {
				l.NextRefreshAt = now.Add(l.RefreshInterval)
			}
		}
	}
	if in.Pricing != nil && !plan.SamePrices(l.Plan) {
		// Private offers take versions too: the next one after all.
		if plan.Version, err = s.Store.NextPlanVersion(ctx, l.ID); err != nil {
			return nil, err
		}
		plan.CreatedAt = now
		l.Plan = plan
	}
	if in.UpstreamAuth != nil {
		if err := s.setUpstreamAuth(l, in.UpstreamAuth); err != nil {
			return nil, err
		}
	}
	if in.RefreshSeconds != nil {
		s.setRefresh(l, in.RefreshSeconds, now)
	}
	if in.Limits != nil {
		l.Limits = limits
	}
	if in.Endpoints != nil {
		l.AgentEndpoints = endpoints
	}
	if in.Status != nil {
		l.Status = *in.Status
		if l.Status == StatusPendingReview && s.AutoApprove {
			l.Status = StatusPublished
		}
	}
	l.UpdatedAt = now
	if err := s.Store.UpdateListing(ctx, l, version); err != nil {
		return nil, err
	}
	if err := agentmarket.RecordChange(ctx, s.Audit, listingChange(actor, statusAction(actor, owner, before.Status, l.Status), before, l)); err != nil {
		return nil, err
	}
	if l.Plan.Version != beforePlan.Version {
		return l, agentmarket.RecordChange(ctx, s.Audit, planChange(actor, "plan.create", &beforePlan, l.Plan, l.ID, l.SellerOrgID))
	}
	return l, nil
}

// checkTransition applies the listing life cycle: a seller submits a draft
// for review and may retire its listing; an operator approves, rejects
// (back to draft), suspends, reinstates and retires. Retired is final.
func checkTransition(actor agentmarket.Actor, owner bool, from, to Status, autoApprove bool) error {
	var fe agentmarket.Fields
	if !to.Valid() {
		fe.Add("status", "enum", "status must be one of draft, pending_review, published, suspended, retired")
		return fe.Err("invalid_listing", "the change is not valid")
	}
	if from == to {
		return nil
	}
	type move struct{ from, to Status }
	sellerMoves := map[move]bool{
		{StatusDraft, StatusPendingReview}:     true,
		{StatusDraft, StatusRetired}:           true,
		{StatusPendingReview, StatusDraft}:     true,
		{StatusPendingReview, StatusRetired}:   true,
		{StatusPublished, StatusRetired}:       true,
		{StatusSuspended, StatusRetired}:       true,
		{StatusDraft, StatusPublished}:         autoApprove,
		{StatusPendingReview, StatusPublished}: false,
	}
	operatorMoves := map[move]bool{
		{StatusPendingReview, StatusPublished}: true,
		{StatusPendingReview, StatusDraft}:     true,
		{StatusPublished, StatusSuspended}:     true,
		{StatusSuspended, StatusPublished}:     true,
		{StatusDraft, StatusRetired}:           true,
		{StatusPendingReview, StatusRetired}:   true,
		{StatusPublished, StatusRetired}:       true,
		{StatusSuspended, StatusRetired}:       true,
	}
	m := move{from, to}
	if actor.Operator && operatorMoves[m] {
		return nil
	}
	if owner && sellerMoves[m] {
		return nil
	}
	if operatorMoves[m] {
		return agentmarket.Errorf(agentmarket.Forbidden, "operator_only", "only a platform operator may move a listing from %s to %s", from, to)
	}
	fe.Add("status", "transition", "a listing cannot move from %s to %s", from, to)
	return fe.Err("invalid_listing", "the change is not valid")
}

// Refresh fetches the card again now. A card that changed becomes a new
// version; a card that can no longer be read marks the listing unhealthy
// (never deletes it) and the error is returned with the updated listing.
func (s *Service) Refresh(ctx context.Context, actor agentmarket.Actor, id string) (*Listing, error) {
	l, err := s.own(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	if l.CardURL == "" {
		var fe agentmarket.Fields
		fe.Add("card_url", "required", "this listing's card was pasted; there is no URL to refresh it from")
		return l, fe.Err("not_refreshable", "the listing has no card URL")
	}
	before := recordOf(l)
	l, err = s.refresh(ctx, l)
	if err == nil && l.Incident != nil {
		// The seller refreshing by hand says the agent is fixed.
		if err := s.Store.SetIncident(ctx, l.ID, nil); err != nil {
			return nil, err
		}
		l.Incident = nil
	}
	if l != nil {
		if aerr := agentmarket.RecordChange(ctx, s.Audit, listingChange(actor, "listing.refresh", before, l)); aerr != nil {
			return nil, aerr
		}
	}
	return l, err
}

// RecordLostTask counts a task the listing's agent no longer knew.
func (s *Service) RecordLostTask(ctx context.Context, listingID string) error {
	return s.Store.CountLostTask(ctx, listingID, s.now())
}

// RecordIncident marks a listing with an incident the meter saw (the
// detail is shown to the seller and operators, so it names no other
// buyer).
func (s *Service) RecordIncident(ctx context.Context, listingID, detail string) error {
	return s.Store.SetIncident(ctx, listingID, &Incident{At: s.now(), Detail: detail})
}

func (s *Service) refresh(ctx context.Context, l *Listing) (*Listing, error) {
	now := s.now()
	raw, card, fetched, ferr := s.readCard(ctx, l.CardURL, nil, l.CardETag)
	var sig CardSignature
	if ferr == nil && !fetched.NotModified {
		// A card whose signatures a "require" listing refuses leaves the
		// card in force, as a card that cannot be read does.
		sig, ferr = s.checkSignature(ctx, raw, fetched.source(), l.CardKeys, l.SignaturePolicy)
	}
	var v *CardVersion
	switch {
	case ferr != nil:
		l.Health = HealthUnhealthy
		l.HealthDetail = publicDetail(ferr)
	case fetched != nil && fetched.NotModified:
		l.Health, l.HealthDetail = HealthHealthy, ""
		l.CardFetchedAt = now
	default:
		l.Health, l.HealthDetail = HealthHealthy, ""
		l.CardFetchedAt = now
		l.CardETag = fetched.ETag
		l.CardSignature = sig
		if h := Hash(raw); h != l.CardHash {
			l.Card, l.CardJSON, l.CardHash = card, raw, h
			v = &CardVersion{ListingID: l.ID, CardHash: h, CardJSON: raw, SourceURL: fetched.URL, FetchedAt: now, Signature: sig}
		}
	}
	if l.RefreshInterval > 0 {
		l.NextRefreshAt = now.Add(l.RefreshInterval)
	}
	l.UpdatedAt = now
	if err := s.Store.UpdateListing(ctx, l, v); err != nil {
		return nil, err
	}
	return l, ferr
}

// RefreshDue refreshes every listing whose refresh time has come and
// returns how many it refreshed. A listing's failure marks it unhealthy and
// does not stop the others.
func (s *Service) RefreshDue(ctx context.Context) (int, error) {
	n := 0
	for {
		due, err := s.Store.DueForRefresh(ctx, s.now(), 50)
		if err != nil {
			return n, err
		}
		if len(due) == 0 {
			return n, nil
		}
		for _, l := range due {
			if _, err := s.refresh(ctx, l); err != nil && agentmarket.KindOf(err) == agentmarket.Internal {
				return n, err
			}
			n++
		}
	}
}

// Versions returns the card history of a listing the actor may see.
func (s *Service) Versions(ctx context.Context, actor agentmarket.Actor, id string) ([]CardVersion, error) {
	if _, err := s.Get(ctx, actor, id); err != nil {
		return nil, err
	}
	return s.Store.CardVersions(ctx, id)
}

// Search runs a catalog query. Others' listings are found only when
// published; a seller sees its own in every state, an operator all.
func (s *Service) Search(ctx context.Context, actor agentmarket.Actor, q Query) (*Page, error) {
	if err := q.Normalize(); err != nil {
		return nil, err
	}
	mayFilterStatus := actor.Operator || (q.SellerOrgID != "" && q.SellerOrgID == actor.OrgID)
	if len(q.Statuses) == 0 {
		if !mayFilterStatus || q.SellerOrgID == "" {
			q.Statuses = []Status{StatusPublished}
		}
	} else if !mayFilterStatus {
		var fe agentmarket.Fields
		fe.Add("status", "forbidden", "status can be filtered only on your own listings (seller=<your org id>)")
		return nil, fe.Err("invalid_query", "the search is not valid")
	}
	items, total, err := s.Store.Search(ctx, q)
	if err != nil {
		return nil, err
	}
	return &Page{Items: items, Total: total, Page: q.Page, PageSize: q.PageSize}, nil
}
