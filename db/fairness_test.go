package db_test

import (
	"database/sql"
	"testing"
	"time"

	"pacer/scheduler/storetest"
)

// fillDue inserts n due operations of scope straight into the tables (a
// recursive CTE: much faster than n enqueues).
func fillDue(tb testing.TB, raw *sql.DB, scope string, n int, dueAt time.Time) {
	tb.Helper()
	_, err := raw.Exec(`
		WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?1)
		INSERT INTO operations (operation_id, scope_id, state, next_attempt_at, created_at, updated_at, deadline)
		SELECT ?2 || '-' || i, (SELECT id FROM scopes WHERE name = ?2), 'scheduled', ?3, ?3, ?3, ?3 + 86400000
		FROM seq;
		INSERT INTO operation_requests (id, kind, method, path, request_identity, content_hash, max_attempts, max_elapsed_ms)
		SELECT o.id, 'read', 'GET', '/x', o.operation_id, 'h', 5, 86400000
		FROM operations o WHERE o.scope_id = (SELECT id FROM scopes WHERE name = ?2)
			AND NOT EXISTS (SELECT 1 FROM operation_requests r WHERE r.id = o.id)`, n, scope, dueAt.UnixMilli())
	if err != nil {
		tb.Fatalf("fill %s: %v", scope, err)
	}
}

// One scope's huge backlog does not starve another: with 100,000 due in A
// and 10 in B, B's work starts within the first claim passes.
func TestClaimIsFairAcrossScopes(t *testing.T) {
	d, path := newTestDB(t)
	storetest.PutScope(t, d, "big", storetest.ScopeOpts{MaxConcurrent: 1000})
	storetest.PutScope(t, d, "small", storetest.ScopeOpts{MaxConcurrent: 1000})
	raw := rawDB(t, path)
	fillDue(t, raw, "big", 100_000, t0.Add(-time.Hour)) // older than small's
	fillDue(t, raw, "small", 10, t0)

	small := 0
	for pass := 0; pass < 2; pass++ {
		for _, c := range storetest.Claim(t, d, t0, 16) {
			if c.Scope.Name == "small" {
				small++
			}
		}
	}
	if small != 10 {
		t.Fatalf("small scope got %d of its 10 operations in two claim passes", small)
	}
}
