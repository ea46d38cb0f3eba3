package redis

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// A budget's month is a hash under budgetKey: s what was spent (at least
// the usage store's figure the meters last passed), r what the calls in
// flight hold. The meter names the budget and its month in id (e.g.
// "k:key_1|2026-12"). It lives budgetTTL past its last write.
func (s *Store) budgetKey(id string) string { return s.prefix + "g:" + id }

// budgetTTL outlives a month: a budget's hash is not needed past it.
const budgetTTL = 40 * 24 * time.Hour

// maxLua is the largest integer Lua's doubles hold exactly: the scripts'
// amounts are clamped to it (no real budget comes near: they are bounded
// by agentmarket.MaxBudgetMicros, 10^15).
const maxLua = 1<<53 - 1

// reserveBudgetsScript takes a reservation of ARGV[1] under every budget
// of KEYS at once, or under none: for each, spent (raised to its floor)
// plus held plus the amount must fit within its limit (an amount of 0:
// spent plus held must stay below it). It answers {1} when it reserved,
// else {0, the 1-based index of the first budget that cannot take it,
// its spent, its held}.
//
// ARGV: amount, ttl ms, then per key: limit, floor.
var reserveBudgetsScript = goredis.NewScript(`
local amount = tonumber(ARGV[1])
local spent, held = {}, {}
for j = 1, #KEYS do
  local limit, floor = tonumber(ARGV[1 + 2*j]), tonumber(ARGV[2 + 2*j])
  local v = redis.call('HMGET', KEYS[j], 's', 'r')
  spent[j] = math.max(tonumber(v[1] or '0') or 0, floor)
  held[j] = tonumber(v[2] or '0') or 0
  if spent[j] + held[j] + amount > limit or (amount == 0 and spent[j] + held[j] >= limit) then
    return {0, j, spent[j], held[j]}
  end
end
for j = 1, #KEYS do
  redis.call('HSET', KEYS[j], 's', string.format('%.0f', spent[j]), 'r', string.format('%.0f', held[j] + amount))
  redis.call('PEXPIRE', KEYS[j], ARGV[2])
end
return {1}
`)

// settleBudgetsScript ends a reservation of ARGV[1] under every budget of
// KEYS, adding ARGV[2] to what each spent.
var settleBudgetsScript = goredis.NewScript(`
for j = 1, #KEYS do
  local v = redis.call('HMGET', KEYS[j], 's', 'r')
  local held = math.max((tonumber(v[2] or '0') or 0) - tonumber(ARGV[1]), 0)
  local spent = math.min((tonumber(v[1] or '0') or 0) + tonumber(ARGV[2]), 9007199254740991)
  redis.call('HSET', KEYS[j], 's', string.format('%.0f', spent), 'r', string.format('%.0f', held))
  redis.call('PEXPIRE', KEYS[j], ARGV[3])
end
return 1
`)

// ReserveBudgets holds amount under every budget of ids (with their
// limits, and floors: the usage store's figure of each), atomically across
// the meters that share the server: all or none. refused is -1 when it
// reserved, else the index of the first budget that cannot take it, with
// what it spent and what calls in flight hold there.
func (s *Store) ReserveBudgets(ctx context.Context, ids []string, limits, floors []int64, amount int64) (refused int, spent, held int64, err error) {
	if err := s.up(); err != nil {
		return 0, 0, 0, err
	}
	keys := make([]string, len(ids))
	args := make([]any, 0, 2+2*len(ids))
	args = append(args, min(amount, maxLua), budgetTTL.Milliseconds())
	for i, id := range ids {
		keys[i] = s.budgetKey(id)
		args = append(args, min(limits[i], maxLua), min(floors[i], maxLua))
	}
	vals, err := reserveBudgetsScript.Run(ctx, s.c, keys, args...).Int64Slice()
	if err != nil {
		return 0, 0, 0, s.failed(err)
	}
	if len(vals) == 4 && vals[0] == 0 {
		return int(vals[1]) - 1, vals[2], vals[3], nil
	}
	return -1, 0, 0, nil
}

// SettleBudgets ends a reservation of amount under every budget of ids,
// adding cost to what each spent.
func (s *Store) SettleBudgets(ctx context.Context, ids []string, amount, cost int64) error {
	if err := s.up(); err != nil {
		return err
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.budgetKey(id)
	}
	return s.failed(settleBudgetsScript.Run(ctx, s.c, keys, min(amount, maxLua), min(cost, maxLua), budgetTTL.Milliseconds()).Err())
}
