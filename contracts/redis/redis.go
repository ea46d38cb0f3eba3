// Package redis keeps the hot state that the meters of one deployment
// share (AGENTMARKET_REDIS_URL) in Redis: the records of sent messages
// (contracts.SentMessages, idempotent sends) and the owners of tasks
// (contracts.TaskOwners), so that a task created through one meter is
// found for its owner on another at once, and a send retried through
// another meter is answered from the first, without a relational row per
// call. The relational database stays the durable projection (one row per
// task, written from the meters' spools); Redis holds what is hot, each key
// with a time to live.
//
// Every decision that two meters could race on is one Lua script, run
// atomically by the server: a claim of a messageId (written unless a live
// claim of another call holds it), a binding (SET NX semantics: the first
// owner stays), a reuse mark.
package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentmarket/agentmarket"
)

// Store is the shared hot state on one Redis server.
type Store struct {
	c      *goredis.Client
	prefix string
	// BindingTTL is how long a task's binding stays in Redis after it was
	// last written; past it, meters read the task's row in the database.
	bindingTTL time.Duration
}

// Options configure a Store.
type Options struct {
	// Prefix is put before every key (default "am:"), so several
	// deployments (or tests) may share a server.
	Prefix string
	// BindingTTL is how long a binding stays (default 7 days).
	BindingTTL time.Duration
}

// Open connects to the Redis server at url (redis://[user:pass@]host:port/db)
// and checks that it answers within timeout.
func Open(ctx context.Context, url string, timeout time.Duration, o Options) (*Store, error) {
	opt, err := goredis.ParseURL(url)
	if err != nil {
		return nil, agentmarket.Wrap(agentmarket.Invalid, "invalid_redis_url", err, "the Redis URL must look like redis://host:6379/0")
	}
	// A meter must never wait long on Redis: an answer it does not get in
	// time sends the call down the database path.
	opt.DialTimeout = min(opt.DialTimeout, time.Second)
	opt.ReadTimeout, opt.WriteTimeout = 500*time.Millisecond, 500*time.Millisecond
	opt.MaxRetries = 1
	c := goredis.NewClient(opt)
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redis at %s: %w", opt.Addr, err)
	}
	return New(c, o), nil
}

// New wraps a client.
func New(c *goredis.Client, o Options) *Store {
	if o.Prefix == "" {
		o.Prefix = "am:"
	}
	if o.BindingTTL <= 0 {
		o.BindingTTL = 7 * 24 * time.Hour
	}
	return &Store{c: c, prefix: o.Prefix, bindingTTL: o.BindingTTL}
}

// Close closes the client's connections.
func (s *Store) Close() error { return s.c.Close() }

// Ping checks that the server answers.
func (s *Store) Ping(ctx context.Context) error { return unavailable(s.c.Ping(ctx).Err()) }

// unavailable is how a failure of Redis reaches the meter: the kind it
// falls back on (the database path).
func unavailable(err error) error {
	if err == nil || errors.Is(err, goredis.Nil) {
		return err
	}
	var ae *agentmarket.Error
	if errors.As(err, &ae) {
		return err
	}
	return agentmarket.Wrap(agentmarket.Unavailable, "redis_unavailable", err, "the shared state (Redis) did not answer")
}

// Times are kept as decimal Unix nanoseconds ("" for none), which the
// scripts compare as strings of digits (ltTime): Lua's numbers are doubles
// and would round them.
func encTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

func decTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func decTimePtr(s string) *time.Time {
	if s == "" {
		return nil
	}
	t := decTime(s)
	return &t
}

// ltTime is the scripts' comparison of two encoded times: a < b. A
// missing time ("") is before every other.
const ltTime = `
local function lt(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
`
