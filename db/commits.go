package db

import "sync"

// commitHooks are the functions the writer calls after each transaction it
// commits (DB.OnCommit). It is safe for concurrent use.
type commitHooks struct {
	mu  sync.Mutex
	fns []func()
}

// add appends fn.
func (h *commitHooks) add(fn func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fns = append(h.fns, fn)
}

// committed calls every function added, in the order added.
func (h *commitHooks) committed() {
	h.mu.Lock()
	fns := h.fns
	h.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// OnCommit adds fn to the functions called after each write transaction
// the store commits (see scheduler.Store): on the writer's connection,
// right after SQLite's COMMIT returned, so a read started by fn or after
// it sees the commit. A rolled-back transaction calls none, and neither
// does a statement committed on its own outside a transaction (only
// DeleteSession writes so: sessions are not in the change feed).
func (db *DB) OnCommit(fn func()) { db.writer.commits.add(fn) }
