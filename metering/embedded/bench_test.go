package embedded_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/metering/spool"
	"github.com/agentmarket/agentmarket/metering/storetest"
)

// BenchmarkShip measures the pipeline's rate into the embedded store: rows
// already in the spool, shipped by Flush in batches of the given size (0:
// the default). Each op is 100,000 rows.
//
//	go test -run '^$' -bench Ship -benchtime 3x ./metering/embedded/
func BenchmarkShip(b *testing.B) {
	for _, rows := range []int{0, 20_000, 50_000} {
		b.Run(fmt.Sprintf("batch-%d", rows), func(b *testing.B) {
			ctx := context.Background()
			store := MustOpen(b)
			sp, err := spool.Open(b.TempDir(), spool.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer sp.Close()
			sh := spool.NewShipper(sp, store, spool.ShipperOptions{BatchRows: rows})
			const perOp = 100_000
			t0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
			seq := 0
			var shipping time.Duration
			for b.Loop() {
				b.StopTimer()
				for range perOp {
					u := storetest.Row(seq, t0.Add(time.Duration(seq)*time.Millisecond))
					u.APIKeyID = fmt.Sprintf("key_%d", seq%50)
					if err := sp.Append(u); err != nil {
						b.Fatal(err)
					}
					seq++
				}
				b.StartTimer()
				start := time.Now()
				if err := sh.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				shipping += time.Since(start)
			}
			b.ReportMetric(float64(seq)/shipping.Seconds(), "rows/s")
		})
	}
}
