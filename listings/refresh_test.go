package listings_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings"
)

func TestRefresh(t *testing.T) {
	ctx := context.Background()
	v1, v2 := card(t, "translator-v1.0.json"), card(t, "summarizer-v0.3.json")

	// newListing lists the agent at agentURL, serving v1 with ETag "1".
	newListing := func(t *testing.T) (*env, *listings.Listing) {
		e := newEnv(t, true)
		e.fetcher.serve(agentURL, v1, `"1"`)
		l := e.mustCreate(t, seller, listings.CreateInput{CardURL: agentURL})
		e.fetcher.calls = nil
		e.clock.Advance(10 * time.Minute)
		return e, l
	}

	t.Run("a changed card becomes a new version", func(t *testing.T) {
		e, l := newListing(t)
		e.fetcher.serve(agentURL, v2, `"2"`)
		got, err := e.svc.Refresh(ctx, seller, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Health != listings.HealthHealthy || got.CardHash != listings.Hash(v2) {
			t.Errorf("Refresh = %s %s, want healthy with the new card", got.Health, got.CardHash)
		}
		if want := []string{agentURL + ` "1"`}; !slices.Equal(e.fetcher.calls, want) {
			t.Errorf("fetches = %q, want %q (the stored ETag sent)", e.fetcher.calls, want)
		}
		stored := e.stored(t, l.ID)
		now := t0.Add(10 * time.Minute)
		if stored.CardHash != listings.Hash(v2) || stored.Card.Name != "Summarizer" || stored.CardETag != `"2"` ||
			!stored.CardFetchedAt.Equal(now) || !stored.NextRefreshAt.Equal(now.Add(listings.DefaultRefreshInterval)) {
			t.Errorf("stored = %s %q %q fetched %v next %v", stored.CardHash, stored.Card.Name, stored.CardETag, stored.CardFetchedAt, stored.NextRefreshAt)
		}
		vs := e.versions(t, l.ID)
		if len(vs) != 2 || vs[0].CardHash != listings.Hash(v2) || vs[1].CardHash != listings.Hash(v1) {
			t.Errorf("versions = %d, want v2 then v1", len(vs))
		}
	})

	t.Run("a fetch error marks the listing unhealthy and keeps it", func(t *testing.T) {
		e, l := newListing(t)
		fetchErr := agentmarket.Errorf(agentmarket.Invalid, "card_status", "agent.example answered 503")
		e.fetcher.err[agentURL] = fetchErr
		got, err := e.svc.Refresh(ctx, seller, l.ID)
		if !errors.Is(err, fetchErr) {
			t.Fatalf("Refresh error = %v, want the fetch error", err)
		}
		if got == nil || got.Health != listings.HealthUnhealthy {
			t.Fatalf("Refresh listing = %+v, want it returned unhealthy", got)
		}
		stored := e.stored(t, l.ID)
		if stored.Health != listings.HealthUnhealthy || !strings.Contains(stored.HealthDetail, "503") {
			t.Errorf("stored health = %s %q, want unhealthy saying why", stored.Health, stored.HealthDetail)
		}
		if stored.Status != listings.StatusPublished || stored.CardHash != listings.Hash(v1) || !stored.CardFetchedAt.Equal(t0) {
			t.Errorf("stored = %s %s fetched %v, want the listing and its card unchanged", stored.Status, stored.CardHash, stored.CardFetchedAt)
		}
		if n := len(e.versions(t, l.ID)); n != 1 {
			t.Errorf("%d versions, want 1", n)
		}

		// Once the agent answers again the listing is healthy again.
		delete(e.fetcher.err, agentURL)
		got, err = e.svc.Refresh(ctx, seller, l.ID)
		if err != nil || got.Health != listings.HealthHealthy || got.HealthDetail != "" {
			t.Errorf("Refresh after recovery = %s %q, %v; want healthy", got.Health, got.HealthDetail, err)
		}
	})

	t.Run("the health detail does not show an error's internal cause", func(t *testing.T) {
		e, l := newListing(t)
		cause := errors.New("dial tcp 10.20.30.40:443: connect: connection refused")
		e.fetcher.err[agentURL] = agentmarket.Wrap(agentmarket.Invalid, "card_fetch_failed", cause, "could not fetch the card from agent.example")
		if _, err := e.svc.Refresh(ctx, seller, l.ID); err == nil {
			t.Fatal("Refresh succeeded, want the fetch error")
		}
		stored := e.stored(t, l.ID)
		if !strings.Contains(stored.HealthDetail, "could not fetch the card") {
			t.Errorf("health detail = %q, want the public message", stored.HealthDetail)
		}
		if strings.Contains(stored.HealthDetail, "10.20.30.40") {
			t.Errorf("health detail = %q, shows the internal cause (Error.Err must be logged, never shown)", stored.HealthDetail)
		}
	})

	t.Run("a fetched card that became invalid marks the listing unhealthy", func(t *testing.T) {
		e, l := newListing(t)
		e.fetcher.serve(agentURL, cardWithout(t, "translator-v1.0.json", "name"), `"3"`)
		got, err := e.svc.Refresh(ctx, seller, l.ID)
		wantErr(t, err, agentmarket.Invalid, "card_invalid", "card.name:required")
		if got.Health != listings.HealthUnhealthy || e.stored(t, l.ID).CardHash != listings.Hash(v1) {
			t.Errorf("after an invalid card: %s, card %s; want unhealthy with the old card", got.Health, e.stored(t, l.ID).CardHash)
		}
	})

	t.Run("not modified keeps the card and makes no version", func(t *testing.T) {
		e, l := newListing(t)
		stale := e.stored(t, l.ID)
		stale.Health, stale.HealthDetail = listings.HealthUnhealthy, "earlier failure"
		if err := e.store.UpdateListing(ctx, stale, nil); err != nil {
			t.Fatal(err)
		}
		got, err := e.svc.Refresh(ctx, seller, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		now := t0.Add(10 * time.Minute)
		stored := e.stored(t, l.ID)
		if got.Health != listings.HealthHealthy || stored.Health != listings.HealthHealthy || stored.HealthDetail != "" {
			t.Errorf("health = %s (stored %s %q), want healthy", got.Health, stored.Health, stored.HealthDetail)
		}
		if stored.CardHash != listings.Hash(v1) || stored.CardETag != `"1"` || !stored.CardFetchedAt.Equal(now) {
			t.Errorf("stored = %s %q fetched %v, want the same card checked at %v", stored.CardHash, stored.CardETag, stored.CardFetchedAt, now)
		}
		if n := len(e.versions(t, l.ID)); n != 1 {
			t.Errorf("%d versions, want 1", n)
		}
	})

	t.Run("who may refresh", func(t *testing.T) {
		e, l := newListing(t)
		if _, err := e.svc.Refresh(ctx, operator, l.ID); err != nil {
			t.Errorf("operator: %v", err)
		}
		_, err := e.svc.Refresh(ctx, other, l.ID)
		wantErr(t, err, agentmarket.Forbidden, "not_listing_owner", "")
	})

	t.Run("a pasted card cannot be refreshed", func(t *testing.T) {
		e := newEnv(t, true)
		l := e.mustCreate(t, seller, listings.CreateInput{Card: v1})
		_, err := e.svc.Refresh(ctx, seller, l.ID)
		wantErr(t, err, agentmarket.Invalid, "not_refreshable", "card_url:required")
		if len(e.fetcher.calls) != 0 {
			t.Errorf("fetches = %q, want none", e.fetcher.calls)
		}
	})
}

func TestRefreshDue(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	secs := func(n int) *int { return &n }
	urls := map[string]string{}
	for _, a := range []struct {
		name string
		secs *int
	}{{"minutely", secs(60)}, {"hourly", nil}, {"never", secs(0)}} {
		u := "https://" + a.name + ".example/card.json"
		e.fetcher.serve(u, card(t, "translator-v1.0.json"), `"1"`)
		urls[a.name] = u
		e.mustCreate(t, seller, listings.CreateInput{CardURL: u, RefreshSeconds: a.secs})
	}
	e.mustCreate(t, seller, listings.CreateInput{Card: card(t, "summarizer-v0.3.json")})
	e.fetcher.calls = nil

	steps := []struct {
		advance time.Duration
		fail    string // a URL whose fetch fails during this step
		want    []string
	}{
		{30 * time.Second, "", nil},
		{90 * time.Second, "", []string{urls["minutely"]}},
		{0, "", nil}, // the minutely listing is next due a minute later
		{time.Hour, urls["minutely"], []string{urls["minutely"], urls["hourly"]}},
		{time.Minute, "", []string{urls["minutely"]}},
	}
	for i, s := range steps {
		e.clock.Advance(s.advance)
		e.fetcher.calls = nil
		if s.fail != "" {
			e.fetcher.err[s.fail] = agentmarket.Errorf(agentmarket.Invalid, "card_fetch_failed", "could not fetch")
		}
		n, err := e.svc.RefreshDue(ctx)
		if err != nil {
			t.Fatalf("step %d: RefreshDue: %v", i, err)
		}
		var got []string
		for _, c := range e.fetcher.calls {
			got = append(got, strings.Fields(c)[0])
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(s.want))
		if n != len(s.want) || !slices.Equal(got, want) {
			t.Errorf("step %d (at +%v): refreshed %d, fetched %q; want %q", i, e.clock.Now().Sub(t0), n, got, want)
		}
		delete(e.fetcher.err, s.fail)
	}
}
