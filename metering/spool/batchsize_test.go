package spool_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/spool"
)

// sizedStore is a store that prefers batches of size rows.
type sizedStore struct {
	recordingStore
	size int
}

func (s *sizedStore) PreferredBatchRows() int { return s.size }

// TestShipperUsesTheStoresBatchSize: without BatchRows, a shipper cuts
// batches at the store's preferred size; BatchRows still wins.
func TestShipperUsesTheStoresBatchSize(t *testing.T) {
	for _, tc := range []struct {
		preferred, option, want int
	}{
		{7, 0, 7},
		{7, 3, 3},
		{0, 0, spool.DefaultBatchRows},
	} {
		t.Run(fmt.Sprintf("preferred %d option %d", tc.preferred, tc.option), func(t *testing.T) {
			sp, err := spool.Open(t.TempDir(), spool.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer sp.Close()
			for i := range 20 {
				if err := sp.Append(metering.Usage{ID: fmt.Sprintf("u%d", i), Time: time.Unix(int64(i), 0)}); err != nil {
					t.Fatal(err)
				}
			}
			store := &sizedStore{recordingStore: recordingStore{Store: mustOpenStore(t)}, size: tc.preferred}
			sh := spool.NewShipper(sp, store, spool.ShipperOptions{BatchRows: tc.option})
			if err := sh.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(store.batches) == 0 || len(store.batches[0]) != min(tc.want, 20) {
				t.Fatalf("batches %v, want the first of %d rows", store.batches, min(tc.want, 20))
			}
		})
	}
}
