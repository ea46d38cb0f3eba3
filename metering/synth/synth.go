// Package synth makes realistic usage rows for benchmarks and the seeding
// tool (cmd/seed), from a seed, so the same seed gives the same rows on
// every machine and store.
//
// The shape is a marketplace's: a few buyers make most of the calls (Zipf),
// each buyer holds a handful of contracts (one per agent it hired, popular
// agents more often) and a few API keys, of which it uses one most; a task
// takes one to three calls; tokens and compute are log-normal. Rows come in
// time order, as a meter's spool holds them, spread evenly over [From, To)
// with a few seconds of jitter. That coherence is what rollups live on: a
// day's rows fall into far fewer (buyer, seller, listing, key, contract)
// cells than rows, as in real traffic; independent random attributions
// would make nearly every row its own cell.
package synth

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmarket/agentmarket/metering"
)

// Usage makes usage rows; Row(i) is the same for the same fields.
type Usage struct {
	Seed     uint64
	Rows     int       // how many rows the range holds
	From, To time.Time // rows spread over [From, To)
	// Cardinalities; zero takes the defaults: 1,000 buyers, 10,000
	// listings, 500 sellers.
	Buyers, Listings, Sellers int
}

func (g Usage) defaults() Usage {
	if g.Buyers <= 0 {
		g.Buyers = 1000
	}
	if g.Listings <= 0 {
		g.Listings = 10_000
	}
	if g.Sellers <= 0 {
		g.Sellers = 500
	}
	return g
}

var cdfs sync.Map // [2]float64{n, s} -> []float64

func zipf(r *rand.Rand, n int, s float64) int {
	key := [2]float64{float64(n), s}
	c, ok := cdfs.Load(key)
	if !ok {
		cdf := make([]float64, n)
		total := 0.0
		for k := range n {
			total += 1 / math.Pow(float64(k+1), s)
			cdf[k] = total
		}
		c, _ = cdfs.LoadOrStore(key, cdf)
	}
	cdf := c.([]float64)
	k, _ := slices.BinarySearch(cdf, r.Float64()*cdf[n-1])
	return min(k, n-1)
}

// mix spreads small integers over the uint64 range (SplitMix64's finaliser).
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

var (
	methods = []string{"message/send", "message/send", "message/send", "message/send", "SendMessage", "message/stream", "SendStreamingMessage", "tasks/get"}
	states  = []string{"completed", "completed", "completed", "completed", "completed", "completed", "working", "input-required", "failed"}
	models  = []string{"", "m-large", "m-small", "m-large", "m-mini"}
)

// Row returns row i of the range: task i/2 (a task's first row carries
// Tasks = 1), with ids "u_<seed>_<i>".
func (g Usage) Row(i int) metering.Usage {
	g = g.defaults()
	r := rand.New(rand.NewPCG(g.Seed, mix(uint64(i))))
	span := g.To.Sub(g.From)
	at := g.From.Add(time.Duration(float64(span) * float64(i) / float64(max(g.Rows, 1))))
	at = at.Add(time.Duration(r.Int64N(int64(4*time.Second))) - 2*time.Second)
	if at.Before(g.From) {
		at = g.From
	}
	if last := g.To.Add(-time.Millisecond); at.After(last) {
		at = last
	}
	at = at.Truncate(time.Millisecond)

	// The task decides the attribution: both rows of a task share it.
	task := i / 2
	tr := rand.New(rand.NewPCG(g.Seed^0xbeef, mix(uint64(task))))
	b := zipf(tr, g.Buyers, 1.0)
	br := rand.New(rand.NewPCG(g.Seed^0xb0b, uint64(b)))
	contracts, keys := 1+br.IntN(20), 1+br.IntN(5)
	c := zipf(tr, contracts, 1.0)
	l := int(mix(uint64(b)<<20|uint64(c)) % uint64(g.Listings))
	k := zipf(tr, keys, 1.5)

	in := int64(math.Exp(r.NormFloat64()*0.9 + 6.7))  // median about 800
	out := int64(math.Exp(r.NormFloat64()*0.9 + 5.7)) // about 300
	compute := int64(math.Exp(r.NormFloat64()*1.0 + 7.6))
	estimated := r.IntN(10) == 0
	tasks := int64(0)
	if i%2 == 0 {
		tasks = 1
	}
	cost := in*3 + out*15 + compute + tasks*2000
	state := states[r.IntN(len(states))]
	errCode := 0
	if state == "failed" && r.IntN(2) == 0 {
		errCode = -32603
	}
	seed, it := strconv.FormatUint(g.Seed, 10), strconv.Itoa(task)
	bs, ls := strconv.Itoa(b), strconv.Itoa(l)
	var hash [64]byte
	for j := range hash {
		hash[j] = "0123456789abcdef"[mix(uint64(l)+uint64(j/16))>>(4*(j%16))&15]
	}
	return metering.Usage{
		ID:   "u_" + seed + "_" + strconv.Itoa(i),
		Time: at,

		TraceID:   strconv.FormatUint(mix(uint64(i)^g.Seed)|1<<63, 16) + strconv.FormatUint(mix(uint64(i)+1)|1<<63, 16),
		TaskID:    "task_" + seed + "_" + it,
		ContextID: "ctx_" + seed + "_" + strconv.Itoa(task/3),

		ListingID:   "lst_" + ls,
		SellerOrgID: "org_s" + strconv.Itoa(l%g.Sellers),
		BuyerOrgID:  "org_b" + bs,
		APIKeyID:    "key_" + bs + "_" + strconv.Itoa(k),
		ContractID:  "ctr_" + bs + "_" + ls,

		Method:          methods[r.IntN(len(methods))],
		ProtocolVersion: []string{"1.0", "0.3"}[r.IntN(2)],
		State:           state,
		ErrorCode:       errCode,

		BytesIn:   200 + r.Int64N(4000),
		BytesOut:  300 + r.Int64N(20000),
		LatencyMs: compute/10 + r.Int64N(50),

		InputTokens:  in,
		OutputTokens: out,
		ComputeMs:    compute,
		Tasks:        tasks,
		CostMicros:   cost,
		Currency:     "usd",
		Estimated:    estimated,

		CardHash: "sha256:" + string(hash[:]),
		Model:    models[r.IntN(len(models))],
	}
}

// Fill hands rows [from, to) to insert in batches of at most batch, made
// by workers goroutines ahead of the inserts (generating a row costs about
// as much as storing it).
func (g Usage) Fill(from, to, batch, workers int, insert func(rows []metering.Usage) error) error {
	batch, workers = max(batch, 1), max(workers, 1)
	type job struct {
		rows []metering.Usage
		done chan struct{}
	}
	jobs := make(chan *job, workers)
	var failed atomic.Bool
	go func() {
		defer close(jobs)
		sem := make(chan struct{}, workers)
		for i := from; i < to && !failed.Load(); i += batch {
			j := &job{rows: make([]metering.Usage, min(batch, to-i)), done: make(chan struct{})}
			sem <- struct{}{}
			go func(start int) {
				for k := range j.rows {
					j.rows[k] = g.Row(start + k)
				}
				close(j.done)
				<-sem
			}(i)
			jobs <- j
		}
	}()
	var err error
	for j := range jobs {
		<-j.done
		if err == nil {
			if err = insert(j.rows); err != nil {
				failed.Store(true)
			}
		}
	}
	return err
}
