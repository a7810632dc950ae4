package db

import "testing"

// The cache keeps at most its bound, dropping the least recently used
// scope, and a read of an older snapshot does not replace a newer version.
func TestScopeCacheBoundAndVersions(t *testing.T) {
	c := newScopeCache(2)
	c.put(cachedScope{id: 1, version: 1})
	c.put(cachedScope{id: 2, version: 1})
	if _, ok := c.get(1, 1); !ok { // 1 is now the most recently used
		t.Fatal("scope 1 not kept")
	}
	c.put(cachedScope{id: 3, version: 1})
	if _, ok := c.get(2, 1); ok {
		t.Fatal("scope 2, the least recently used, was kept beyond the bound")
	}
	if _, ok := c.get(1, 1); !ok {
		t.Fatal("scope 1 was dropped")
	}
	if c.lru.Len() != 2 || len(c.byID) != 2 {
		t.Fatalf("holds %d (%d by ID), want 2", c.lru.Len(), len(c.byID))
	}
	c.put(cachedScope{id: 1, version: 3})
	c.put(cachedScope{id: 1, version: 2}) // an older snapshot's read
	if _, ok := c.get(1, 3); !ok {
		t.Fatal("version 3 replaced by an older one")
	}
	if _, ok := c.get(1, 2); ok {
		t.Fatal("an older version served")
	}
}
