package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket/metering"
	"github.com/agentmarket/agentmarket/metering/synth"
)

// BenchTraffic is the usage the embedded stores' benchmarks insert and
// query: synth's marketplace, 100,000 rows a day over June 2026, so the
// first million rows are its first ten days.
var BenchTraffic = synth.Usage{Seed: 7, Rows: 3_000_000,
	From: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)}

// BenchQueries runs, as sub-benchmarks, the queries the product asks a
// usage store over its rows, against s holding BenchTraffic's first
// million rows: finance totals over whole days (what the rollups answer),
// over a month up to a time in the middle of an hour, per task over a
// day, a contract's rows (the FOCUS export) and the listing stats of 30
// days. Each reports its median and 95th percentile time, so stores can
// be compared side by side on one machine.
func BenchQueries(b *testing.B, s StatsStore) {
	ctx := context.Background()
	first := BenchTraffic.Row(0)
	buyer, seller, contract := first.BuyerOrgID, first.SellerOrgID, first.ContractID
	june := BenchTraffic.From
	july := june.AddDate(0, 1, 0)
	now := june.Add(9*24*time.Hour + 13*time.Hour + 37*time.Minute + 1234*time.Millisecond) // day 10, mid-hour
	monthToNow := func(q metering.Query) metering.Query {
		q.From, q.To = now.AddDate(0, 0, -30), now
		return q
	}
	cases := []struct {
		name string
		run  func() error
	}{
		{"totals/platform/by-listing/month", totals(ctx, s, metering.Query{GroupBy: metering.ByListing, From: june, To: july})},
		{"totals/buyer/by-listing/month", totals(ctx, s, metering.Query{GroupBy: metering.ByListing, BuyerOrgID: buyer, From: june, To: july})},
		{"totals/seller/by-buyer/month", totals(ctx, s, metering.Query{GroupBy: metering.ByBuyer, SellerOrgID: seller, From: june, To: july})},
		{"totals/buyer/by-listing/30-days-to-now", totals(ctx, s, monthToNow(metering.Query{GroupBy: metering.ByListing, BuyerOrgID: buyer}))},
		{"totals/seller/by-day/30-days-to-now", totals(ctx, s, monthToNow(metering.Query{GroupBy: metering.ByDay, SellerOrgID: seller}))},
		{"totals/buyer/by-task/day", totals(ctx, s, metering.Query{GroupBy: metering.ByTask, BuyerOrgID: buyer, From: june.AddDate(0, 0, 4), To: june.AddDate(0, 0, 5)})},
		{"totals/buyer/by-tag/day", totals(ctx, s, metering.Query{GroupBy: metering.ByTag("team"), BuyerOrgID: buyer, From: june.AddDate(0, 0, 4), To: june.AddDate(0, 0, 5)})},
		{"rows/contract/month", func() error {
			_, err := s.Rows(ctx, metering.Query{ContractID: contract, From: june, To: july})
			return err
		}},
		{"stats/30-days", func() error {
			_, err := s.ListingStats(ctx, metering.StatsQuery{From: now.AddDate(0, 0, -30), To: now,
				MinBuyerOrgs: metering.DefaultStatsMinBuyerOrgs, MinTasks: metering.DefaultStatsMinTasks})
			return err
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var times []time.Duration
			for b.Loop() {
				start := time.Now()
				if err := c.run(); err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(start))
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(times[min(len(times)-1, len(times)*95/100)].Microseconds())/1000, "p95-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func totals(ctx context.Context, s metering.Store, q metering.Query) func() error {
	return func() error {
		_, err := s.Totals(ctx, q)
		return err
	}
}
