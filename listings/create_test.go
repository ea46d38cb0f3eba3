package listings_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings"
)

func TestCreateFromURL(t *testing.T) {
	e := newEnv(t, false)
	raw := card(t, "translator-v1.0.json")
	e.fetcher.serve(agentURL, raw, `"v1"`)

	l := e.mustCreate(t, seller, listings.CreateInput{CardURL: agentURL, Pricing: json.RawMessage(`{"currency": "usd", "per_task_micros": 2500}`)})

	if got, want := e.fetcher.calls, []string{agentURL}; !slices.Equal(got, want) {
		t.Errorf("fetches = %q, want %q", got, want)
	}
	got := e.stored(t, l.ID)
	checks := []struct {
		name      string
		got, want any
	}{
		{"seller", got.SellerOrgID, seller.OrgID},
		{"status", got.Status, listings.StatusPendingReview},
		{"health", got.Health, listings.HealthHealthy},
		{"card url", got.CardURL, agentURL},
		{"etag", got.CardETag, `"v1"`},
		{"card hash", got.CardHash, listings.Hash(raw)},
		{"card name", got.Card.Name, "Translator"},
		{"plan", fmt.Sprintf("%d %s %d", got.Plan.Version, got.Plan.Currency, got.Plan.PerTaskMicros), "1 usd 2500"},
		{"refresh interval", got.RefreshInterval, listings.DefaultRefreshInterval},
		{"next refresh", got.NextRefreshAt, t0.Add(listings.DefaultRefreshInterval)},
		{"fetched at", got.CardFetchedAt, t0},
	}
	for _, c := range checks {
		same := c.got == c.want
		if gt, ok := c.got.(time.Time); ok {
			same = gt.Equal(c.want.(time.Time))
		}
		if !same {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	vs := e.versions(t, l.ID)
	if len(vs) != 1 || vs[0].CardHash != listings.Hash(raw) || vs[0].SourceURL != agentURL {
		t.Errorf("versions = %+v, want the fetched card from %s", vs, agentURL)
	}
}

func TestCreateRefreshSeconds(t *testing.T) {
	secs := func(n int) *int { return &n }
	cases := []struct {
		name      string
		pasted    bool
		seconds   *int
		wantEvery time.Duration
		wantErr   string
	}{
		{"default", false, nil, listings.DefaultRefreshInterval, ""},
		{"two minutes", false, secs(120), 2 * time.Minute, ""},
		{"the minimum", false, secs(60), time.Minute, ""},
		{"zero disables", false, secs(0), 0, ""},
		{"a pasted card is never refreshed", true, secs(120), 0, ""},
		{"below the minimum", false, secs(59), 0, "refresh_seconds:range"},
		{"negative", false, secs(-1), 0, "refresh_seconds:range"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, false)
			e.fetcher.serve(agentURL, card(t, "translator-v1.0.json"), "")
			in := listings.CreateInput{CardURL: agentURL, Pricing: json.RawMessage(pricing), RefreshSeconds: tc.seconds}
			if tc.pasted {
				in.CardURL, in.Card = "", card(t, "translator-v1.0.json")
			}
			l, err := e.svc.Create(context.Background(), seller, in)
			if tc.wantErr != "" {
				wantErr(t, err, agentmarket.Invalid, "invalid_listing", tc.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := e.stored(t, l.ID)
			wantNext := time.Time{}
			if tc.wantEvery > 0 {
				wantNext = t0.Add(tc.wantEvery)
			}
			if got.RefreshInterval != tc.wantEvery || !got.NextRefreshAt.Equal(wantNext) {
				t.Errorf("refresh = every %v next %v, want every %v next %v", got.RefreshInterval, got.NextRefreshAt, tc.wantEvery, wantNext)
			}
		})
	}
}

func TestCreatePastedStatus(t *testing.T) {
	cases := []struct {
		name  string
		auto  bool
		draft bool
		want  listings.Status
	}{
		{"auto-approve on", true, false, listings.StatusPublished},
		{"auto-approve off", false, false, listings.StatusPendingReview},
		{"draft, auto-approve on", true, true, listings.StatusDraft},
		{"draft, auto-approve off", false, true, listings.StatusDraft},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.auto)
			raw := card(t, "summarizer-v0.3.json")
			l := e.mustCreate(t, seller, listings.CreateInput{Card: raw, Draft: tc.draft})
			got := e.stored(t, l.ID)
			if got.Status != tc.want {
				t.Errorf("status = %s, want %s", got.Status, tc.want)
			}
			if got.CardURL != "" || got.CardHash != listings.Hash(raw) || got.Card.Name != "Summarizer" {
				t.Errorf("card = %q %s %q, want the pasted card", got.CardURL, got.CardHash, got.Card.Name)
			}
			if len(e.fetcher.calls) != 0 {
				t.Errorf("a pasted card was fetched: %q", e.fetcher.calls)
			}
		})
	}
}

// padded returns a valid card padded with trailing spaces to n bytes.
func padded(t *testing.T, n int) json.RawMessage {
	raw := card(t, "translator-v1.0.json")
	return append(bytes.Clone(raw), bytes.Repeat([]byte(" "), n-len(raw))...)
}

func TestCreateInvalid(t *testing.T) {
	bad := &listings.UpstreamAuth{Header: "Bad Header", Value: "two\nlines"}
	cases := []struct {
		name   string
		in     func(t *testing.T) listings.CreateInput
		code   string
		fields string
	}{
		{"neither card nor URL", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{Pricing: json.RawMessage(pricing)}
		}, "invalid_listing", "card_url:required"},
		{"card null", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{Card: json.RawMessage("null"), Pricing: json.RawMessage(pricing)}
		}, "invalid_listing", "card_url:required"},
		{"both card and URL", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{CardURL: agentURL, Card: card(t, "translator-v1.0.json"), Pricing: json.RawMessage(pricing)}
		}, "invalid_listing", "card:exclusive"},
		{"no pricing", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{Card: card(t, "translator-v1.0.json")}
		}, "invalid_listing", "pricing:required"},
		{"bad pricing", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{Card: card(t, "translator-v1.0.json"), Pricing: json.RawMessage(`{"currency": "USD", "per_task_micros": -3}`)}
		}, "invalid_listing", "pricing.currency:format pricing.per_task_micros:non_negative"},
		{"bad credentials", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{Card: card(t, "translator-v1.0.json"), Pricing: json.RawMessage(pricing), UpstreamAuth: bad}
		}, "invalid_listing", "upstream_auth.header:format upstream_auth.value:control_character"},
		{"credentials with NUL, and a megabyte long", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{Card: card(t, "translator-v1.0.json"), Pricing: json.RawMessage(pricing),
				UpstreamAuth: &listings.UpstreamAuth{Header: "X-Key\x00", Value: strings.Repeat("k", 1<<20)}}
		}, "invalid_listing", "upstream_auth.header:control_character upstream_auth.value:max_length"},
		{"empty credentials", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{Card: card(t, "translator-v1.0.json"), Pricing: json.RawMessage(pricing), UpstreamAuth: &listings.UpstreamAuth{}}
		}, "invalid_listing", "upstream_auth.header:format upstream_auth.value:format"},
		{"card URL over 2048 characters", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{CardURL: agentURL + "?" + strings.Repeat("q", 2048), Pricing: json.RawMessage(pricing)}
		}, "invalid_listing", "card_url:max_length"},
		{"card URL with a line break", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{CardURL: agentURL + "\n", Pricing: json.RawMessage(pricing)}
		}, "invalid_listing", "card_url:control_character"},
		{"every input problem at once", func(t *testing.T) listings.CreateInput {
			secs := 5
			return listings.CreateInput{CardURL: agentURL, Card: card(t, "translator-v1.0.json"), Pricing: json.RawMessage(`{"monthly_fee_micros": 1.5}`),
				UpstreamAuth: bad, RefreshSeconds: &secs}
		}, "invalid_listing", "card:exclusive pricing.monthly_fee_micros:integer pricing.currency:required " +
			"upstream_auth.header:format upstream_auth.value:control_character refresh_seconds:range"},
		{"pasted card over 64 KiB", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{Card: padded(t, listings.MaxCardBytes+1), Pricing: json.RawMessage(pricing)}
		}, "card_too_large", "card:max_size"},
		{"pasted card without a name", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{Card: cardWithout(t, "translator-v1.0.json", "name"), Pricing: json.RawMessage(pricing)}
		}, "card_invalid", "card.name:required"},
		{"pasted card without name and description", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{Card: cardWithout(t, "translator-v1.0.json", "name", "description"), Pricing: json.RawMessage(pricing)}
		}, "card_invalid", "card.name:required card.description:required"},
		{"pasted card that is not JSON", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{Card: json.RawMessage(`{"name": `), Pricing: json.RawMessage(pricing)}
		}, "card_not_json", "card:json"},
		{"fetched card without a name", func(t *testing.T) listings.CreateInput {
			return listings.CreateInput{CardURL: "https://nameless.example/card.json", Pricing: json.RawMessage(pricing)}
		}, "card_invalid", "card.name:required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, true)
			e.fetcher.serve("https://nameless.example/card.json", cardWithout(t, "translator-v1.0.json", "name"), "")
			_, err := e.svc.Create(context.Background(), seller, tc.in(t))
			wantErr(t, err, agentmarket.Invalid, tc.code, tc.fields)
			if n := countListings(t, e); n != 0 {
				t.Errorf("%d listings stored after a refused create", n)
			}
		})
	}
}

func countListings(t *testing.T, e *env) int {
	t.Helper()
	q := listings.Query{SellerOrgID: seller.OrgID}
	if err := q.Normalize(); err != nil {
		t.Fatal(err)
	}
	_, n, err := e.store.Search(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCreateCardAtTheSizeLimit(t *testing.T) {
	e := newEnv(t, true)
	raw := padded(t, listings.MaxCardBytes)
	l := e.mustCreate(t, seller, listings.CreateInput{Card: raw})
	if got := len(e.stored(t, l.ID).CardJSON); got != listings.MaxCardBytes {
		t.Errorf("stored card is %d bytes, want %d", got, listings.MaxCardBytes)
	}
}

func TestCreateFetchError(t *testing.T) {
	e := newEnv(t, true)
	fetchErr := agentmarket.Errorf(agentmarket.Invalid, "card_fetch_failed", "could not fetch the card from agent.example")
	e.fetcher.err[agentURL] = fetchErr
	_, err := e.svc.Create(context.Background(), seller, listings.CreateInput{CardURL: agentURL, Pricing: json.RawMessage(pricing)})
	if !errors.Is(err, fetchErr) {
		t.Errorf("Create = %v, want the fetch error", err)
	}
	if n := countListings(t, e); n != 0 {
		t.Errorf("%d listings stored after a failed fetch", n)
	}
}
