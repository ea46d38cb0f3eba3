package pushverify

import (
	"crypto/sha256"
	"errors"
	"sync"
	"time"
)

// ErrReplayed: this very attempt (the same signature) was received
// before. A genuine retry of a delivery is signed anew: only a copy of a
// request comes twice with one signature.
var ErrReplayed = errors.New("the delivery attempt was received before (a replay)")

// Seen remembers what a webhook received, in memory, for a Verifier
// (Verifier.Seen):
//
//   - every attempt it accepted (its signature), for as long as the
//     signature is fresh (MaxSkew): an attempt presented again is refused
//     with ErrReplayed, and after that the signature is stale anyway;
//   - every delivery the webhook handled (its handler answered 2xx), for
//     Keep: a retry of it (a new attempt, after the meter missed the
//     answer) is acknowledged by Verifier.Handler without reaching the
//     handler again. A delivery whose handler failed is not remembered:
//     its retry is handled.
//
// One Seen per process. A webhook served by several processes keeps the
// same two sets in a store they share (a table with a unique key, or a
// Redis SET NX with a time to live), asking the same two questions.
type Seen struct {
	// Keep is how long a handled delivery is remembered; default 24
	// hours (the meter's retries of one delivery last well under an
	// hour by default; a failed delivery retried by hand comes later).
	Keep time.Duration

	mu       sync.Mutex
	attempts map[[32]byte]time.Time // signature hash → when it stops being fresh
	handled  map[string]time.Time   // delivery id → when it is forgotten
	swept    time.Time
}

// attempt records an accepted attempt until it goes stale; it reports
// false when it was recorded already (a replay).
func (s *Seen) attempt(signature string, staleAt, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(now)
	if s.attempts == nil {
		s.attempts = map[[32]byte]time.Time{}
	}
	k := sha256.Sum256([]byte(signature))
	if until, ok := s.attempts[k]; ok && now.Before(until) {
		return false
	}
	s.attempts[k] = staleAt
	return true
}

// Handled reports whether the webhook handled delivery id already.
func (s *Seen) Handled(id string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	until, ok := s.handled[id]
	return ok && now.Before(until)
}

// MarkHandled remembers that the webhook handled delivery id.
func (s *Seen) MarkHandled(id string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handled == nil {
		s.handled = map[string]time.Time{}
	}
	keep := s.Keep
	if keep <= 0 {
		keep = 24 * time.Hour
	}
	s.handled[id] = now.Add(keep)
}

// sweep forgets what has expired, at most once a minute.
func (s *Seen) sweep(now time.Time) {
	if now.Sub(s.swept) < time.Minute {
		return
	}
	s.swept = now
	for k, until := range s.attempts {
		if !now.Before(until) {
			delete(s.attempts, k)
		}
	}
	for k, until := range s.handled {
		if !now.Before(until) {
			delete(s.handled, k)
		}
	}
}
