package a2aproxy

import (
	"context"
	"sync"
)

// Writes the store refused where nothing else would make them again (a
// task's pause or resume, a reuse mark, a listing's incident or lost-task
// count, a stall notification, delegated tasks' cancel requests, a push
// config sent inline) wait here for the task sweeper, which makes them
// (writeLater) until the store takes them. Each is idempotent or, failing
// that, one the store most likely did not apply when it answered an error.
// The writes of one task keep their order: while one waits, the task's
// later ones wait behind it (holds), so a resume is never written before
// its pause. They live in this meter's memory: a meter killed before the
// store answers loses them.

// maxLaterWrites bounds what waits; maxLaterAttempts is how often a write
// whose limit says so is tried before it is given up, with a line.
const (
	maxLaterWrites   = 10_000
	maxLaterAttempts = 100
)

type laterWrites struct {
	mu     sync.Mutex
	writes []*laterWrite
}

type laterWrite struct {
	what     string
	task     ownerKey // the task whose order it keeps; zero: none
	limit    int      // attempts before it is given up; 0: none
	write    func(ctx context.Context) error
	attempts int
	done     bool // written or given up: dropped by writeLater
}

// add keeps a write for the sweeper, behind those already waiting.
func (l *laterWrites) add(what string, task ownerKey, limit int, write func(ctx context.Context) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.writes) < maxLaterWrites {
		l.writes = append(l.writes, &laterWrite{what: what, task: task, limit: limit, write: write})
	}
}

// holds reports whether a write of the task waits.
func (l *laterWrites) holds(task ownerKey) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.writes {
		if w.task == task {
			return true
		}
	}
	return false
}

// writeLater makes the waiting writes, in order. One the store refuses again
// waits for the next sweep, and so do the later writes of its task. Writes
// stay listed while they are made, so that the call path queues a task's
// newer writes behind them.
func (p *Proxy) writeLater(ctx context.Context) {
	p.later.mu.Lock()
	writes := append([]*laterWrite(nil), p.later.writes...)
	p.later.mu.Unlock()
	if len(writes) == 0 {
		return
	}
	blocked := map[ownerKey]bool{}
	for _, w := range writes {
		if w.task != (ownerKey{}) && blocked[w.task] {
			continue
		}
		err := w.write(ctx)
		switch {
		case err == nil:
			w.done = true
		case w.limit > 0 && w.attempts+1 >= w.limit:
			w.done = true
			p.Logger.ErrorContext(ctx, w.what+" not recorded; given up", "attempts", w.attempts+1, "err", err)
		default:
			w.attempts++
			if w.task != (ownerKey{}) {
				blocked[w.task] = true
			}
			p.Logger.ErrorContext(ctx, w.what+" still not recorded; the next sweep retries", "err", err)
		}
	}
	p.later.mu.Lock()
	kept := p.later.writes[:0]
	for _, w := range p.later.writes {
		if !w.done {
			kept = append(kept, w)
		}
	}
	clear(p.later.writes[len(kept):])
	p.later.writes = kept
	p.later.mu.Unlock()
}
