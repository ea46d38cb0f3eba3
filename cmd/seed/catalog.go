package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
	contractsgorm "github.com/agentmarket/agentmarket/contracts/gormstore"
	"github.com/agentmarket/agentmarket/listings"
	listingsgorm "github.com/agentmarket/agentmarket/listings/gormstore"
	"github.com/agentmarket/agentmarket/listings/synth"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

// catalogBatch is how many listings one transaction stores.
const catalogBatch = 500

// seedCatalog makes the catalog hold o.listings synthetic listings of
// o.seed, over one seller for every 20 listings, and returns how many it
// added. Listings of the seed already there are kept: a run continues
// where an earlier one stopped.
func seedCatalog(ctx context.Context, o *options, out io.Writer) (int, error) {
	var db *relational.DB
	var err error
	if o.databaseURL != "" {
		db, err = relational.OpenPostgres(ctx, o.databaseURL)
	} else {
		db, err = relational.OpenSQLite(ctx, filepath.Join(o.dataDir, "agentmarket.db"))
	}
	if err != nil {
		return 0, err
	}
	defer db.Close()
	prefix := fmt.Sprintf("lst_synth_%d_", o.seed)
	var have int64
	if err := db.WithContext(ctx).Raw("SELECT COUNT(*) FROM listings WHERE id LIKE ?", prefix+"%").Scan(&have).Error; err != nil {
		return 0, err
	}
	if int(have) >= o.listings {
		return 0, nil
	}
	accounts := contractsgorm.New(db.DB)
	var sellers []string
	for i := range max(1, o.listings/20) {
		id := fmt.Sprintf("org_synth_%d_%d", o.seed, i)
		sellers = append(sellers, id)
		err := accounts.CreateOrg(ctx, &contracts.Org{ID: id, Name: fmt.Sprintf("Synthetic seller %d", i), CreatedAt: time.Now().UTC()}, nil, nil)
		if err != nil && agentmarket.KindOf(err) != agentmarket.Conflict {
			return 0, err
		}
	}
	store := listingsgorm.New(db.DB)
	c := synth.Catalog{Seed: o.seed, Sellers: sellers}
	start, last := time.Now(), time.Now()
	done := int(have)
	err = c.Fill(ctx, int(have), o.listings, catalogBatch, func(ctx context.Context, ls []*listings.Listing, vs []*listings.CardVersion) error {
		if err := store.CreateListings(ctx, ls, vs); err != nil {
			return err
		}
		done += len(ls)
		if time.Since(last) > 5*time.Second {
			last = time.Now()
			fmt.Fprintf(out, "catalog: %d of %d listings, %.0f a second\n", done, o.listings, float64(done-int(have))/time.Since(start).Seconds())
		}
		return nil
	})
	if err != nil {
		return done - int(have), err
	}
	return done - int(have), store.OptimizeSearch(ctx)
}
