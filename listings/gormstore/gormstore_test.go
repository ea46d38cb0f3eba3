package gormstore_test

import (
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/contracts"
	contractsgorm "github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/listings"
	"github.com/agentmarket/agentmarket/listings/gormstore"
	"github.com/agentmarket/agentmarket/listings/storetest"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

func TestStore(t *testing.T) {
	for _, o := range relationaltest.Openers {
		t.Run(o.Name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) (listings.Store, func(string)) {
				db := o.Open(t)
				orgs := contractsgorm.New(db.DB)
				return gormstore.New(db.DB), func(id string) {
					if err := orgs.CreateOrg(t.Context(), &contracts.Org{ID: id, Name: id, CreatedAt: time.Now()}, nil, nil); err != nil {
						t.Fatal(err)
					}
				}
			})
		})
	}
}

func TestOfferStore(t *testing.T) {
	for _, o := range relationaltest.Openers {
		t.Run(o.Name, func(t *testing.T) {
			storetest.RunOffers(t, func(t *testing.T) (interface {
				listings.Store
				listings.OfferStore
			}, func(string)) {
				db := o.Open(t)
				orgs := contractsgorm.New(db.DB)
				return gormstore.New(db.DB), func(id string) {
					if err := orgs.CreateOrg(t.Context(), &contracts.Org{ID: id, Name: id, CreatedAt: time.Now()}, nil, nil); err != nil {
						t.Fatal(err)
					}
				}
			})
		})
	}
}

func TestHealthStore(t *testing.T) {
	for _, o := range relationaltest.Openers {
		t.Run(o.Name, func(t *testing.T) {
			storetest.RunHealth(t, func(t *testing.T) (storetest.HealthStore, func(string)) {
				db := o.Open(t)
				orgs := contractsgorm.New(db.DB)
				return gormstore.New(db.DB), func(id string) {
					if err := orgs.CreateOrg(t.Context(), &contracts.Org{ID: id, Name: id, CreatedAt: time.Now()}, nil, nil); err != nil {
						t.Fatal(err)
					}
				}
			})
		})
	}
}
