package a2aproxy

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestBatcherLingersUnderLoad: requests that keep coming fill a lingering
// batcher's batches (a lookup of one key costs the driver about what one
// of many does), where a batcher that does not linger runs most of them
// alone; a trickle is never held back.
func TestBatcherLingersUnderLoad(t *testing.T) {
	const workers, rounds = 8, 200
	sizes := func(linger time.Duration) (full, batches int, b *batcher[int, int]) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var mu sync.Mutex
		b = lingering(ctx, workers, linger, func(_ context.Context, reqs []int) []int {
			mu.Lock()
			batches++
			if len(reqs) == workers {
				full++
			}
			mu.Unlock()
			out := make([]int, len(reqs))
			for i, r := range reqs {
				out[i] = r * 2
			}
			return out
		})
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range rounds {
					got, err := b.do(ctx, w*rounds+i)
					if err != nil || got != 2*(w*rounds+i) {
						t.Errorf("do(%d) = %d, %v", w*rounds+i, got, err)
						return
					}
				}
			})
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return full, batches, b
	}
	full, batches, b := sizes(50 * time.Millisecond)
	if b.lingers.Load() == 0 || full*2 < batches {
		t.Errorf("lingering: %d of %d batches full (%d lingered); want most of them full", full, batches, b.lingers.Load())
	}
	if _, _, b := sizes(0); b.lingers.Load() != 0 {
		t.Errorf("a batcher without a linger lingered %d times", b.lingers.Load())
	}

	// A trickle: requests far apart compared with the linger never wait.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b = lingering(ctx, workers, 5*time.Millisecond, func(_ context.Context, reqs []int) []int { return make([]int, len(reqs)) })
	for range 10 {
		if _, err := b.do(ctx, 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := b.lingers.Load(); n != 0 {
		t.Errorf("a trickle (one request every 50 ms, linger 5 ms) lingered %d times", n)
	}
}
