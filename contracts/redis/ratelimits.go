package redis

import (
	"context"
	"errors"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Rate limits and session caps shared by the meters (a2aproxy.SharedRates,
// docs/limits.md). A holder ("k:key_1") keeps under rateKey:
//
//	…:1, …:2, …:t  per bucket (requests a second, a minute, tokens a
//	               minute) the time (ms) up to which it owes refill (a
//	               generic cell rate algorithm): full once that is past,
//	               empty when it is a whole window ahead
//	…:f            its calls in flight, a sorted set scored by the end of
//	               their lease
//
// Every decision is one script on the server's clock (TIME), so meters
// whose clocks differ count alike. The scripts name keys they derive from
// the holders' keys, which a single server (not a cluster) allows.
func (s *Store) rateKey(id string) string { return s.prefix + "rl:" + id }

// sessionKey is a conversation's hash: c its sends, m what they cost.
func (s *Store) sessionKey(id string) string { return s.prefix + "ss:" + id }

// sessionTTL is how long a conversation's counts live past its last call.
const sessionTTL = 24 * time.Hour

// takeRatesScript admits a call under every limit of every holder of KEYS
// at once, or under none. ARGV: the call's id, its lease (ms), then four
// limits per holder (per second, per minute, tokens per minute, in
// flight; 0: none). It answers {-1, 0, left…} when it admitted (left: per
// limit, what is left after the call, -1 where there is none), else {the
// 0-based index of the first limit that refused, the wait in ms}. It
// decides as a2aproxy's localRates does.
var takeRatesScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local windows = {1000, 60000}
local left, owed = {}, {}
for j = 1, #KEYS do
  local base = KEYS[j]
  for k = 1, 4 do
    local i = 4 * (j - 1) + k
    local lim = tonumber(ARGV[2 + i])
    left[i] = -1
    if lim > 0 then
      if k <= 2 then
        local w = windows[k]
        local step = w / lim
        owed[i] = math.max(tonumber(redis.call('GET', base .. ':' .. k) or '0') - now, 0)
        if owed[i] + step > w then
          return {i - 1, math.ceil(owed[i] + step - w)}
        end
        left[i] = math.floor((w - owed[i] - step) / step)
      elseif k == 3 then
        local o = math.max(tonumber(redis.call('GET', base .. ':t') or '0') - now, 0)
        if o >= 60000 then
          return {i - 1, math.ceil(o - 60000 + 1)}
        end
        left[i] = math.floor(lim * (60000 - o) / 60000)
      else
        redis.call('ZREMRANGEBYSCORE', base .. ':f', '-inf', now)
        local n = redis.call('ZCARD', base .. ':f')
        if n >= lim then
          return {i - 1, 1000}
        end
        left[i] = lim - n - 1
      end
    end
  end
end
for j = 1, #KEYS do
  local base = KEYS[j]
  for k = 1, 2 do
    local i = 4 * (j - 1) + k
    local lim = tonumber(ARGV[2 + i])
    if lim > 0 then
      local o = owed[i] + windows[k] / lim
      redis.call('SET', base .. ':' .. k, string.format('%.3f', now + o), 'PX', math.ceil(o) + 1000)
    end
  end
  if tonumber(ARGV[2 + 4 * j]) > 0 then
    redis.call('ZADD', base .. ':f', now + tonumber(ARGV[2]), ARGV[1])
    redis.call('PEXPIRE', base .. ':f', ARGV[2])
  end
end
local out = {-1, 0}
for i = 1, #left do out[2 + i] = left[i] end
return out
`)

// doneRatesScript ends a call under the holders of KEYS. ARGV: the call's
// id, the tokens it used, then per holder its tokens per minute and
// whether it limits calls in flight (1/0).
var doneRatesScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tokens = tonumber(ARGV[2])
for j = 1, #KEYS do
  local base = KEYS[j]
  local tpm = tonumber(ARGV[1 + 2 * j])
  if tpm > 0 and tokens > 0 then
    local owed = math.max(tonumber(redis.call('GET', base .. ':t') or '0'), now) + tokens * 60000 / tpm
    redis.call('SET', base .. ':t', string.format('%.3f', owed), 'PX', math.ceil(owed - now) + 1000)
  end
  if ARGV[2 + 2 * j] == '1' then
    redis.call('ZREM', base .. ':f', ARGV[1])
  end
end
return 1
`)

// TakeRates implements a2aproxy.SharedRates.
func (s *Store) TakeRates(ctx context.Context, callID string, ids []string, limits []int64, lease time.Duration) (int, time.Duration, []int64, error) {
	if err := s.up(); err != nil {
		return 0, 0, nil, err
	}
	keys := make([]string, len(ids))
	args := make([]any, 0, 2+len(limits))
	args = append(args, callID, lease.Milliseconds())
	for i, id := range ids {
		keys[i] = s.rateKey(id)
	}
	for _, l := range limits {
		args = append(args, min(l, maxLua))
	}
	vals, err := takeRatesScript.Run(ctx, s.c, keys, args...).Int64Slice()
	if err != nil {
		return 0, 0, nil, s.failed(err)
	}
	if len(vals) < 2 {
		return 0, 0, nil, s.failed(errShortAnswer)
	}
	if vals[0] >= 0 {
		return int(vals[0]), time.Duration(vals[1]) * time.Millisecond, nil, nil
	}
	return -1, 0, vals[2:], nil
}

// DoneRates implements a2aproxy.SharedRates.
func (s *Store) DoneRates(ctx context.Context, callID string, ids []string, limits []int64, tokens int64) error {
	if err := s.up(); err != nil {
		return err
	}
	keys := make([]string, len(ids))
	args := make([]any, 0, 2+2*len(ids))
	args = append(args, callID, min(tokens, maxLua))
	for j, id := range ids {
		keys[j] = s.rateKey(id)
		inFlight := 0
		if limits[4*j+3] > 0 {
			inFlight = 1
		}
		args = append(args, min(limits[4*j+2], maxLua), inFlight)
	}
	return s.failed(doneRatesScript.Run(ctx, s.c, keys, args...).Err())
}

// takeSessionScript checks a conversation under its caps. ARGV: max
// calls, max micros (0: none), whether to count a send (1/0), the ttl in
// ms. It answers {refused (-1, 0 for calls, 1 for spend), calls, micros}.
var takeSessionScript = goredis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'c', 'm')
local c, m = tonumber(v[1] or '0') or 0, tonumber(v[2] or '0') or 0
local maxCalls, maxMicros = tonumber(ARGV[1]), tonumber(ARGV[2])
if maxCalls > 0 and c >= maxCalls then return {0, c, m} end
if maxMicros > 0 and m >= maxMicros then return {1, c, m} end
if ARGV[3] == '1' then
  c = redis.call('HINCRBY', KEYS[1], 'c', 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
return {-1, c, m}
`)

// TakeSession implements a2aproxy.SharedRates.
func (s *Store) TakeSession(ctx context.Context, id string, maxCalls, maxMicros int64, count bool) (int, int64, int64, error) {
	if err := s.up(); err != nil {
		return 0, 0, 0, err
	}
	c := 0
	if count {
		c = 1
	}
	vals, err := takeSessionScript.Run(ctx, s.c, []string{s.sessionKey(id)}, min(maxCalls, maxLua), min(maxMicros, maxLua), c, sessionTTL.Milliseconds()).Int64Slice()
	if err != nil {
		return 0, 0, 0, s.failed(err)
	}
	if len(vals) != 3 {
		return 0, 0, 0, s.failed(errShortAnswer)
	}
	return int(vals[0]), vals[1], vals[2], nil
}

// AddSession implements a2aproxy.SharedRates.
func (s *Store) AddSession(ctx context.Context, id string, calls, micros int64) error {
	if err := s.up(); err != nil {
		return err
	}
	key := s.sessionKey(id)
	_, err := s.c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.HIncrBy(ctx, key, "c", calls)
		p.HIncrBy(ctx, key, "m", min(micros, maxLua))
		p.PExpire(ctx, key, sessionTTL)
		return nil
	})
	return s.failed(err)
}

// errShortAnswer is a script's answer of an unexpected shape.
var errShortAnswer = errors.New("redis: a rate script answered an unexpected shape")
