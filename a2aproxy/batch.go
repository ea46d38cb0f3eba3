package a2aproxy

import (
	"context"

	"github.com/agentmarket/agentmarket/contracts"
)

// batcher funnels concurrent requests into one writer goroutine that
// handles whatever has queued up as one batch (one database commit for
// many calls). It adds no delay: a request waits only for the batch in
// flight before its own.
type batcher[Req, Res any] struct {
	in  chan batchItem[Req, Res]
	run func(ctx context.Context, reqs []Req) []Res
	max int
}

type batchItem[Req, Res any] struct {
	req Req
	out chan Res
}

func newBatcher[Req, Res any](ctx context.Context, max int, run func(ctx context.Context, reqs []Req) []Res) *batcher[Req, Res] {
	return newBatchers(ctx, 1, max, run)
}

// newBatchers is a batcher with n writers taking from one queue: up to n
// batches in flight at once (reads, which the database serves side by
// side).
func newBatchers[Req, Res any](ctx context.Context, n, max int, run func(ctx context.Context, reqs []Req) []Res) *batcher[Req, Res] {
	b := &batcher[Req, Res]{in: make(chan batchItem[Req, Res], max), run: run, max: max}
	for range n {
		go b.loop(ctx)
	}
	return b
}

func (b *batcher[Req, Res]) loop(ctx context.Context) {
	items := make([]batchItem[Req, Res], 0, b.max)
	reqs := make([]Req, 0, b.max)
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
		res := b.run(context.WithoutCancel(ctx), reqs)
		for i, it := range items {
			it.out <- res[i]
		}
	}
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
	if bo, ok := p.Owners.(contracts.BatchTaskOwners); ok {
		p.binds = newBatcher(p.Base, 256, func(ctx context.Context, ts []contracts.TaskBinding) []bindResult {
			owners, errs := bo.BindTasks(ctx, ts)
			out := make([]bindResult, len(ts))
			for i := range ts {
				out[i] = bindResult{owners[i], errs[i]}
			}
			return out
		})
	}
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
