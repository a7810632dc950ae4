package scheduler

import "time"

// Echoes lists the spellings in which a provider might echo v, each
// written by a standard encoder.
var Echoes = echoes

// TestSecret has every character an encoder treats specially.
const TestSecret = testSecret

// PendingAttempts counts the decided attempts no tick has committed yet.
func (e *Engine) PendingAttempts() int { return e.pendingAttempts() }

// PendingEnqueues is how many Enqueue calls wait to be taken into a group
// commit.
func (s *Service) PendingEnqueues() int {
	s.enqueues.mu.Lock()
	defer s.enqueues.mu.Unlock()
	return len(s.enqueues.pending)
}

// SleepsUntil is when Run's sleep ends; zero while a pass runs.
func (e *Engine) SleepsUntil() time.Time {
	if ns := e.sleepsUntil.Load(); ns != 0 {
		return time.Unix(0, ns).UTC()
	}
	return time.Time{}
}

// NotePause notes a scope pause as a worker does the moment it decides one
// from an answer, before its tick commits it.
func (e *Engine) NotePause(scope string, until, now time.Time) { e.pauses.note(scope, until, now) }

// LearnedPause is when the hold of the pause the engine's workers decided
// for scope ends, if it lasts past now.
func (e *Engine) LearnedPause(scope string, now time.Time) (time.Time, bool) {
	return e.pauses.heldUntil(scope, now)
}
