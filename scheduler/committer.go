package scheduler

import (
	"context"
	"sync"
)

// committer group-commits completions: the first worker to arrive commits
// everything pending in one Store.Complete transaction, the others wait for
// its result. No goroutine of its own, so it works the same under Run and
// under a test's RunOnce.
type committer struct {
	store Store

	mu      sync.Mutex
	busy    bool
	pending []*pendingCompletion
}

type pendingCompletion struct {
	c       Completion
	applied bool
	err     error
	done    chan struct{}
}

// commit applies c (fenced) and reports whether it took effect.
func (m *committer) commit(ctx context.Context, c Completion) (bool, error) {
	p := &pendingCompletion{c: c, done: make(chan struct{})}
	m.mu.Lock()
	m.pending = append(m.pending, p)
	if m.busy {
		m.mu.Unlock()
		<-p.done
		return p.applied, p.err
	}
	m.busy = true
	for len(m.pending) > 0 {
		batch := m.pending
		m.pending = nil
		m.mu.Unlock()
		cs := make([]Completion, len(batch))
		for i, b := range batch {
			cs[i] = b.c
		}
		applied, err := m.store.Complete(ctx, cs)
		for i, b := range batch {
			if err == nil {
				b.applied = applied[i]
			}
			b.err = err
			close(b.done)
		}
		m.mu.Lock()
	}
	m.busy = false
	m.mu.Unlock()
	return p.applied, p.err
}
