package gormstore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/contracts/audit"
	"github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/contracts/storetest"
	"github.com/agentmarket/agentmarket/migrations/relational"
	"github.com/agentmarket/agentmarket/migrations/relational/relationaltest"
)

func TestStore(t *testing.T) {
	for _, o := range relationaltest.Openers {
		t.Run(o.Name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) interface {
				contracts.Store
				contracts.PolicyStore
			} {
				return gormstore.New(o.Open(t).DB)
			})
		})
	}
}

func TestTaskStore(t *testing.T) {
	for _, o := range relationaltest.Openers {
		t.Run(o.Name, func(t *testing.T) {
			storetest.RunTasks(t, func(t *testing.T) (storetest.TaskStore, func(listingID, sellerOrgID string)) {
				db := o.Open(t).DB
				return gormstore.New(db), func(listingID, sellerOrgID string) { insertListing(t, db, listingID, sellerOrgID) }
			})
		})
	}
}

func TestCreditStore(t *testing.T) {
	for _, o := range relationaltest.Openers {
		t.Run(o.Name, func(t *testing.T) {
			storetest.RunCredit(t, func(t *testing.T) storetest.CreditStore { return gormstore.New(o.Open(t).DB) })
		})
	}
}

func TestSwitchStore(t *testing.T) {
	for _, o := range relationaltest.Openers {
		t.Run(o.Name, func(t *testing.T) {
			storetest.RunSwitches(t, func(t *testing.T) (storetest.SwitchTaskStore, func(listingID, sellerOrgID string)) {
				db := o.Open(t).DB
				return gormstore.New(db), func(listingID, sellerOrgID string) { insertListing(t, db, listingID, sellerOrgID) }
			})
		})
	}
}

// TestTaskStoreDirect: the same suite with task bindings written through
// the store's own connection to the SQLite file (WriteTasksDirect), as the
// meter's projections write them on the embedded database.
func TestTaskStoreDirect(t *testing.T) {
	storetest.RunTasks(t, func(t *testing.T) (storetest.TaskStore, func(listingID, sellerOrgID string)) {
		path := filepath.Join(t.TempDir(), "direct.db")
		db, err := relational.OpenSQLite(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		s := gormstore.New(db.DB)
		if err := s.WriteTasksDirect(path); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(); db.Close() })
		return s, func(listingID, sellerOrgID string) { insertListing(t, db.DB, listingID, sellerOrgID) }
	})
}

// insertListing writes the least listing row a contract can reference;
// listings are another package's, and this package's tests do not import
// its adapter.
func insertListing(t *testing.T, db *gorm.DB, id, sellerOrgID string) {
	t.Helper()
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	err := db.Exec(`INSERT INTO listings (id, seller_org_id, status, health, name, description, card_json, card_hash, card_fetched_at,
		protocol_versions, streaming, push_notifications, search_text, plan_version, currency, monthly_fee_micros, refresh_seconds,
		created_at, updated_at) VALUES (?, ?, 'published', 'healthy', ?, '', '{}', '', ?, '0.3', FALSE, TRUE, '', 1, 'usd', 0, 3600, ?, ?)`,
		id, sellerOrgID, "Listing "+id, at, at, at).Error
	if err != nil {
		t.Fatalf("insert listing %s: %v", id, err)
	}
}

func TestPushKeyStore(t *testing.T) {
	for _, o := range relationaltest.Openers {
		t.Run(o.Name, func(t *testing.T) {
			storetest.RunPushKeys(t, func(t *testing.T) contracts.PushKeyStore { return gormstore.New(o.Open(t).DB) })
			t.Run("card keys", func(t *testing.T) {
				storetest.RunPushKeys(t, func(t *testing.T) contracts.PushKeyStore { return gormstore.New(o.Open(t).DB).CardKeys() })
			})
		})
	}
}

func TestPushCapsStore(t *testing.T) {
	for _, o := range relationaltest.Openers {
		t.Run(o.Name, func(t *testing.T) {
			storetest.RunPushCaps(t, func(t *testing.T) storetest.PushCapsStore { return gormstore.New(o.Open(t).DB) })
		})
	}
}

func TestAuditStore(t *testing.T) {
	storetest.RunAudit(t, func(t *testing.T) (audit.Store, audit.Store) {
		path := filepath.Join(t.TempDir(), "audit.db")
		a, err := relational.OpenSQLite(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		b, err := relational.OpenSQLite(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close(); b.Close() })
		return gormstore.New(a.DB), gormstore.New(b.DB)
	})
}

func TestAuditStorePostgres(t *testing.T) {
	storetest.RunAudit(t, func(t *testing.T) (audit.Store, audit.Store) {
		dsn := relationaltest.PostgresDSN(t)
		a, err := relational.OpenPostgres(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		b, err := relational.OpenPostgres(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close(); b.Close() })
		return gormstore.New(a.DB), gormstore.New(b.DB)
	})
}

func TestPendingSignupStore(t *testing.T) {
	for _, o := range relationaltest.Openers {
		t.Run(o.Name, func(t *testing.T) {
			storetest.RunPendingSignups(t, func(t *testing.T) contracts.PendingSignupStore { return gormstore.New(o.Open(t).DB) })
		})
	}
}
