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
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentmarket/agentmarket"
)

// Store is the shared hot state on one Redis server.
type Store struct {
	c *goredis.Client
	// downUntil (Unix nanoseconds) is when the server is tried again
	// after it failed: meanwhile every operation fails at once, so an
	// outage costs the meter's calls no waiting (they take the database
	// path).
	downUntil atomic.Int64
	// loaded: the scripts are in the server's cache (loadScripts); a
	// server restarted since has lost them (NOSCRIPT), and they are loaded
	// again.
	loaded atomic.Bool
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

// Open makes a store of the Redis server at url
// (redis://[user:pass@]host:port/db). It connects lazily: a server that is
// down now is tried again at each use (Ping tells).
func Open(url string, o Options) (*Store, error) {
	opt, err := goredis.ParseURL(url)
	if err != nil {
		return nil, agentmarket.Wrap(agentmarket.Invalid, "invalid_redis_url", err, "the Redis URL must look like redis://host:6379/0")
	}
	// A meter must never wait long on Redis: an answer it does not get in
	// time sends the call down the database path.
	opt.DialTimeout = min(opt.DialTimeout, time.Second)
	opt.ReadTimeout, opt.WriteTimeout = 500*time.Millisecond, 500*time.Millisecond
	opt.MaxRetries = 1
	opt.DialerRetries = 1
	opt.MinRetryBackoff, opt.MaxRetryBackoff = time.Millisecond, 10*time.Millisecond
	return New(goredis.NewClient(opt), o), nil
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
func (s *Store) Ping(ctx context.Context) error { return s.failed(s.c.Ping(ctx).Err()) }

// retryAfter is how long the store answers "unavailable" at once after
// the server failed.
const retryAfter = time.Second

var errDown = agentmarket.Errorf(agentmarket.Unavailable, "redis_unavailable", "the shared state (Redis) failed less than %s ago", retryAfter)

// up reports whether the server may be tried now.
func (s *Store) up() error {
	if time.Now().UnixNano() < s.downUntil.Load() {
		return errDown
	}
	return nil
}

// failed turns a failure of the server into the error the meter falls back
// on, and holds the server off for retryAfter.
func (s *Store) failed(err error) error {
	if err == errDown {
		return err // held off, not tried: the hold is not renewed
	}
	err = unavailable(err)
	if agentmarket.KindOf(err) == agentmarket.Unavailable {
		s.downUntil.Store(time.Now().Add(retryAfter).UnixNano())
	}
	return err
}

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

var scripts = []*goredis.Script{recordSentScript, bindScript}

// loadScripts puts the scripts run in pipelines (EvalSha) into the
// server's cache, once.
func (s *Store) loadScripts(ctx context.Context) error {
	if s.loaded.Load() {
		return nil
	}
	for _, sc := range scripts {
		if err := sc.Load(ctx, s.c).Err(); err != nil {
			return err
		}
	}
	s.loaded.Store(true)
	return nil
}

// noScript reports whether a pipeline failed for a script the server no
// longer holds (it restarted): they are loaded again, and the caller
// retries once.
func (s *Store) noScript(err error) bool {
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		s.loaded.Store(false)
		return true
	}
	return false
}
