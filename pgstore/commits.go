package pgstore

import "sync"

// commitHooks are the functions called after each transaction the store
// commits (Store.OnCommit). It is safe for concurrent use.
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
