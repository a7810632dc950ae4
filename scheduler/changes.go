package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Bounds of the change feed (GET /v1/changes).
const (
	// DefaultChangeLimit is the page size when a query gives none.
	DefaultChangeLimit = 100
	// MaxChangeLimit bounds one page of changes.
	MaxChangeLimit = 1000
	// MaxChangeScan bounds the changes one read of a scope's feed
	// examines (Store.ListChanges): a read of a quiet scope behind many
	// changes of others passes over at most this many and answers with
	// where it stopped.
	MaxChangeScan = 4096
	// MaxChangeWait caps how long one long-poll waits; longer waits are
	// shortened to it.
	MaxChangeWait = 60 * time.Second
	// ChangePollInterval is how often a waiting long-poll looks at the
	// store even without a notification, so a change whose notification
	// was lost (another process's commit) is still delivered within about
	// this long.
	ChangePollInterval = time.Second
)

// Change is one state change of one operation, as the feed shows it. Seq
// orders the feed: it grows with every change committed and is never
// reused, even after old changes are pruned.
type Change struct {
	Seq         int64
	OperationID string
	Scope       string
	// State is the state the operation entered.
	State State
	// At is the operation's update time of the change.
	At time.Time
}

// Errors of a change feed cursor that cannot continue (FeedGapError wraps
// one of them).
var (
	// ErrFeedPruned: changes after the cursor were removed by retention, so
	// reading on would silently skip them.
	ErrFeedPruned = errors.New("changes after the cursor were pruned")
	// ErrFeedAhead: the cursor lies beyond the newest change the database
	// ever recorded (it was restored from an older backup, or the cursor
	// belongs to another database), so reading on would skip the changes
	// that reuse those numbers.
	ErrFeedAhead = errors.New("the cursor is ahead of the change feed")
)

// FeedGapError says why the feed cannot continue after After, and where a
// reader that has re-read the state (GET /v1/operations) may resume.
type FeedGapError struct {
	// Err is ErrFeedPruned or ErrFeedAhead.
	Err error
	// After is the reader's cursor.
	After int64
	// Resume is the cursor to follow from after re-reading the state.
	Resume int64
}

// Error implements error; it says what happened and what to do, for a
// reader of the feed.
func (e *FeedGapError) Error() string {
	if errors.Is(e.Err, ErrFeedAhead) {
		return fmt.Sprintf("after=%d is ahead of the change feed, whose newest change is %d: the database was restored from an older backup, or the cursor is from another pacer; re-read the operations (GET /v1/operations), then follow from after=%d", e.After, e.Resume, e.Resume)
	}
	return fmt.Sprintf("the changes after %d were pruned by retention (the feed holds them from %d on): re-read the operations (GET /v1/operations), then follow from after=%d", e.After, e.Resume+1, e.Resume)
}

// Unwrap returns Err.
func (e *FeedGapError) Unwrap() error { return e.Err }

// CheckFeedCursor is the one rule for a change feed cursor: given the
// oldest change still held (0 when none is) and the newest seq ever
// recorded (0 when none was), it returns a *FeedGapError when changes
// after `after` are gone or after lies ahead of the feed, else nil. After
// 0 means "from the oldest change held" and is always acceptable.
func CheckFeedCursor(after, oldest, last int64) error {
	switch {
	case after > last:
		return &FeedGapError{Err: ErrFeedAhead, After: after, Resume: last}
	case after == 0:
		return nil
	case oldest == 0 && after < last:
		// Everything after the cursor is gone.
		return &FeedGapError{Err: ErrFeedPruned, After: after, Resume: last}
	case oldest > after+1:
		// The oldest held lies past the next one the reader needs.
		return &FeedGapError{Err: ErrFeedPruned, After: after, Resume: oldest - 1}
	}
	return nil
}

// ChangeFilter selects changes for Store.ListChanges.
type ChangeFilter struct {
	// After excludes changes with Seq <= After; 0 starts at the oldest
	// change held.
	After int64
	// Scope keeps the changes of one scope; empty for all.
	Scope string
	// Limit bounds the result (1..MaxChangeLimit).
	Limit int
}

// ChangeBatch is one read of the change feed (Store.ListChanges).
type ChangeBatch struct {
	// Changes are in Seq order.
	Changes []Change
	// Next is the After of the following read: the Seq of the last change
	// the read examined, whether it returned it or passed over it (another
	// scope's, in a read of one scope), or the read's After when it
	// examined none. Every change of the filter up to Next was returned.
	Next int64
	// More says the read stopped at a bound (Limit changes returned, or
	// MaxChangeScan examined) and the feed may go on after Next: the
	// following read need not wait for a commit.
	More bool
}

// ChangeQuery is one long-poll of the change feed.
type ChangeQuery struct {
	ChangeFilter
	// Wait is how long to wait for a change when none follows After: 0
	// answers at once; longer than MaxChangeWait waits MaxChangeWait.
	Wait time.Duration
}

// ChangePage is one answer of the change feed.
type ChangePage struct {
	// Changes are in Seq order; empty when the wait ended without any.
	Changes []Change
	// Next is the After of the following query: the Seq of the last change
	// examined (ChangeBatch.Next), which for a query of one scope may lie
	// past the last change returned, or past the query's After on a page
	// with none; the query's After when nothing was examined.
	Next int64
}

// Notifier tells long-polls that changes may have committed. Notify wakes
// every waiter at once; a waiter takes Changed before it reads the store,
// so a change committed after its read still wakes it. Close ends every
// wait for good (server shutdown). The zero value is not usable; use
// NewNotifier. It is safe for concurrent use.
type Notifier struct {
	mu     sync.Mutex
	ch     chan struct{}
	done   chan struct{}
	closed bool
}

// NewNotifier returns an open Notifier.
func NewNotifier() *Notifier {
	return &Notifier{ch: make(chan struct{}), done: make(chan struct{})}
}

// Notify wakes everyone waiting on a channel returned by Changed. It never
// blocks.
func (n *Notifier) Notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	close(n.ch)
	n.ch = make(chan struct{})
}

// Changed returns a channel that is closed at the next Notify or Close.
func (n *Notifier) Changed() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

// Done returns a channel that is closed once Close has been called.
func (n *Notifier) Done() <-chan struct{} { return n.done }

// Close ends every wait in progress and makes later ones return at once.
// It is idempotent.
func (n *Notifier) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.closed = true
	close(n.ch)
	close(n.done)
}

// Notifier returns the Notifier the long-polls of Changes wait on: the
// store signals it after each commit (Store.OnCommit, linked by New). Close
// it when the HTTP server shuts down so long-polls end.
func (s *Service) Notifier() *Notifier { return s.changes }

// Changes returns the changes after q.After, oldest first. When there is
// none it waits up to q.Wait (capped at MaxChangeWait) for one to commit,
// then answers with what it found, possibly nothing. A read of one scope
// that passed over other scopes' changes waits on from where it stopped
// (so a later read examines only newer changes), and answers at once,
// empty, when it stopped at MaxChangeScan before the end of the feed: one
// query examines a bounded part of the feed, and Next always moves past
// what was examined, so a reader of a quiet scope advances and never
// loops. A wait ends early with an empty page when the Notifier is
// closed, and with ctx's error when ctx ends (the client went away).
func (s *Service) Changes(ctx context.Context, q ChangeQuery) (ChangePage, error) {
	v := &ValidationError{}
	if q.After < 0 {
		v.add("after", "must be 0 or the next of a previous answer")
	}
	if q.Limit == 0 {
		q.Limit = DefaultChangeLimit
	}
	if q.Limit < 1 || q.Limit > MaxChangeLimit {
		v.add("limit", fmt.Sprintf("must be between 1 and %d", MaxChangeLimit))
	}
	if q.Scope != "" && !scopeNamePattern.MatchString(q.Scope) {
		v.add("providerScope", "must name a scope")
	}
	if q.Wait < 0 {
		v.add("wait", "must not be negative")
	}
	if err := v.err(); err != nil {
		return ChangePage{}, err
	}
	wait := min(q.Wait, MaxChangeWait)
	deadline := s.clock.Now().Add(wait)
	f := q.ChangeFilter
	for {
		// Take the channel before reading, so a commit after the read
		// still wakes this wait.
		changed := s.changes.Changed()
		b, err := s.store.ListChanges(ctx, f)
		if err != nil {
			if ctx.Err() != nil {
				return ChangePage{}, ctx.Err()
			}
			return ChangePage{}, err
		}
		if len(b.Changes) > 0 || b.More {
			return ChangePage{Changes: b.Changes, Next: b.Next}, nil
		}
		// Nothing of the filter up to b.Next: wait for what follows it.
		f.After = b.Next
		left := deadline.Sub(s.clock.Now())
		select {
		case <-s.changes.Done():
			left = 0
		default:
		}
		if left <= 0 {
			return ChangePage{Next: f.After}, nil
		}
		timer := s.clock.Timer(min(left, ChangePollInterval))
		select {
		case <-changed: // a notification, or Close: look again
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return ChangePage{}, ctx.Err()
		}
		timer.Stop()
	}
}
