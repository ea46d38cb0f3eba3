package api

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings"
)

type listingJSON struct {
	ID           string          `json:"id"`
	SellerOrgID  string          `json:"seller_org_id"`
	Status       listings.Status `json:"status"`
	Health       listings.Health `json:"health"`
	HealthDetail string          `json:"health_detail,omitempty"`
	Incident     *incidentJSON   `json:"incident,omitempty"`
	LostTasks    *lostTasksJSON  `json:"lost_tasks,omitempty"`
	// AgentHealth is what the marketplace's active health checks last
	// said of the agent (health is the card's).
	AgentHealth        agentHealthJSON  `json:"agent_health"`
	Name               string           `json:"name"`
	Description        string           `json:"description"`
	Version            string           `json:"version"`
	ProtocolVersions   []string         `json:"protocol_versions"`
	Interfaces         []interfaceJSON  `json:"interfaces"`
	Capabilities       capabilitiesJSON `json:"capabilities"`
	DefaultInputModes  []string         `json:"default_input_modes"`
	DefaultOutputModes []string         `json:"default_output_modes"`
	Skills             []skillJSON      `json:"skills"`
	Pricing            map[string]any   `json:"pricing"`
	CardURL            string           `json:"card_url"`
	CardHash           string           `json:"card_hash"`
	CardFetchedAt      time.Time        `json:"card_fetched_at"`
	// CardSignature is what the card's own signatures showed (the card
	// field keeps them as the seller sent them); CardSignatures the
	// listing's policy, CardKeys the JWKS its seller registered.
	CardSignature   listings.CardSignature   `json:"card_signature"`
	CardSignatures  listings.SignaturePolicy `json:"card_signatures"`
	CardKeys        json.RawMessage          `json:"card_keys,omitempty"`
	HasUpstreamAuth *bool                    `json:"has_upstream_auth,omitempty"`
	RefreshSeconds  int                      `json:"refresh_seconds"`
	Limits          listings.LimitsInput     `json:"limits"`
	// Endpoints are the seller's agent endpoints and weights (its own and
	// operators' view only).
	Endpoints      []listings.AgentEndpointInput `json:"endpoints,omitempty"`
	NextRefreshAt  *time.Time                    `json:"next_refresh_at"`
	ProxiedCardURL string                        `json:"proxied_card_url,omitempty"`
	CreatedAt      time.Time                     `json:"created_at"`
	UpdatedAt      time.Time                     `json:"updated_at"`
	Card           json.RawMessage               `json:"card,omitempty"`
}

// incidentJSON is the meter's health mark on a listing.
type incidentJSON struct {
	At     time.Time `json:"at"`
	Detail string    `json:"detail"`
}

type agentHealthJSON struct {
	State     listings.AgentState  `json:"state"`
	Since     *time.Time           `json:"since,omitempty"`
	Cause     string               `json:"cause,omitempty"`
	Endpoints []endpointHealthJSON `json:"endpoints"`
}

type endpointHealthJSON struct {
	URL   string    `json:"url"`
	Up    bool      `json:"up"`
	Since time.Time `json:"since"`
	Cause string    `json:"cause,omitempty"`
}

func agentHealthView(l *listings.Listing) agentHealthJSON {
	h := l.AgentHealth()
	v := agentHealthJSON{State: h.State, Cause: h.Cause, Endpoints: make([]endpointHealthJSON, len(l.Endpoints))}
	if !h.Since.IsZero() {
		v.Since = &h.Since
	}
	for i, e := range l.Endpoints {
		v.Endpoints[i] = endpointHealthJSON{URL: e.URL, Up: e.Up, Since: e.Since, Cause: e.Cause}
	}
	return v
}

type lostTasksJSON struct {
	Count  int64     `json:"count"`
	LastAt time.Time `json:"last_at"`
}

type interfaceJSON struct {
	URL             string `json:"url"`
	Binding         string `json:"binding"`
	ProtocolVersion string `json:"protocol_version"`
	Tenant          string `json:"tenant,omitempty"`
}

type extensionJSON struct {
	URI         string `json:"uri"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required"`
}

type capabilitiesJSON struct {
	Streaming         bool            `json:"streaming"`
	PushNotifications bool            `json:"push_notifications"`
	ExtendedAgentCard bool            `json:"extended_agent_card"`
	Extensions        []extensionJSON `json:"extensions"`
}

type skillJSON struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	Examples    []string `json:"examples,omitempty"`
	InputModes  []string `json:"input_modes,omitempty"`
	OutputModes []string `json:"output_modes,omitempty"`
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// listingView is l as viewer sees it: its seller and operators see the
// seller's settings as well, every other org and an anonymous visitor
// the same public view.
func (s *Server) listingView(l *listings.Listing, viewer agentmarket.Actor, withCard bool) listingJSON {
	v := listingJSON{
		ID:             l.ID,
		SellerOrgID:    l.SellerOrgID,
		Status:         l.Status,
		Pricing:        l.Plan.PricingJSON(),
		CardURL:        l.CardURL,
		CardHash:       l.CardHash,
		CardFetchedAt:  l.CardFetchedAt,
		CardSignature:  l.CardSignature,
		CardSignatures: l.SignaturePolicy,
		CardKeys:       l.CardKeys,
		RefreshSeconds: int(l.RefreshInterval / time.Second),
		Limits:         l.Limits.Input(),
		CreatedAt:      l.CreatedAt,
		UpdatedAt:      l.UpdatedAt,
		Interfaces:     []interfaceJSON{},
		Skills:         []skillJSON{},
	}
	if viewer.Operator || (viewer.OrgID != "" && viewer.OrgID == l.SellerOrgID) {
		has := l.HasUpstreamAuth()
		v.HasUpstreamAuth = &has
		for _, e := range l.AgentEndpoints {
			v.Endpoints = append(v.Endpoints, e.Input())
		}
	}
	v.Health, v.HealthDetail = l.HealthShown()
	v.AgentHealth = agentHealthView(l)
	if l.Incident != nil {
		v.Incident = &incidentJSON{At: l.Incident.At, Detail: l.Incident.Detail}
	}
	if l.LostTasks != nil {
		v.LostTasks = &lostTasksJSON{Count: l.LostTasks.Count, LastAt: l.LostTasks.LastAt}
	}
	if !l.NextRefreshAt.IsZero() {
		t := l.NextRefreshAt
		v.NextRefreshAt = &t
	}
	if s.PublicMeterURL != "" {
		v.ProxiedCardURL = strings.TrimRight(s.PublicMeterURL, "/") + "/a2a/" + l.ID + "/.well-known/agent-card.json"
	}
	if withCard {
		v.Card = json.RawMessage(l.CardJSON)
	}
	if c := l.Card; c != nil {
		v.Name, v.Description, v.Version = c.Name, c.Description, c.Version
		v.ProtocolVersions = nonNil(c.ProtocolVersions)
		for _, i := range c.Interfaces {
			v.Interfaces = append(v.Interfaces, interfaceJSON{URL: i.URL, Binding: i.Binding, ProtocolVersion: i.ProtocolVersion, Tenant: i.Tenant})
		}
		v.Capabilities = capabilitiesJSON{Streaming: c.Capabilities.Streaming, PushNotifications: c.Capabilities.PushNotifications,
			ExtendedAgentCard: c.Capabilities.ExtendedAgentCard, Extensions: []extensionJSON{}}
		for _, e := range c.Capabilities.Extensions {
			v.Capabilities.Extensions = append(v.Capabilities.Extensions, extensionJSON{URI: e.URI, Description: e.Description, Required: e.Required})
		}
		v.DefaultInputModes, v.DefaultOutputModes = nonNil(c.DefaultInputModes), nonNil(c.DefaultOutputModes)
		for _, sk := range c.Skills {
			v.Skills = append(v.Skills, skillJSON{ID: sk.ID, Name: sk.Name, Description: sk.Description, Tags: nonNil(sk.Tags),
				Examples: sk.Examples, InputModes: sk.InputModes, OutputModes: sk.OutputModes})
		}
	}
	return v
}

func (s *Server) createListing(c *fiber.Ctx) error {
	var in listings.CreateInput
	if err := decode(c, &in); err != nil {
		return err
	}
	l, err := s.Listings.Create(c.UserContext(), actorOf(c), in)
	if err != nil {
		return err
	}
	c.Location("/api/v1/listings/" + l.ID)
	return c.Status(fiber.StatusCreated).JSON(s.listingView(l, actorOf(c), true))
}

func (s *Server) getListing(c *fiber.Ctx) error {
	l, err := s.Listings.Get(c.UserContext(), actorOf(c), c.Params("id"))
	if err != nil {
		return err
	}
	return c.JSON(s.listingView(l, actorOf(c), true))
}

func (s *Server) updateListing(c *fiber.Ctx) error {
	var in listings.UpdateInput
	if err := decode(c, &in); err != nil {
		return err
	}
	l, err := s.Listings.Update(c.UserContext(), actorOf(c), c.Params("id"), in)
	if err != nil {
		return err
	}
	return c.JSON(s.listingView(l, actorOf(c), true))
}

func (s *Server) refreshListing(c *fiber.Ctx) error {
	l, err := s.Listings.Refresh(c.UserContext(), actorOf(c), c.Params("id"))
	if err != nil {
		return err
	}
	return c.JSON(s.listingView(l, actorOf(c), true))
}

func (s *Server) listingVersions(c *fiber.Ctx) error {
	vs, err := s.Listings.Versions(c.UserContext(), actorOf(c), c.Params("id"))
	if err != nil {
		return err
	}
	type versionJSON struct {
		ID        int64                  `json:"id"`
		CardHash  string                 `json:"card_hash"`
		SourceURL string                 `json:"source_url"`
		FetchedAt time.Time              `json:"fetched_at"`
		Signature listings.CardSignature `json:"signature"`
		Card      json.RawMessage        `json:"card"`
	}
	out := make([]versionJSON, len(vs))
	for i, v := range vs {
		out[i] = versionJSON{ID: v.ID, CardHash: v.CardHash, SourceURL: v.SourceURL, FetchedAt: v.FetchedAt, Signature: v.Signature, Card: v.CardJSON}
	}
	return c.JSON(fiber.Map{"items": out})
}

func (s *Server) searchListings(c *fiber.Ctx) error {
	actor := actorOf(c)
	q, err := parseQuery(c, actor)
	if err != nil {
		return err
	}
	page, err := s.Listings.Search(c.UserContext(), actor, q)
	if err != nil {
		return err
	}
	items := make([]listingJSON, len(page.Items))
	for i, l := range page.Items {
		items[i] = s.listingView(l, actor, false)
	}
	return c.JSON(fiber.Map{"items": items, "total": page.Total, "page": page.Page, "page_size": page.PageSize})
}

// parseQuery reads the search parameters, reporting every malformed one.
func parseQuery(c *fiber.Ctx, actor agentmarket.Actor) (listings.Query, error) {
	var fe agentmarket.Fields
	q := listings.Query{
		Text:       c.Query("q"),
		Skill:      c.Query("skill"),
		Tag:        c.Query("tag"),
		InputMode:  c.Query("input_mode"),
		OutputMode: c.Query("output_mode"),
		Currency:   c.Query("currency"),
		Sort:       c.Query("sort"),
	}
	boolParam := func(name string) *bool {
		v := c.Query(name)
		if v == "" {
			return nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			fe.Add(name, "type", "%s must be true or false", name)
			return nil
		}
		return &b
	}
	intParam := func(name string) int64 { return queryInt(c, &fe, name) }
	q.Streaming = boolParam("streaming")
	q.Push = boolParam("push")
	if c.Query("max_monthly_fee_micros") != "" {
		n := intParam("max_monthly_fee_micros")
		q.MaxMonthlyFeeMicros = &n
	}
	q.Page = int(intParam("page"))
	q.PageSize = int(intParam("page_size"))
	q.SellerOrgID = c.Query("seller")
	if q.SellerOrgID == "me" {
		q.SellerOrgID = actor.OrgID
	}
	if st := c.Query("status"); st != "" {
		for _, s := range strings.Split(st, ",") {
			q.Statuses = append(q.Statuses, listings.Status(strings.TrimSpace(s)))
		}
	}
	return q, fe.Err("invalid_query", "the search is not valid")
}

// queryInt reads an optional integer query parameter (0 when absent); a
// malformed or out-of-range one is a field error, never a silent default.
func queryInt(c *fiber.Ctx, fe *agentmarket.Fields, name string) int64 {
	v := c.Query(name)
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		fe.Add(name, "type", "%s must be an integer", name)
	}
	return n
}
