package contracts

import (
	"context"
	"sync"
	"time"
)

// SentFallback keeps the records of sent messages in the state the meters
// of a deployment share (Hot: Redis) and, while that fails, in the
// database (Durable), so that no send is refused or forgotten for an
// outage of the shared state. A record written to Durable during an
// outage is looked for there too (after a miss in Hot) until its window
// ends: a retry after the outage still finds the send made during it,
// through any meter that saw the outage too (a failure of Hot, read or
// write, makes a meter read Durable after a miss for Window).
//
// What it cannot give: a send claimed in Hot before an outage and ended
// during it stays in flight in Hot; a retry through another meter after
// the outage waits for it up to its hold, then is forwarded again.
type SentFallback struct {
	Hot, Durable SentMessages
	// OnFallback is told of each failure of Hot (op: "sent_find",
	// "sent_record"); nil: nothing.
	OnFallback func(op string, err error)
	// Window is how long after a failure of Hot a miss there is looked
	// for in Durable: the longest idempotency window a send may have.
	Window time.Duration

	mu sync.Mutex
	// durableUntil is when the last record written to Durable instead of
	// Hot stops counting (its window's end).
	durableUntil time.Time
}

var _ SentMessages = (*SentFallback)(nil)

// ClaimsAtOnce tells the meter that the store is shared state, written on
// the call path: a send claims its messageId before it is forwarded.
func (f *SentFallback) ClaimsAtOnce() {}

func (f *SentFallback) fellBack(op string, err error, now time.Time) {
	if f.OnFallback != nil {
		f.OnFallback(op, err)
	}
	f.readDurableUntil(now.Add(f.Window))
}

func (f *SentFallback) readDurableUntil(t time.Time) {
	f.mu.Lock()
	if t.After(f.durableUntil) {
		f.durableUntil = t
	}
	f.mu.Unlock()
}

func (f *SentFallback) readDurable(now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return now.Before(f.durableUntil)
}

// FindSent reads Hot; keys Hot does not hold are read in Durable while
// records written there may still count.
func (f *SentFallback) FindSent(ctx context.Context, keys []SentKey, now time.Time) ([]*SentMessage, error) {
	recs, err := f.Hot.FindSent(ctx, keys, now)
	if err != nil {
		f.fellBack("sent_find", err, now)
		return f.Durable.FindSent(ctx, keys, now)
	}
	if !f.readDurable(now) {
		return recs, nil
	}
	var missing []SentKey
	var at []int
	for i, r := range recs {
		if r == nil {
			missing, at = append(missing, keys[i]), append(at, i)
		}
	}
	if len(missing) == 0 {
		return recs, nil
	}
	more, err := f.Durable.FindSent(ctx, missing, now)
	if err != nil {
		return nil, err
	}
	for j, r := range more {
		recs[at[j]] = r
	}
	return recs, nil
}

// RecordSent writes to Hot, or to Durable when Hot fails.
func (f *SentFallback) RecordSent(ctx context.Context, recs []SentMessage, now time.Time) ([]bool, error) {
	applied, err := f.Hot.RecordSent(ctx, recs, now)
	if err == nil {
		return applied, nil
	}
	f.fellBack("sent_record", err, now)
	applied, err = f.Durable.RecordSent(ctx, recs, now)
	if err != nil {
		return nil, err
	}
	for i := range recs {
		f.readDurableUntil(recs[i].ExpiresAt)
	}
	return applied, nil
}

// PruneSent prunes both.
func (f *SentFallback) PruneSent(ctx context.Context, before time.Time) (int64, error) {
	n, err := f.Hot.PruneSent(ctx, before)
	m, derr := f.Durable.PruneSent(ctx, before)
	if err == nil {
		err = derr
	}
	return n + m, err
}
