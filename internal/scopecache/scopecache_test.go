package scopecache

import (
	"testing"
	"time"

	"pacer/scheduler"
)

// The cache keeps at most its bound, dropping the least recently used
// scope, and a read of an older snapshot does not replace a newer version.
func TestBoundAndVersions(t *testing.T) {
	c := New(2)
	c.Put(Entry{ID: 1, Version: 1})
	c.Put(Entry{ID: 2, Version: 1})
	if _, ok := c.Get(1, 1); !ok { // 1 is now the most recently used
		t.Fatal("scope 1 not kept")
	}
	c.Put(Entry{ID: 3, Version: 1})
	if _, ok := c.Get(2, 1); ok {
		t.Fatal("scope 2, the least recently used, was kept beyond the bound")
	}
	if _, ok := c.Get(1, 1); !ok {
		t.Fatal("scope 1 was dropped")
	}
	if c.Len() != 2 || len(c.byID) != 2 {
		t.Fatalf("holds %d (%d by ID), want 2", c.Len(), len(c.byID))
	}
	c.Put(Entry{ID: 1, Version: 3})
	c.Put(Entry{ID: 1, Version: 2}) // an older snapshot's read
	if _, ok := c.Get(1, 3); !ok {
		t.Fatal("version 3 replaced by an older one")
	}
	if _, ok := c.Get(1, 2); ok {
		t.Fatal("an older version served")
	}
}

// A holder changing its rate limit changes neither the cache's nor
// another holder's.
func TestRateLimitCopied(t *testing.T) {
	c := New(2)
	rl := &scheduler.RateLimit{Requests: 1, Per: time.Second}
	c.Put(Entry{ID: 1, Version: 1, Config: scheduler.ScopeConfig{RateLimit: rl}})
	rl.Requests = 7
	a, _ := c.Get(1, 1)
	a.Config.RateLimit.Requests = 9
	b, _ := c.Get(1, 1)
	if b.Config.RateLimit.Requests != 1 {
		t.Fatalf("cached rate limit changed to %d", b.Config.RateLimit.Requests)
	}
}
