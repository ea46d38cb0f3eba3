package redis

import (
	"context"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentmarket/agentmarket/contracts"
)

var _ contracts.SentMessages = (*Store)(nil)

// A sent message is a hash under sentKey: c contract, d digest, k claim,
// s stage, t task, x context, st state, r result (absent for none), rv its
// version, ca claimed at, hu held until, ea expires at. It lives until a
// little after its window (ExpiresAt).
func (s *Store) sentKey(k contracts.SentKey) string {
	// Listing and org ids hold no '|'; the messageId, last, may.
	return s.prefix + "s:" + k.ListingID + "|" + k.OrgID + "|" + k.MessageID
}

// sentLinger is how long past its window a record stays in Redis: a
// lookup then finds it expired (nil) rather than missing, either way free.
const sentLinger = time.Minute

// recordSentScript writes one record the way contracts.SentMessages says
// (the same rule as contracts/sentlog's merge): whole when the key holds
// none or a replaceable one; forward only when it is the same claim's;
// not at all over another claim's live record. It returns 1 when written.
//
// ARGV: now, ttl ms, claim, stage, task, context, state, has result (0/1),
// result, result version, contract, digest, claimed at, held until,
// expires at.
var recordSentScript = goredis.NewScript(ltTime + `
local k = KEYS[1]
local now = ARGV[1]
local claim, stage = ARGV[3], tonumber(ARGV[4])
local old = redis.call('HMGET', k, 'k', 's', 't', 'hu', 'ea')
if old[1] then
  local ostage = tonumber(old[2])
  if old[1] == claim then
    local fwd = stage >= ostage
    local set = {'c', ARGV[11], 'd', ARGV[12], 'ca', ARGV[13], 'ea', ARGV[15]}
    if fwd then
      table.insert(set, 's'); table.insert(set, ARGV[4])
      table.insert(set, 'hu'); table.insert(set, ARGV[14])
    end
    if ARGV[5] ~= '' then table.insert(set, 't'); table.insert(set, ARGV[5]) end
    if ARGV[6] ~= '' then table.insert(set, 'x'); table.insert(set, ARGV[6]) end
    if fwd and ARGV[7] ~= '' then table.insert(set, 'st'); table.insert(set, ARGV[7]) end
    if fwd and ARGV[8] == '1' then
      table.insert(set, 'r'); table.insert(set, ARGV[9])
      table.insert(set, 'rv'); table.insert(set, ARGV[10])
    end
    redis.call('HSET', k, unpack(set))
    redis.call('PEXPIRE', k, ARGV[2])
    return 1
  end
  local replaceable = (not lt(now, old[5])) or ostage == 3 or (ostage == 0 and old[3] == '' and not lt(now, old[4]))
  if not replaceable then return 0 end
  redis.call('DEL', k)
end
local set = {'k', claim, 's', ARGV[4], 't', ARGV[5], 'x', ARGV[6], 'st', ARGV[7], 'c', ARGV[11], 'd', ARGV[12],
  'ca', ARGV[13], 'hu', ARGV[14], 'ea', ARGV[15]}
if ARGV[8] == '1' then
  table.insert(set, 'r'); table.insert(set, ARGV[9])
  table.insert(set, 'rv'); table.insert(set, ARGV[10])
end
redis.call('HSET', k, unpack(set))
redis.call('PEXPIRE', k, ARGV[2])
return 1
`)

// RecordSent writes the records in one pipeline, each atomically, in
// order (several records of one key apply one after the other).
func (s *Store) RecordSent(ctx context.Context, recs []contracts.SentMessage, now time.Time) ([]bool, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	if err := s.up(); err != nil {
		return nil, err
	}
	applied, err := s.recordSent(ctx, recs, now)
	if s.noScript(err) {
		applied, err = s.recordSent(ctx, recs, now)
	}
	if err != nil {
		return nil, s.failed(err)
	}
	return applied, nil
}

func (s *Store) recordSent(ctx context.Context, recs []contracts.SentMessage, now time.Time) ([]bool, error) {
	if err := s.loadScripts(ctx); err != nil {
		return nil, err
	}
	cmds := make([]*goredis.Cmd, len(recs))
	_, err := s.c.Pipelined(ctx, func(pl goredis.Pipeliner) error {
		for i := range recs {
			r := &recs[i]
			ttl := max(r.ExpiresAt.Sub(now)+sentLinger, sentLinger)
			has, result := "0", ""
			if r.Result != nil {
				has, result = "1", string(r.Result)
			}
			cmds[i] = recordSentScript.EvalSha(ctx, pl, []string{s.sentKey(r.SentKey)},
				encTime(now), ttl.Milliseconds(), r.ClaimID, int(r.Stage), r.TaskID, r.ContextID, r.State, has, result, r.ResultVersion,
				r.ContractID, r.Digest, encTime(r.ClaimedAt), encTime(r.HeldUntil), encTime(r.ExpiresAt))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	applied := make([]bool, len(recs))
	for i, c := range cmds {
		n, err := c.Int()
		if err != nil {
			return nil, err
		}
		applied[i] = n == 1
	}
	return applied, nil
}

// FindSent reads the keys' records in one pipeline.
func (s *Store) FindSent(ctx context.Context, keys []contracts.SentKey, now time.Time) ([]*contracts.SentMessage, error) {
	if err := s.up(); err != nil {
		return nil, err
	}
	cmds := make([]*goredis.MapStringStringCmd, len(keys))
	_, err := s.c.Pipelined(ctx, func(pl goredis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = pl.HGetAll(ctx, s.sentKey(k))
		}
		return nil
	})
	if err != nil {
		return nil, s.failed(err)
	}
	out := make([]*contracts.SentMessage, len(keys))
	for i, c := range cmds {
		h := c.Val()
		if len(h) == 0 {
			continue
		}
		m := decodeSent(keys[i], h)
		if !now.Before(m.ExpiresAt) || m.Stage == contracts.SentReleased {
			continue
		}
		out[i] = m
	}
	return out, nil
}

func decodeSent(k contracts.SentKey, h map[string]string) *contracts.SentMessage {
	stage, _ := strconv.Atoi(h["s"])
	m := &contracts.SentMessage{SentKey: k, ContractID: h["c"], Digest: h["d"], ClaimID: h["k"], Stage: contracts.SentStage(stage),
		TaskID: h["t"], ContextID: h["x"], State: h["st"], ClaimedAt: decTime(h["ca"]), HeldUntil: decTime(h["hu"]), ExpiresAt: decTime(h["ea"])}
	if r, ok := h["r"]; ok {
		m.Result, m.ResultVersion = []byte(r), h["rv"]
	}
	return m
}

// pruneSentScript deletes the keys given whose window ended before
// ARGV[1], and returns how many.
var pruneSentScript = goredis.NewScript(ltTime + `
local n = 0
for _, k in ipairs(KEYS) do
  local ea = redis.call('HGET', k, 'ea')
  if ea and lt(ea, ARGV[1]) then
    redis.call('DEL', k)
    n = n + 1
  end
end
return n
`)

// PruneSent deletes the records whose window ended before before. Redis
// expires them by itself a little after their window; this sweep takes
// those a meter's clock finds over first.
func (s *Store) PruneSent(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	it := s.c.Scan(ctx, 0, s.prefix+"s:*", 500).Iterator()
	keys := make([]string, 0, 500)
	flush := func() error {
		if len(keys) == 0 {
			return nil
		}
		got, err := pruneSentScript.Run(ctx, s.c, keys, encTime(before)).Int64()
		keys = keys[:0]
		n += got
		return err
	}
	for it.Next(ctx) {
		if keys = append(keys, it.Val()); len(keys) == cap(keys) {
			if err := flush(); err != nil {
				return n, s.failed(err)
			}
		}
	}
	if err := it.Err(); err != nil {
		return n, s.failed(err)
	}
	return n, s.failed(flush())
}
