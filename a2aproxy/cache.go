package a2aproxy

import (
	"sync"
	"time"

	"github.com/agentmarket/agentmarket"
)

// ttlCache keeps lookups (keys, listings, contracts) for a short time so the
// hot path does not query the database on every call. The TTL bounds how
// long a change (a revoked key, a canceled contract) can go unnoticed.
type ttlCache[V any] struct {
	mu    sync.RWMutex
	ttl   time.Duration
	now   func() time.Time
	items map[string]ttlItem[V]
	// stale is how long past its TTL a value still answers when loading it
	// again fails for want of the database (Unavailable, Internal): calls
	// go on with what the meter last knew while the database is down.
	stale time.Duration
}

type ttlItem[V any] struct {
	v       V
	err     error
	expires time.Time
}

func newTTLCache[V any](ttl time.Duration, now func() time.Time) *ttlCache[V] {
	return &ttlCache[V]{ttl: ttl, now: now, items: map[string]ttlItem[V]{}}
}

// staleFor lets the cache answer with a value up to d past its TTL while
// the database is unreachable.
func (c *ttlCache[V]) staleFor(d time.Duration) *ttlCache[V] {
	c.stale = d
	return c
}

// get returns the cached value of key, or loads it. Errors are cached too
// (an unknown key stays unknown for the TTL), except when retry says not.
func (c *ttlCache[V]) get(key string, load func() (V, error), cacheErr func(error) bool) (V, error) {
	if c.ttl <= 0 {
		return load()
	}
	now := c.now()
	c.mu.RLock()
	it, ok := c.items[key]
	c.mu.RUnlock()
	if ok && now.Before(it.expires) {
		return it.v, it.err
	}
	v, err := load()
	if err != nil && ok && it.err == nil && c.stale > 0 && now.Before(it.expires.Add(c.stale)) {
		if k := agentmarket.KindOf(err); k == agentmarket.Unavailable || k == agentmarket.Internal {
			return it.v, nil
		}
	}
	if err == nil || cacheErr(err) {
		c.mu.Lock()
		if len(c.items) > 100_000 { // a crude bound: drop everything rather than grow
			c.items = map[string]ttlItem[V]{}
		}
		c.items[key] = ttlItem[V]{v: v, err: err, expires: now.Add(c.ttl)}
		c.mu.Unlock()
	}
	return v, err
}

// last returns the value key last loaded without error and when it was
// loaded, expired or not: for callers that may fall back on a recent value
// when a load fails.
func (c *ttlCache[V]) last(key string) (V, time.Time, bool) {
	c.mu.RLock()
	it, ok := c.items[key]
	c.mu.RUnlock()
	if !ok || it.err != nil {
		var zero V
		return zero, time.Time{}, false
	}
	return it.v, it.expires.Add(-c.ttl), true
}
