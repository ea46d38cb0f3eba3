package agentmarket_test

import (
	"encoding/base32"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
)

// sortableMs is the millisecond an id of NewSortableID was made in.
func sortableMs(t *testing.T, id string) int64 {
	t.Helper()
	b, err := base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding).DecodeString(strings.TrimPrefix(id, "use_"))
	if err != nil || len(b) != 14 {
		t.Fatalf("%q: %d bytes, %v", id, len(b), err)
	}
	var ms int64
	for _, c := range b[:6] {
		ms = ms<<8 | int64(c)
	}
	return ms
}

// TestSortableIDOrder: ids made one after the other sort in that order,
// also within a millisecond, where they still differ; they carry the time
// they were made and are 23 characters long.
func TestSortableIDOrder(t *testing.T) {
	before := time.Now().UnixMilli()
	ids := make([]string, 20_000)
	for i := range ids {
		ids[i] = agentmarket.NewSortableID("use")
	}
	after := time.Now().UnixMilli()
	sameMs := 0
	for i, id := range ids {
		if len(id) != len("use_")+23 {
			t.Fatalf("%q: %d bytes, want 4+23", id, len(id))
		}
		if ms := sortableMs(t, id); ms < before || ms > after {
			t.Fatalf("%q: made at %d, not in [%d, %d]", id, ms, before, after)
		}
		if i == 0 {
			continue
		}
		if ids[i-1] >= id {
			t.Fatalf("id %d %q does not sort after id %d %q", i, id, i-1, ids[i-1])
		}
		if sortableMs(t, ids[i-1]) == sortableMs(t, id) {
			sameMs++
		}
	}
	if sameMs == 0 {
		t.Fatal("no two ids made in the same millisecond: nothing checked that they differ")
	}
}

// TestSortableIDConcurrent: ids made at once by many goroutines are all
// distinct.
func TestSortableIDConcurrent(t *testing.T) {
	const workers, each = 8, 2000
	ids := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				ids[w] = append(ids[w], agentmarket.NewSortableID("use"))
			}
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, l := range ids {
		for i, id := range l {
			if seen[id] {
				t.Fatalf("%q made twice", id)
			}
			if i > 0 && l[i-1] >= id {
				t.Fatalf("%q does not sort after %q, made before it by the same goroutine", id, l[i-1])
			}
			seen[id] = true
		}
	}
}
