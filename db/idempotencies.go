package db

import (
	"database/sql"
	"sync"

	"pacer/providers"
	"pacer/scheduler"
)

// maxIdempotencies bounds the memo; past it, it starts afresh.
const maxIdempotencies = 4096

// idempotencies memoizes scheduler.ScopeIdempotency by the scope columns it
// is a pure function of (provider, idempotency header, stored profile
// spec): building a provider's profile for it cost more than the INSERT
// of an enqueue in a small transaction. Keyed by content, an entry is
// never stale; the scope row is still read in each transaction.
type idempotencies struct {
	mu sync.Mutex
	m  map[idempotencyKey]providers.Idempotency
}

type idempotencyKey struct {
	provider, header string
	spec             sql.NullString
}

// of returns the idempotency of a scope stored with these columns.
func (c *idempotencies) of(provider, header string, spec sql.NullString) (providers.Idempotency, error) {
	k := idempotencyKey{provider, header, spec}
	c.mu.Lock()
	idem, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return idem, nil
	}
	profile, err := decodeProfileSpec(spec)
	if err != nil {
		return providers.Idempotency{}, err
	}
	idem = scheduler.ScopeIdempotency(provider, header, profile)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxIdempotencies {
		c.m = map[idempotencyKey]providers.Idempotency{}
	}
	c.m[k] = idem
	c.mu.Unlock()
	return idem, nil
}
