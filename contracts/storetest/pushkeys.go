package storetest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

func pushKey(gen int64, created time.Time) contracts.PushKey {
	return contracts.PushKey{ID: fmt.Sprintf("kid-%d", gen), Generation: gen, Algorithm: "ES256",
		Public: []byte{0x30, byte(gen), 0, 255}, Sealed: []byte{1, byte(gen), 0, 254, 'x'}, CreatedAt: created, ActiveAt: created.Add(time.Hour)}
}

func showKey(k contracts.PushKey) string {
	return fmt.Sprintf("%s gen=%d alg=%s public=%x sealed=%x created=%s active=%s", k.ID, k.Generation, k.Algorithm, k.Public, k.Sealed,
		ts(k.CreatedAt), ts(k.ActiveAt))
}

func keyGenerations(ks []contracts.PushKey) []int64 {
	out := []int64{}
	for _, k := range ks {
		out = append(out, k.Generation)
	}
	return out
}

// RunPushKeys runs the contract suite of the push signing key store;
// newStore must return a fresh, empty store each time it is called.
func RunPushKeys(t *testing.T, newStore func(t *testing.T) contracts.PushKeyStore) {
	ctx := context.Background()

	t.Run("add, read back newest first, in UTC", func(t *testing.T) {
		s := newStore(t)
		if ks, err := s.PushKeys(ctx); err != nil || len(ks) != 0 {
			t.Fatalf("PushKeys of an empty store = %v, %v", ks, err)
		}
		k1, k2 := pushKey(1, t0), pushKey(2, t0.Add(24*time.Hour))
		for _, k := range []contracts.PushKey{k1, k2} {
			ok, err := s.AddPushKey(ctx, k)
			wantBool(t, fmt.Sprintf("AddPushKey(generation %d)", k.Generation), ok, err, true)
		}
		ks, err := s.PushKeys(ctx)
		must(t, err)
		if len(ks) != 2 {
			t.Fatalf("PushKeys = %v, want generations 2, 1", keyGenerations(ks))
		}
		for i, want := range []contracts.PushKey{k2, k1} {
			want.CreatedAt, want.ActiveAt = want.CreatedAt.UTC(), want.ActiveAt.UTC()
			if g, w := showKey(ks[i]), showKey(want); g != w {
				t.Errorf("PushKeys[%d] =\n  %s\nwant\n  %s", i, g, w)
			}
		}
	})

	t.Run("a generation is taken once: the second key of it is not stored", func(t *testing.T) {
		s := newStore(t)
		first := pushKey(1, t0)
		ok, err := s.AddPushKey(ctx, first)
		wantBool(t, "AddPushKey", ok, err, true)
		other := pushKey(1, t0.Add(time.Minute))
		other.ID, other.Sealed = "kid-other", []byte("other")
		ok, err = s.AddPushKey(ctx, other)
		wantBool(t, "AddPushKey of a generation taken", ok, err, false)
		ks, err := s.PushKeys(ctx)
		must(t, err)
		if len(ks) != 1 || ks[0].ID != first.ID || !bytes.Equal(ks[0].Sealed, first.Sealed) {
			t.Errorf("PushKeys after a lost race = %v, want the first key alone", ks)
		}
		// A key ID another generation holds is a conflict, not a lost race.
		dup := pushKey(2, t0)
		dup.ID = first.ID
		_, err = s.AddPushKey(ctx, dup)
		wantKind(t, "AddPushKey with a key ID taken", err, agentmarket.Conflict)
	})

	t.Run("processes rotating at once make one key of a generation", func(t *testing.T) {
		s := newStore(t)
		const racers = 8
		var (
			wg  sync.WaitGroup
			mu  sync.Mutex
			won []string
		)
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k := pushKey(1, t0)
				k.ID = fmt.Sprintf("kid-racer-%d", i)
				ok, err := s.AddPushKey(ctx, k)
				if err != nil {
					t.Errorf("racer %d: %v", i, err)
					return
				}
				if ok {
					mu.Lock()
					won = append(won, k.ID)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		ks, err := s.PushKeys(ctx)
		must(t, err)
		if len(won) != 1 || len(ks) != 1 || ks[0].ID != won[0] {
			t.Errorf("%d racers reported storing generation 1 (%v); the store holds %v", len(won), won, ks)
		}
	})

	t.Run("delete the generations below one", func(t *testing.T) {
		s := newStore(t)
		for g := int64(1); g <= 4; g++ {
			ok, err := s.AddPushKey(ctx, pushKey(g, t0.Add(time.Duration(g)*time.Hour)))
			wantBool(t, "AddPushKey", ok, err, true)
		}
		n, err := s.DeletePushKeys(ctx, 3)
		must(t, err)
		ks, err := s.PushKeys(ctx)
		must(t, err)
		if n != 2 || fmt.Sprint(keyGenerations(ks)) != "[4 3]" {
			t.Errorf("DeletePushKeys(below 3) = %d, left %v; want 2 deleted, [4 3] left", n, keyGenerations(ks))
		}
		if n, err := s.DeletePushKeys(ctx, 3); err != nil || n != 0 {
			t.Errorf("DeletePushKeys again = %d, %v; want 0", n, err)
		}
		ok, err := s.AddPushKey(ctx, pushKey(5, t0.Add(5*time.Hour)))
		wantBool(t, "AddPushKey of the next generation after a delete", ok, err, true)
	})
}
