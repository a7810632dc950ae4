package db

import (
	"container/list"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"pacer/scheduler"
)

// scopeCacheSize bounds the scopes whose opened configuration a DB keeps:
// the least recently claimed go first.
const scopeCacheSize = 4096

// cachedScope is what a claim reuses of a scope it read before: the
// configuration with the credentials' values opened, and the creation
// time, valid while the row's config_version is version.
type cachedScope struct {
	id, version int64
	cfg         scheduler.ScopeConfig
	createdAt   time.Time
}

// scopeCache keeps the opened configuration of the scopes claims handed
// out, by row ID, so that a claim of a scope whose configuration has not
// changed since (config_version, read in the claim's own transaction, so
// also right when other processes write the database) opens no sealed
// credentials and decodes no profile. It holds credentials' values in
// memory only; nothing of it is ever logged. It is safe for concurrent use
// (claims on the writer, ListRunning on the readers).
type scopeCache struct {
	mu   sync.Mutex
	max  int
	lru  *list.List // of *cachedScope, most recently used first
	byID map[int64]*list.Element
}

func newScopeCache(max int) *scopeCache {
	return &scopeCache{max: max, lru: list.New(), byID: map[int64]*list.Element{}}
}

// get returns the scope's cached configuration when it was read at
// version.
func (c *scopeCache) get(id, version int64) (cachedScope, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[id]
	if !ok || e.Value.(*cachedScope).version != version {
		return cachedScope{}, false
	}
	c.lru.MoveToFront(e)
	return *e.Value.(*cachedScope), true
}

// put keeps cs, unless a newer version of the scope is kept already (a
// read of an older snapshot), dropping the least recently used scope when
// full.
func (c *scopeCache) put(cs cachedScope) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[cs.id]; ok {
		if e.Value.(*cachedScope).version <= cs.version {
			*e.Value.(*cachedScope) = cs
		}
		c.lru.MoveToFront(e)
		return
	}
	c.byID[cs.id] = c.lru.PushFront(&cs)
	for c.lru.Len() > c.max {
		oldest := c.lru.Back()
		c.lru.Remove(oldest)
		delete(c.byID, oldest.Value.(*cachedScope).id)
	}
}

// claimScopeState reads the configuration version and the admission
// state of the scope with row ID ?1 (see scopeByID for the CAST).
const claimScopeState = `SELECT s.config_version, ` + scopeStateColumns + scopeFrom + scopeByID

// claimScope reads the scope with row ID id as a claim hands it out: its
// admission state and in-flight count as tx sees them, and its
// configuration with the credentials' values, from the cache while the
// row's config_version is the one cached, else read and opened
// (withSecrets) and cached.
func (db *DB) claimScope(ctx context.Context, tx *sql.Tx, id int64) (scheduler.Scope, error) {
	var (
		s       scheduler.Scope
		st      scopeState
		version int64
	)
	err := tx.QueryRowContext(ctx, claimScopeState, id).Scan(append([]any{&version}, st.dest(&s)...)...)
	if errors.Is(err, sql.ErrNoRows) {
		return scheduler.Scope{}, fmt.Errorf("scope row %d: %w", id, scheduler.ErrNotFound)
	} else if err != nil {
		return scheduler.Scope{}, err
	}
	if cs, ok := db.scopes.get(id, version); ok {
		s.ScopeConfig, s.CreatedAt = cs.cfg, cs.createdAt
		if rl := cs.cfg.RateLimit; rl != nil {
			r := *rl // the claim's own copy
			s.RateLimit = &r
		}
		st.apply(&s)
		return s, nil
	}
	sr, err := db.findScopeByID(ctx, tx, id)
	if err != nil {
		return scheduler.Scope{}, err
	}
	if s, err = db.withSecrets(sr); err != nil {
		return scheduler.Scope{}, err
	}
	cfg := s.ScopeConfig
	if rl := cfg.RateLimit; rl != nil {
		r := *rl // the cache's own copy
		cfg.RateLimit = &r
	}
	db.scopes.put(cachedScope{id: id, version: sr.version, cfg: cfg, createdAt: s.CreatedAt})
	return s, nil
}
