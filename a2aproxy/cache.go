package a2aproxy

import (
	"sync"
	"time"
)

// ttlCache keeps lookups (keys, listings, contracts) for a short time so the
// hot path does not query the database on every call. The TTL bounds how
// long a change (a revoked key, a canceled contract) can go unnoticed.
type ttlCache[V any] struct {
	mu    sync.RWMutex
	ttl   time.Duration
	now   func() time.Time
	items map[string]ttlItem[V]
}

type ttlItem[V any] struct {
	v       V
	err     error
	expires time.Time
}

func newTTLCache[V any](ttl time.Duration, now func() time.Time) *ttlCache[V] {
	return &ttlCache[V]{ttl: ttl, now: now, items: map[string]ttlItem[V]{}}
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
