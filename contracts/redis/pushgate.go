package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentmarket/agentmarket/contracts"
)

var _ contracts.PushGate = (*Store)(nil)

// A push destination's shared state is three keys: a sorted set of the
// deliveries in flight (score: their lease's end, ms), its rate's bucket
// (hash: t tokens, at ms), and its hold (the end of a hold, ms).
func (s *Store) gateKeys(dest string) []string {
	p := s.prefix + "pg:" + dest
	return []string{p + ":f", p + ":b", p + ":h"}
}

// tryStartScript: ARGV now, leaseUntil (ms), id, concurrency, per
// second, burst. Returns {ok, held, retryAt ms}.
var tryStartScript = goredis.NewScript(`
local now = tonumber(ARGV[1])
local hold = tonumber(redis.call('GET', KEYS[3]) or '0')
if hold > now then return {0, 1, hold} end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZSCORE', KEYS[1], ARGV[3]) then return {1, 0, 0} end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return {0, 0, 0} end
local rate, burst = tonumber(ARGV[5]), tonumber(ARGV[6])
local b = redis.call('HMGET', KEYS[2], 't', 'at')
local tokens, at = tonumber(b[1]), tonumber(b[2])
if tokens == nil or at == nil then tokens, at = burst, now end
if now > at then tokens = math.min(burst, tokens + (now - at) * rate / 1000) end
if tokens < 1 then return {0, 0, now + math.ceil((1 - tokens) * 1000 / rate)} end
redis.call('HSET', KEYS[2], 't', tostring(tokens - 1), 'at', tostring(math.max(now, at)))
redis.call('PEXPIRE', KEYS[2], math.ceil(burst * 1000 / rate) + 60000)
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], math.max(tonumber(ARGV[2]) - now, 0) + 60000)
return {1, 0, 0}
`)

// TryStart implements contracts.PushGate.
func (s *Store) TryStart(ctx context.Context, dest, id string, lim contracts.PushLimit, now, leaseUntil time.Time) (bool, bool, time.Time, error) {
	if err := s.up(); err != nil {
		return false, false, time.Time{}, err
	}
	v, err := tryStartScript.Run(ctx, s.c, s.gateKeys(dest), now.UnixMilli(), leaseUntil.UnixMilli(), id,
		max(lim.Concurrency, 1), strconv.FormatFloat(max(lim.PerSecond, 0.001), 'f', -1, 64), max(lim.Burst, 1)).Int64Slice()
	if err != nil {
		return false, false, time.Time{}, s.failed(err)
	}
	if len(v) != 3 {
		return false, false, time.Time{}, s.failed(fmt.Errorf("the push gate script answered %v", v))
	}
	var retryAt time.Time
	if v[2] > 0 {
		retryAt = time.UnixMilli(v[2])
	}
	return v[0] == 1, v[1] == 1, retryAt, nil
}

// Finish implements contracts.PushGate.
func (s *Store) Finish(ctx context.Context, dest, id string) error {
	if err := s.up(); err != nil {
		return err
	}
	return s.failed(s.c.ZRem(ctx, s.gateKeys(dest)[0], id).Err())
}

var holdScript = goredis.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return 1
`)

// Hold implements contracts.PushGate.
func (s *Store) Hold(ctx context.Context, dest string, until time.Time) error {
	if err := s.up(); err != nil {
		return err
	}
	ttl := max(time.Until(until), 0) + time.Hour // the meters' clocks may differ from this one
	return s.failed(holdScript.Run(ctx, s.c, []string{s.gateKeys(dest)[2]}, until.UnixMilli(), ttl.Milliseconds()).Err())
}
