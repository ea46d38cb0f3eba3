package storetest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/listings"
)

// HealthStore is a listings store that keeps its agents' endpoint health.
type HealthStore interface {
	listings.Store
	listings.HealthStore
}

// RunHealth runs the contract suite of the endpoints' health.
func RunHealth(t *testing.T, newStore func(t *testing.T) (HealthStore, func(orgID string))) {
	ctx := context.Background()

	t.Run("endpoints are replaced as a whole, read with the listing, and kept by an update", func(t *testing.T) {
		s, org := newStore(t)
		org("org_a")
		l, v := newListing(t, "lst_1", "org_a", "translator-v1.0.json", 5_000_000, listings.StatusPublished, t0)
		if err := s.CreateListing(ctx, l, v); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetListing(ctx, "lst_1"); err != nil || len(got.Endpoints) != 0 || got.AgentHealth().State != listings.AgentUnknown {
			t.Fatalf("a new listing's endpoints = %+v, %v", got.Endpoints, err)
		}
		since := time.Date(2026, 11, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
		down := []listings.EndpointHealth{{URL: "http://a.example/rpc", Up: false, Since: since, Cause: "connection refused by a.example:80"}}
		if err := s.SetEndpoints(ctx, "lst_1", down); err != nil {
			t.Fatal(err)
		}
		l.HealthDetail = "refreshed" // an update of a listing read before
		if err := s.UpdateListing(ctx, l, nil); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetListing(ctx, "lst_1")
		if err != nil {
			t.Fatal(err)
		}
		down[0].Since = since.UTC()
		if !reflect.DeepEqual(got.Endpoints, down) || got.Endpoints[0].Since.Location() != time.UTC {
			t.Fatalf("endpoints = %+v, want %+v", got.Endpoints, down)
		}
		up := []listings.EndpointHealth{{URL: "http://b.example/rpc", Up: true, Since: since.Add(time.Minute).UTC()}}
		if err := s.SetEndpoints(ctx, "lst_1", up); err != nil {
			t.Fatal(err)
		}
		page, _, err := s.Search(ctx, query(listings.Query{}))
		if err != nil || len(page) != 1 || !reflect.DeepEqual(page[0].Endpoints, up) {
			t.Fatalf("search: %+v, %v", page, err)
		}
		if err := s.SetEndpoints(ctx, "lst_none", up); agentmarket.KindOf(err) != agentmarket.NotFound {
			t.Fatalf("unknown listing: %v", err)
		}
	})

	t.Run("probeable listings are the published ones, in id order, by page", func(t *testing.T) {
		s, org := newStore(t)
		org("org_a")
		for _, c := range []struct {
			id     string
			status listings.Status
		}{{"lst_3", listings.StatusPublished}, {"lst_1", listings.StatusPublished}, {"lst_2", listings.StatusDraft}, {"lst_4", listings.StatusPublished}, {"lst_5", listings.StatusSuspended}} {
			l, v := newListing(t, c.id, "org_a", "translator-v1.0.json", 0, c.status, t0)
			if err := s.CreateListing(ctx, l, v); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SetEndpoints(ctx, "lst_3", []listings.EndpointHealth{{URL: "http://a.example/", Since: t0, Cause: "down"}}); err != nil {
			t.Fatal(err)
		}
		first, err := s.Probeable(ctx, "", 2)
		if err != nil || !reflect.DeepEqual(ids(first), []string{"lst_1", "lst_3"}) {
			t.Fatalf("first page = %v, %v", ids(first), err)
		}
		if first[1].Card == nil || first[1].Plan.Version != 1 || len(first[1].Endpoints) != 1 || first[1].Endpoints[0].Cause != "down" {
			t.Fatalf("a probeable listing comes whole: %+v", first[1])
		}
		rest, err := s.Probeable(ctx, "lst_3", 2)
		if err != nil || !reflect.DeepEqual(ids(rest), []string{"lst_4"}) {
			t.Fatalf("next page = %v, %v", ids(rest), err)
		}
	})
}
