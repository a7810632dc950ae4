package scheduler

import (
	"sync"
	"time"
)

// learnedPauses are the scope pauses this engine's workers decided from
// answers, noted the moment they are decided, before their tick commits
// them: a worker about to send for a scope checks them, so that no
// request of this process leaves for a scope an answer just paused, even
// one leased before that answer was read (design §3 invariant 1, "no other
// worker sends a request known to be premature"). The store's pause keeps
// every later claim back; this closes the gap between an answer and its
// commit. Entries end with their pause; there is at most one per scope.
type learnedPauses struct {
	mu    sync.Mutex
	until map[string]time.Time // scope name → end of the pause
}

// note records that scope is paused until `until` (never shortening a
// pause noted before).
func (p *learnedPauses) note(scope string, until time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.until == nil {
		p.until = map[string]time.Time{}
	}
	if until.After(p.until[scope]) {
		p.until[scope] = until
	}
}

// pausedUntil returns the end of scope's noted pause when it lasts past
// now, and forgets a pause that has ended.
func (p *learnedPauses) pausedUntil(scope string, now time.Time) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	until, ok := p.until[scope]
	if !ok {
		return time.Time{}, false
	}
	if !now.Before(until) {
		delete(p.until, scope)
		return time.Time{}, false
	}
	return until, true
}
