// Package synth makes a realistic catalog for benchmarks and the seeding
// tool (cmd/seed): agent cards of both protocol versions, with names,
// descriptions, skills, tags and media types drawn from a marketplace's
// vocabulary, prices, statuses and sellers, all from a seed, so the same
// seed gives the same catalog on every machine and database.
//
// The vocabulary is skewed as a real catalog's is: a few domains and tasks
// are common (a word such as "documents" is in a few percent of listings,
// "agent" in about a third), most are rare, and brand names are nearly
// unique. The figures in BENCHMARKS.md depend on that shape, which is why
// it lives in one place.
package synth

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/agentcard"
)

// Catalog makes listings; a Catalog with the same Seed makes the same ones.
type Catalog struct {
	Seed uint64
	// Sellers are the seller org ids listings are spread over (a few
	// sellers hold many listings, most hold a handful). At least one.
	Sellers []string
	// Epoch is the time of the newest listing; older ones go back two
	// years. Zero means 2026-11-01 UTC.
	Epoch time.Time
}

type domain struct {
	name    string // as written in names and descriptions: "Legal"
	objects []string
	tags    []string
}

type task struct {
	verb   string // "summarize"
	agent  string // "Summarizer"
	noun   string // "summaries"
	tags   []string
	blurbs []string // "%s" is an object
}

var domains = []domain{
	{"Legal", []string{"contract", "lease", "patent", "court filing", "NDA", "policy"}, []string{"legal", "contracts", "compliance", "law"}},
	{"Finance", []string{"invoice", "receipt", "bank statement", "expense report", "ledger"}, []string{"finance", "accounting", "invoices"}},
	{"Tax", []string{"tax return", "W-2 form", "VAT filing", "receipt"}, []string{"tax", "finance", "compliance"}},
	{"Healthcare", []string{"clinical note", "lab report", "discharge summary", "prescription"}, []string{"healthcare", "medical", "clinical", "hipaa"}},
	{"Insurance", []string{"claim", "policy", "damage photo", "adjuster report"}, []string{"insurance", "claims"}},
	{"Real Estate", []string{"listing", "lease", "appraisal", "floor plan"}, []string{"real-estate", "property"}},
	{"Marketing", []string{"campaign brief", "blog post", "ad copy", "landing page", "newsletter"}, []string{"marketing", "content", "seo", "copywriting"}},
	{"Sales", []string{"lead", "sales call", "CRM record", "proposal"}, []string{"sales", "crm", "leads"}},
	{"Support", []string{"support ticket", "chat transcript", "email", "FAQ"}, []string{"support", "customer-service", "helpdesk"}},
	{"HR", []string{"resume", "job description", "interview note", "employee handbook"}, []string{"hr", "recruiting", "hiring"}},
	{"Education", []string{"lecture", "essay", "quiz", "syllabus", "textbook chapter"}, []string{"education", "learning", "teaching"}},
	{"Research", []string{"paper", "dataset", "grant proposal", "literature review"}, []string{"research", "science", "academic"}},
	{"Software", []string{"pull request", "codebase", "API spec", "stack trace", "test suite"}, []string{"code", "developer", "devops", "programming"}},
	{"Security", []string{"log", "alert", "vulnerability report", "firewall rule"}, []string{"security", "soc", "threat-intel"}},
	{"Data", []string{"spreadsheet", "CSV file", "SQL query", "dashboard", "dataset"}, []string{"data", "analytics", "bi"}},
	{"Retail", []string{"product listing", "review", "order", "catalog"}, []string{"retail", "ecommerce", "products"}},
	{"Logistics", []string{"shipment", "bill of lading", "customs form", "route"}, []string{"logistics", "shipping", "supply-chain"}},
	{"Travel", []string{"itinerary", "booking", "hotel review", "visa application"}, []string{"travel", "hospitality"}},
	{"Media", []string{"video", "podcast", "article", "press release", "transcript"}, []string{"media", "journalism", "audio", "video"}},
	{"Design", []string{"mockup", "logo", "brand guideline", "image"}, []string{"design", "creative", "images"}},
	{"Manufacturing", []string{"work order", "maintenance log", "sensor reading", "quality report"}, []string{"manufacturing", "iot", "quality"}},
	{"Energy", []string{"meter reading", "grid report", "solar forecast"}, []string{"energy", "utilities"}},
	{"Government", []string{"permit application", "public record", "regulation", "FOIA request"}, []string{"government", "public-sector", "compliance"}},
	{"Nonprofit", []string{"donor letter", "grant report", "volunteer roster"}, []string{"nonprofit", "fundraising"}},
	{"Gaming", []string{"game script", "player review", "level design", "patch note"}, []string{"gaming", "games"}},
	{"Music", []string{"song lyric", "audio track", "chord chart"}, []string{"music", "audio"}},
	{"Agriculture", []string{"crop report", "soil sample", "weather feed"}, []string{"agriculture", "farming"}},
	{"Automotive", []string{"service record", "parts catalog", "diagnostic code"}, []string{"automotive", "vehicles"}},
	{"Pharma", []string{"trial protocol", "adverse event report", "drug label"}, []string{"pharma", "clinical", "regulatory"}},
	{"Procurement", []string{"purchase order", "RFP", "vendor contract", "quote"}, []string{"procurement", "purchasing", "contracts"}},
}

var tasks = []task{
	{"summarize", "Summarizer", "summaries", []string{"summarization", "writing"}, []string{"Turns long %ss into one-page briefs.", "Condenses %ss into the key points, with citations."}},
	{"translate", "Translator", "translations", []string{"translation", "multilingual", "localization"}, []string{"Translates %ss between 40 languages, keeping the layout.", "Localizes %ss for new markets."}},
	{"extract", "Extractor", "extractions", []string{"extraction", "parsing", "structured-data"}, []string{"Pulls fields out of %ss into clean JSON.", "Extracts parties, dates and amounts from %ss."}},
	{"classify", "Classifier", "classifications", []string{"classification", "triage"}, []string{"Sorts incoming %ss into your categories.", "Labels %ss by topic, urgency and owner."}},
	{"draft", "Drafter", "drafts", []string{"writing", "generation"}, []string{"Drafts %ss from a short brief.", "Writes first drafts of %ss in your house style."}},
	{"review", "Reviewer", "reviews", []string{"review", "quality"}, []string{"Reviews %ss and flags risky passages.", "Checks %ss against your checklist."}},
	{"analyze", "Analyst", "analyses", []string{"analysis", "insights"}, []string{"Analyzes %ss and explains the trends.", "Finds anomalies in %ss."}},
	{"transcribe", "Transcriber", "transcripts", []string{"transcription", "speech", "audio"}, []string{"Transcribes %ss with speaker labels.", "Turns recorded %ss into searchable text."}},
	{"answer", "Assistant", "answers", []string{"qa", "chat", "assistant"}, []string{"Answers questions about your %ss.", "Chats with your team about %ss."}},
	{"search", "Finder", "search results", []string{"search", "retrieval", "rag"}, []string{"Searches thousands of %ss in seconds.", "Finds the %s you need with semantic search."}},
	{"detect", "Detector", "detections", []string{"detection", "monitoring", "fraud"}, []string{"Detects fraud and errors in %ss.", "Spots duplicates among %ss."}},
	{"forecast", "Forecaster", "forecasts", []string{"forecasting", "prediction"}, []string{"Forecasts demand from %ss.", "Predicts outcomes from past %ss."}},
	{"schedule", "Scheduler", "schedules", []string{"scheduling", "automation"}, []string{"Schedules work from %ss.", "Plans your week around %ss."}},
	{"validate", "Validator", "validations", []string{"validation", "compliance"}, []string{"Validates %ss against the rules in force.", "Catches missing fields in %ss."}},
	{"convert", "Converter", "conversions", []string{"conversion", "formatting"}, []string{"Converts %ss between formats.", "Turns scanned %ss into editable files."}},
	{"moderate", "Moderator", "moderation", []string{"moderation", "trust-safety"}, []string{"Moderates %ss for abuse and spam.", "Screens %ss before they go live."}},
	{"recommend", "Recommender", "recommendations", []string{"recommendations", "personalization"}, []string{"Recommends the next best %s.", "Ranks %ss for each customer."}},
	{"redact", "Redactor", "redactions", []string{"redaction", "privacy", "pii"}, []string{"Redacts personal data from %ss.", "Removes PII from %ss before sharing."}},
	{"reconcile", "Reconciler", "reconciliations", []string{"reconciliation", "accounting"}, []string{"Reconciles %ss against your ledger.", "Matches %ss line by line."}},
	{"audit", "Auditor", "audits", []string{"audit", "compliance"}, []string{"Audits %ss and writes the findings.", "Keeps an audit trail of every %s."}},
	{"tag", "Tagger", "tags", []string{"tagging", "metadata"}, []string{"Tags %ss with keywords and entities.", "Adds metadata to %ss."}},
	{"generate", "Generator", "generations", []string{"generation", "creative"}, []string{"Generates %ss on demand.", "Creates %ss from templates and data."}},
	{"optimize", "Optimizer", "optimizations", []string{"optimization"}, []string{"Optimizes %ss for cost and speed.", "Rewrites %ss to perform better."}},
	{"monitor", "Monitor", "alerts", []string{"monitoring", "alerting"}, []string{"Monitors %ss around the clock.", "Alerts you when a %s changes."}},
	{"negotiate", "Negotiator", "negotiations", []string{"negotiation", "sales"}, []string{"Negotiates %ss within your limits.", "Proposes counter-offers on %ss."}},
	{"index", "Indexer", "indexes", []string{"indexing", "search"}, []string{"Indexes %ss for fast lookup.", "Builds a knowledge base from %ss."}},
	{"proofread", "Proofreader", "corrections", []string{"proofreading", "writing", "grammar"}, []string{"Proofreads %ss for grammar and tone.", "Fixes typos in %ss."}},
	{"caption", "Captioner", "captions", []string{"captioning", "accessibility", "video"}, []string{"Captions %ss for accessibility.", "Writes alt text for %ss."}},
}

var closers = []string{
	"An AI agent built for busy teams.",
	"Fast, accurate and secure.",
	"Runs on a fine-tuned model; your data never trains it.",
	"SOC 2 audited. EU and US hosting.",
	"Works with the tools you already use.",
	"Human review on request.",
	"Streams partial results as it works.",
	"Pay per task, no minimum.",
	"Backed by a team of domain experts.",
	"The agent remembers your preferences across tasks.",
	"",
	"",
	"",
}

var audiences = []string{"law firms", "finance teams", "clinics", "startups", "agencies", "enterprises", "small businesses",
	"researchers", "developers", "support teams", "recruiters", "teachers", "analysts", "operations teams"}

var syllables = []string{"ac", "al", "an", "ar", "ba", "bel", "bri", "ca", "cor", "da", "del", "do", "el", "en", "fa", "fin",
	"ga", "gen", "ha", "in", "io", "ka", "ko", "la", "lex", "lu", "ma", "mer", "mi", "na", "neo", "no", "nu", "on", "or",
	"pa", "pi", "qua", "ra", "ri", "ro", "sa", "sen", "so", "ta", "ter", "ti", "to", "ul", "va", "ve", "vi", "xa", "ya", "zen", "zo"}

type mediaType struct {
	mime   string
	weight int
}

var inputTypes = []mediaType{{"text/plain", 60}, {"application/pdf", 30}, {"application/json", 20}, {"image/png", 10}, {"image/jpeg", 8},
	{"text/csv", 8}, {"text/html", 6}, {"audio/mpeg", 5}, {"application/vnd.openxmlformats-officedocument.wordprocessingml.document", 6},
	{"text/markdown", 5}, {"video/mp4", 3}, {"audio/wav", 2}}

var outputTypes = []mediaType{{"text/plain", 55}, {"application/json", 35}, {"text/markdown", 20}, {"text/csv", 6}, {"application/pdf", 6},
	{"image/png", 4}, {"text/html", 4}, {"audio/mpeg", 2}}

// pick draws an index in [0, n) with a Zipf-like skew: index 0 the most
// likely, each later one less so (P(k) ∝ 1/(k+1)^s).
func pick(r *rand.Rand, n int, s float64) int {
	cdf := zipfCDF(n, s)
	x := r.Float64() * cdf[n-1]
	k, _ := slices.BinarySearch(cdf, x)
	return min(k, n-1)
}

var cdfs sync.Map // [2]float64{n, s} -> []float64

func zipfCDF(n int, s float64) []float64 {
	key := [2]float64{float64(n), s}
	if c, ok := cdfs.Load(key); ok {
		return c.([]float64)
	}
	c := make([]float64, n)
	total := 0.0
	for k := range n {
		total += 1 / math.Pow(float64(k+1), s)
		c[k] = total
	}
	cdfs.Store(key, c)
	return c
}

func pickMedia(r *rand.Rand, from []mediaType, n int) []string {
	total := 0
	for _, m := range from {
		total += m.weight
	}
	seen := map[string]bool{}
	var out []string
	for len(out) < n {
		x := r.IntN(total)
		for _, m := range from {
			if x -= m.weight; x < 0 {
				if !seen[m.mime] {
					seen[m.mime] = true
					out = append(out, m.mime)
				}
				break
			}
		}
	}
	return out
}

func title(s string) string {
	words := strings.Fields(s)
	for i, w := range words {
		if w == strings.ToLower(w) {
			words[i] = strings.ToUpper(w[:1]) + w[1:]
		}
	}
	return strings.Join(words, " ")
}

func plural(s string) string {
	switch {
	case strings.HasSuffix(s, "s"), strings.HasSuffix(s, "x"), strings.HasSuffix(s, "ch"):
		return s + "es"
	case strings.HasSuffix(s, "y") && !strings.HasSuffix(s, "ey"):
		return s[:len(s)-1] + "ies"
	}
	return s + "s"
}

// brand is a made-up company name, nearly unique per (seller, i).
func brand(r *rand.Rand) string {
	n := 2 + r.IntN(2)
	var b strings.Builder
	for range n {
		b.WriteString(syllables[r.IntN(len(syllables))])
	}
	s := b.String()
	return strings.ToUpper(s[:1]) + s[1:]
}

// Card returns the JSON of listing i's agent card (A2A 1.0 for even i,
// 0.3 for odd i) and its parsed form.
func (c Catalog) Card(i int) ([]byte, *agentcard.Card, error) {
	r := rand.New(rand.NewPCG(c.Seed, uint64(i)*0x9e3779b97f4a7c15+1))
	d := domains[pick(r, len(domains), 0.5)]
	t := tasks[pick(r, len(tasks), 0.6)]
	obj := d.objects[r.IntN(len(d.objects))]
	b := brand(r)
	var name string
	switch r.IntN(5) {
	case 0:
		name = fmt.Sprintf("%s %s %s", b, title(obj), t.agent)
	case 1:
		name = fmt.Sprintf("%s %s %s", b, d.name, t.agent)
	case 2:
		name = fmt.Sprintf("%s %s Agent", title(obj), t.agent)
	case 3:
		name = fmt.Sprintf("%s for %s", b, title(plural(obj)))
	default:
		name = fmt.Sprintf("%s %s", b, t.agent)
	}
	if r.IntN(10) == 0 {
		name += fmt.Sprintf(" %d", 2+r.IntN(4))
	}
	desc := fmt.Sprintf(t.blurbs[r.IntN(len(t.blurbs))], obj)
	if r.IntN(2) == 0 {
		desc += " Built for " + audiences[r.IntN(len(audiences))] + "."
	}
	desc += " " + closers[r.IntN(len(closers))]
	desc = strings.TrimSpace(desc)

	type skillJSON struct {
		ID          string   `json:"id"`
		Name        string   `json:"name"`
		Description string   `json:"description"`
		Tags        []string `json:"tags"`
		Examples    []string `json:"examples,omitempty"`
		InputModes  []string `json:"inputModes,omitempty"`
		OutputModes []string `json:"outputModes,omitempty"`
	}
	nSkills := 1 + pick(r, 4, 1.2)
	var skills []skillJSON
	seen := map[string]bool{}
	for k := 0; k < nSkills; k++ {
		st := t
		so := obj
		if k > 0 {
			st = tasks[pick(r, len(tasks), 0.6)]
			so = d.objects[r.IntN(len(d.objects))]
		}
		id := st.verb + "-" + strings.ReplaceAll(strings.ToLower(plural(so)), " ", "-")
		if seen[id] {
			continue
		}
		seen[id] = true
		tags := append([]string{}, st.tags[:1+r.IntN(len(st.tags))]...)
		tags = append(tags, d.tags[:1+r.IntN(len(d.tags))]...)
		sk := skillJSON{
			ID: id, Name: title(st.verb) + " " + plural(so),
			Description: fmt.Sprintf(st.blurbs[r.IntN(len(st.blurbs))], so),
			Tags:        tags,
		}
		if r.IntN(3) == 0 {
			sk.Examples = []string{fmt.Sprintf("%s this %s", title(st.verb), so)}
		}
		if r.IntN(4) == 0 {
			sk.InputModes = pickMedia(r, inputTypes, 1)
		}
		skills = append(skills, sk)
	}
	in := pickMedia(r, inputTypes, 1+pick(r, 3, 1))
	out := pickMedia(r, outputTypes, 1+pick(r, 2, 1))
	caps := map[string]any{"streaming": r.IntN(100) < 55, "pushNotifications": r.IntN(100) < 25}
	host := fmt.Sprintf("https://%s.agents.example/a2a", strings.ToLower(b))
	card := map[string]any{
		"name": name, "description": desc, "version": fmt.Sprintf("%d.%d.%d", 1+r.IntN(3), r.IntN(10), r.IntN(20)),
		"capabilities": caps, "defaultInputModes": in, "defaultOutputModes": out, "skills": skills,
		"provider": map[string]any{"organization": b + " Inc.", "url": fmt.Sprintf("https://%s.example", strings.ToLower(b))},
	}
	if i%2 == 0 {
		card["supportedInterfaces"] = []map[string]any{{"url": host, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}}
	} else {
		card["protocolVersion"] = "0.3.0"
		card["url"] = host
		card["preferredTransport"] = "JSONRPC"
	}
	raw, err := json.Marshal(card)
	if err != nil {
		return nil, nil, err
	}
	parsed, err := agentcard.Parse(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("synth: card %d does not parse: %w", i, err)
	}
	return raw, parsed, nil
}

// Listing returns listing i: its card, plan, status, seller and times, with
// the id "lst_synth_<seed>_<i>" so reruns are recognised.
func (c Catalog) Listing(i int) (*listings.Listing, *listings.CardVersion, error) {
	raw, card, err := c.Card(i)
	if err != nil {
		return nil, nil, err
	}
	if len(c.Sellers) == 0 {
		return nil, nil, fmt.Errorf("synth: no sellers")
	}
	r := rand.New(rand.NewPCG(c.Seed^0x5eed, uint64(i)))
	epoch := c.Epoch
	if epoch.IsZero() {
		epoch = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	}
	created := epoch.Add(-time.Duration(r.Int64N(int64(2 * 365 * 24 * time.Hour)))).Truncate(time.Second)
	status := listings.StatusPublished
	switch x := r.IntN(100); {
	case x < 5:
		status = listings.StatusDraft
	case x < 9:
		status = listings.StatusPendingReview
	case x < 12:
		status = listings.StatusSuspended
	case x < 15:
		status = listings.StatusRetired
	}
	var fee int64
	if r.IntN(10) >= 3 {
		fee = int64(math.Round(math.Exp(r.NormFloat64()*1.1+3.3))) * 1_000_000 // median about 27 a month
	}
	currency := "usd"
	switch x := r.IntN(100); {
	case x < 7:
		currency = "eur"
	case x < 10:
		currency = "gbp"
	}
	id := fmt.Sprintf("lst_synth_%d_%d", c.Seed, i)
	cardURL := fmt.Sprintf("https://%s/.well-known/agent-card.json", strings.TrimPrefix(strings.TrimSuffix(card.Interfaces[0].URL, "/a2a"), "https://"))
	l := &listings.Listing{
		ID: id, SellerOrgID: c.Sellers[pick(r, len(c.Sellers), 1.0)], Status: status, Health: listings.HealthHealthy,
		CardURL: cardURL, Card: card, CardJSON: raw, CardHash: listings.Hash(raw), CardFetchedAt: created,
		Plan: listings.Plan{Version: 1, Currency: currency, MonthlyFeeMicros: fee,
			InputTokensPerMillionMicros: int64(r.IntN(20)) * 500_000, OutputTokensPerMillionMicros: int64(r.IntN(40)) * 500_000,
			PerTaskMicros: int64(r.IntN(5)) * 10_000, CreatedAt: created},
		RefreshInterval: time.Hour, NextRefreshAt: epoch.Add(time.Duration(r.Int64N(int64(time.Hour)))),
		CreatedAt: created, UpdatedAt: created,
	}
	return l, &listings.CardVersion{ListingID: id, CardHash: l.CardHash, CardJSON: raw, SourceURL: cardURL, FetchedAt: created}, nil
}

// Fill makes listings [from, to) and hands them to create in batches of at
// most batch (a store's bulk insert, such as gormstore's CreateListings).
func (c Catalog) Fill(ctx context.Context, from, to, batch int, create func(context.Context, []*listings.Listing, []*listings.CardVersion) error) error {
	batch = max(batch, 1)
	for i := from; i < to; i += batch {
		var ls []*listings.Listing
		var vs []*listings.CardVersion
		for j := i; j < min(i+batch, to); j++ {
			l, v, err := c.Listing(j)
			if err != nil {
				return err
			}
			ls, vs = append(ls, l), append(vs, v)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := create(ctx, ls, vs); err != nil {
			return err
		}
	}
	return nil
}
