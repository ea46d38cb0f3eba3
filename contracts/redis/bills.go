package redis

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentmarket/agentmarket/metering"
)

// A task's bill is a hash under billKey: i, o, c the input tokens, output
// tokens and compute milliseconds billed so far, a when it was first
// billed ("" until then). It lives as long as its binding.
func (s *Store) billKey(listingID, taskID string) string {
	return s.prefix + "b:" + listingID + "|" + taskID
}

// raiseBillScript raises a task's bill: each counter becomes max(billed,
// cum) + add (metering.Counters.Raise), saturating at 2^53 - 1 (Lua's
// numbers are doubles; no task comes near). A task Redis holds no bill of
// is created only when ARGV[1] is 1 (the call bound the task just now);
// else the script answers {0}. Otherwise {1, old i, o, c, new i, o, c,
// first (1 when this is the task's first bill)}.
//
// ARGV: create, ttl ms, cum i o c, add i o c, at.
var raiseBillScript = goredis.NewScript(`
local k = KEYS[1]
if redis.call('EXISTS', k) == 0 and ARGV[1] ~= '1' then return {0} end
local v = redis.call('HMGET', k, 'i', 'o', 'c', 'a')
local top = 9007199254740991
local out = {1}
local new = {}
for j = 1, 3 do
  local old = tonumber(v[j] or '0') or 0
  local n = math.max(old, tonumber(ARGV[2 + j])) + tonumber(ARGV[5 + j])
  if n > top then n = top end
  out[1 + j] = old
  new[j] = n
  out[4 + j] = n
end
local first = 0
if not v[4] or v[4] == '' then first = 1 end
out[8] = first
local set = {'i', string.format('%.0f', new[1]), 'o', string.format('%.0f', new[2]), 'c', string.format('%.0f', new[3])}
if first == 1 then table.insert(set, 'a'); table.insert(set, ARGV[9]) end
redis.call('HSET', k, unpack(set))
redis.call('PEXPIRE', k, ARGV[2])
return out
`)

// RaiseBill raises the task's bill in Redis (the bill every meter of the
// deployment decides calls on) and returns it before and after, and
// whether this is the task's first bill. found is false, and nothing is
// written, when Redis holds no bill of the task and create is false: the
// task was never billed here (bound while Redis was away, or its bill
// expired), and its bills are the database's.
func (s *Store) RaiseBill(ctx context.Context, listingID, taskID string, create bool, cum, add metering.Counters, at time.Time) (old, total metering.Counters, first, found bool, err error) {
	if err := s.up(); err != nil {
		return old, total, false, false, err
	}
	c := "0"
	if create {
		c = "1"
	}
	vals, err := raiseBillScript.Run(ctx, s.c, []string{s.billKey(listingID, taskID)}, c, s.bindingTTL.Milliseconds(),
		cum.InputTokens, cum.OutputTokens, cum.ComputeMs, add.InputTokens, add.OutputTokens, add.ComputeMs, encTime(at)).Int64Slice()
	if err != nil {
		return old, total, false, false, s.failed(err)
	}
	if len(vals) == 0 || vals[0] == 0 {
		return old, total, false, false, nil
	}
	old = metering.Counters{InputTokens: vals[1], OutputTokens: vals[2], ComputeMs: vals[3]}
	total = metering.Counters{InputTokens: vals[4], OutputTokens: vals[5], ComputeMs: vals[6]}
	return old, total, vals[7] == 1, true, nil
}
