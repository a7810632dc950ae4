package scheduler

import (
	"sync"
	"time"
)

// LearnedPauseWindow bounds how long a worker's note of a pause it decided
// holds the other workers' sends back (learnedPauses): long enough to
// cover the gap between the answer and the tick that commits the pause
// (milliseconds) and the sends of claims made before that commit; after
// it the store's pause alone decides, so a person's resume of the scope,
// or another process's view, is never overruled for long.
const LearnedPauseWindow = 5 * time.Second

// learnedPauses are the scope pauses this engine's workers decided from
// answers, noted the moment they are decided, before their tick commits
// them: a worker about to send for a scope checks them, so that no
// request of this process leaves for a scope an answer just paused, even
// one leased before that answer was read (design §3 invariant 1, "no other
// worker sends a request known to be premature"). The store's pause keeps
// every later claim back; this closes the gap between an answer and its
// commit. An entry lasts until its pause ends or LearnedPauseWindow has
// passed, whichever is first; there is at most one per scope.
type learnedPauses struct {
	mu    sync.Mutex
	until map[string]time.Time // scope name → end of the hold
}

// note records, at now, that scope is paused until `until`: it holds the
// scope's sends back until min(until, now+LearnedPauseWindow), never
// shortening a hold noted before.
func (p *learnedPauses) note(scope string, until, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.until == nil {
		p.until = map[string]time.Time{}
	}
	end := minTime(until, now.Add(LearnedPauseWindow))
	if end.After(p.until[scope]) {
		p.until[scope] = end
	}
}

// heldUntil returns when scope's noted hold ends, if it lasts past now,
// and forgets a hold that has ended.
func (p *learnedPauses) heldUntil(scope string, now time.Time) (time.Time, bool) {
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
