package a2aproxy

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/agentmarket/agentmarket/contracts"
)

// batcher funnels concurrent requests into one writer goroutine that
// handles whatever has queued up as one batch (one database commit for
// many calls). It adds no delay unless it lingers (lingering): a request
// waits only for the batch in flight before its own.
type batcher[Req, Res any] struct {
	in  chan batchItem[Req, Res]
	run func(ctx context.Context, reqs []Req) []Res
	max int
	// linger, when set, is how long a batch may wait for more requests
	// while requests arrive fast enough to bring at least lingerFor more
	// within it: a statement costs the pure-Go SQLite driver about as much
	// to parse for one key as a batch of sixteen costs to run, so under
	// load a short wait buys most of a call's lookup; at a trickle nothing
	// waits.
	linger time.Duration
	// lingers counts the batches that waited.
	lingers atomic.Uint64
}

// lingerFor is how many more requests the arrival rate must promise
// within the linger for a batch to wait for them.
const lingerFor = 1

type batchItem[Req, Res any] struct {
	req Req
	out chan Res
}

func newBatcher[Req, Res any](ctx context.Context, max int, run func(ctx context.Context, reqs []Req) []Res) *batcher[Req, Res] {
	return lingering(ctx, max, 0, run)
}

// lingering is a batcher that waits up to linger to fill a batch while
// requests arrive fast (batcher.linger).
func lingering[Req, Res any](ctx context.Context, max int, linger time.Duration, run func(ctx context.Context, reqs []Req) []Res) *batcher[Req, Res] {
	b := &batcher[Req, Res]{in: make(chan batchItem[Req, Res], max), run: run, max: max, linger: linger}
	go b.loop(ctx)
	return b
}

func (b *batcher[Req, Res]) loop(ctx context.Context) {
	items := make([]batchItem[Req, Res], 0, b.max)
	reqs := make([]Req, 0, b.max)
	var pace arrivals
	var timer *time.Timer
	for {
		select {
		case <-ctx.Done():
			return
		case it := <-b.in:
			items, reqs = append(items[:0], it), append(reqs[:0], it.req)
		}
	drain:
		for len(items) < b.max {
			select {
			case it := <-b.in:
				items, reqs = append(items, it), append(reqs, it.req)
			default:
				break drain
			}
		}
		if b.linger > 0 {
			taken := len(items)
			if pace.promise(time.Now(), taken, b.linger) >= lingerFor && taken < b.max {
				b.lingers.Add(1)
				if timer == nil {
					timer = time.NewTimer(b.linger)
				} else {
					timer.Reset(b.linger)
				}
			wait:
				for len(items) < b.max {
					select {
					case it := <-b.in:
						items, reqs = append(items, it), append(reqs, it.req)
					case <-timer.C:
						break wait
					case <-ctx.Done():
						break wait
					}
				}
				timer.Stop()
			}
			pace.lingered = len(items) - taken
		}
		res := b.run(context.WithoutCancel(ctx), reqs)
		for i, it := range items {
			it.out <- res[i]
		}
	}
}

// arrivals follows how fast requests reach a lingering batcher's loop.
type arrivals struct {
	rate     float64   // requests a second, a moving average over batches
	last     time.Time // when the loop last decided whether to linger
	lingered int       // requests taken while it lingered since then
}

// promise counts taken requests arriving at now and returns how many more
// the rate promises within linger.
func (a *arrivals) promise(now time.Time, taken int, linger time.Duration) float64 {
	if !a.last.IsZero() && now.After(a.last) {
		a.rate = 0.8*a.rate + 0.2*float64(taken+a.lingered)/now.Sub(a.last).Seconds()
	}
	a.last = now
	return a.rate * linger.Seconds()
}

// do queues req and waits for its answer.
func (b *batcher[Req, Res]) do(ctx context.Context, req Req) (Res, error) {
	it := batchItem[Req, Res]{req: req, out: make(chan Res, 1)}
	var zero Res
	select {
	case b.in <- it:
	case <-ctx.Done():
		return zero, ctx.Err()
	}
	select {
	case r := <-it.out:
		return r, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

type bindResult struct {
	owner string
	err   error
}

// startBatchers batches the task-owner writes of the calls that bind in
// the database (bindsInDB) when the store can.
func (p *Proxy) startBatchers() {
	if p.Shared != nil {
		p.sharedBind = bindBatcher(p.Base, p.Shared.BindTasks)
	}
	if bo, ok := p.Owners.(contracts.BatchTaskOwners); ok {
		p.binds = bindBatcher(p.Base, bo.BindTasks)
	}
}

// bindBatcher gathers the bindings of concurrent calls into batches of a
// store's BindTasks.
func bindBatcher(ctx context.Context, bind func(context.Context, []contracts.TaskBinding) ([]string, []error)) *batcher[contracts.TaskBinding, bindResult] {
	return newBatcher(ctx, 256, func(ctx context.Context, ts []contracts.TaskBinding) []bindResult {
		owners, errs := bind(ctx, ts)
		out := make([]bindResult, len(ts))
		for i := range ts {
			out[i] = bindResult{owners[i], errs[i]}
		}
		return out
	})
}

// bindShared records a binding in the shared state (Shared) and returns
// the owner recorded there.
func (p *Proxy) bindShared(ctx context.Context, t contracts.TaskBinding) (string, error) {
	r, err := p.sharedBind.do(ctx, t)
	if err != nil {
		return "", err
	}
	return r.owner, r.err
}

func (p *Proxy) bindOwner(ctx context.Context, t contracts.TaskBinding) (string, error) {
	if p.binds == nil {
		return p.Owners.BindTask(ctx, t)
	}
	r, err := p.binds.do(ctx, t)
	if err != nil {
		return "", err
	}
	return r.owner, r.err
}
