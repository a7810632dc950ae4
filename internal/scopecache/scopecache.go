// Package scopecache keeps the opened configuration of scopes that claims
// handed out, for both stores: a claim of a scope whose configuration has
// not changed since (its row's config_version, read in the claim's own
// transaction, so also right when other processes write the database)
// opens no sealed credentials and decodes no profile.
package scopecache

import (
	"container/list"
	"sync"
	"time"

	"pacer/scheduler"
)

// Size bounds the scopes whose opened configuration a store keeps: the
// least recently claimed go first.
const Size = 4096

// Entry is what a claim reuses of a scope it read before: the
// configuration with the credentials' values opened, and the creation
// time, valid while the row's config_version is Version.
type Entry struct {
	ID, Version int64
	Config      scheduler.ScopeConfig
	CreatedAt   time.Time
}

// Cache keeps Entries by scope row ID. It holds credentials' values in
// memory only; nothing of it is ever logged. It is safe for concurrent use
// (claims on the writer, ListRunning on the readers).
type Cache struct {
	mu   sync.Mutex
	max  int
	lru  *list.List // of *Entry, most recently used first
	byID map[int64]*list.Element
}

// New returns an empty cache of at most max scopes.
func New(max int) *Cache {
	return &Cache{max: max, lru: list.New(), byID: map[int64]*list.Element{}}
}

// Get returns the scope's cached entry when it was read at version, with
// its own copy of the rate limit.
func (c *Cache) Get(id, version int64) (Entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[id]
	if !ok || e.Value.(*Entry).Version != version {
		return Entry{}, false
	}
	c.lru.MoveToFront(e)
	out := *e.Value.(*Entry)
	out.Config.RateLimit = copyRate(out.Config.RateLimit)
	return out, true
}

// Put keeps a copy of e, unless a newer version of the scope is kept
// already (a read of an older snapshot), dropping the least recently used
// scope when full.
func (c *Cache) Put(e Entry) {
	e.Config.RateLimit = copyRate(e.Config.RateLimit)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byID[e.ID]; ok {
		if el.Value.(*Entry).Version <= e.Version {
			*el.Value.(*Entry) = e
		}
		c.lru.MoveToFront(el)
		return
	}
	c.byID[e.ID] = c.lru.PushFront(&e)
	for c.lru.Len() > c.max {
		oldest := c.lru.Back()
		c.lru.Remove(oldest)
		delete(c.byID, oldest.Value.(*Entry).ID)
	}
}

// Len is how many scopes the cache holds.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// copyRate is a copy of rl (nil for nil), so that no two holders share it.
func copyRate(rl *scheduler.RateLimit) *scheduler.RateLimit {
	if rl == nil {
		return nil
	}
	r := *rl
	return &r
}
