package redis

import (
	"context"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentmarket/agentmarket/contracts"
)

var _ contracts.AttemptStore = (*Store)(nil)

// Failed attempts (contracts.Throttle) are a hash under attemptsKey: n the
// count, l the last failure (Unix ns); it expires ttl after the last.
func (s *Store) attemptsKey(key string) string { return s.prefix + "t:" + key }

var addFailureScript = goredis.NewScript(`
local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
redis.call('HSET', KEYS[1], 'l', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return n
`)

// AddFailure counts a failure of key at now, kept for ttl after it.
func (s *Store) AddFailure(ctx context.Context, key string, now time.Time, ttl time.Duration) (int64, error) {
	if err := s.up(); err != nil {
		return 0, err
	}
	n, err := addFailureScript.Run(ctx, s.c, []string{s.attemptsKey(key)}, encTime(now), max(ttl.Milliseconds(), 1)).Int64()
	if err != nil {
		return 0, s.failed(err)
	}
	return n, nil
}

// Failures returns key's count and its last failure.
func (s *Store) Failures(ctx context.Context, key string) (int64, time.Time, error) {
	if err := s.up(); err != nil {
		return 0, time.Time{}, err
	}
	v, err := s.c.HMGet(ctx, s.attemptsKey(key), "n", "l").Result()
	if err != nil {
		return 0, time.Time{}, s.failed(err)
	}
	ns, _ := v[0].(string)
	ls, _ := v[1].(string)
	n, _ := strconv.ParseInt(ns, 10, 64)
	return n, decTime(ls), nil
}

// ResetFailures forgets key's failures.
func (s *Store) ResetFailures(ctx context.Context, key string) error {
	if err := s.up(); err != nil {
		return err
	}
	return s.failed(s.c.Del(ctx, s.attemptsKey(key)).Err())
}
