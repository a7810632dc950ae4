package db_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"pacer/internal/pacertest"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// fillDue inserts n due operations of scope straight into the table (a
// recursive CTE: much faster than n enqueues) and returns the scope's row.
func fillDue(tb testing.TB, raw *sql.DB, scope string, n int, dueAt time.Time) {
	tb.Helper()
	_, err := raw.Exec(`
		WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?1)
		INSERT INTO operations (operation_id, scope_id, kind, method, path, request_identity, state,
			next_attempt_at, created_at, updated_at, deadline, max_attempts, max_elapsed_ms, content_hash)
		SELECT ?2 || '-' || i, (SELECT id FROM scopes WHERE name = ?2), 'read', 'GET', '/x', ?2 || '-' || i,
			'scheduled', ?3, ?3, ?3, ?3 + 86400000, 5, 86400000, 'h'
		FROM seq`, n, scope, dueAt.UnixMilli())
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

// BenchmarkClaim compares a claim on an empty database with one where a
// paused scope holds 1,000,000 due operations beside an open scope with a
// little work: the paused backlog must not slow the claim (issue 4).
//
//	go test -run=^$ -bench=Claim -benchtime=2000x ./db/
func BenchmarkClaim(b *testing.B) {
	for _, backlog := range []int{0, 1_000_000} {
		b.Run(fmt.Sprintf("pausedBacklog=%d", backlog), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "bench.db")
			d := pacertest.OpenStoreAt(b, path)
			storetest.PutScope(b, d, "open", storetest.ScopeOpts{MaxConcurrent: 1 << 20})
			storetest.PutScope(b, d, "paused", storetest.ScopeOpts{MaxConcurrent: 1 << 20})
			raw := rawDB(b, path)
			if backlog > 0 {
				fillDue(b, raw, "paused", backlog, t0)
				if _, err := raw.Exec(`UPDATE scopes SET paused_until = ? WHERE name = 'paused'`, t0.Add(24*time.Hour).UnixMilli()); err != nil {
					b.Fatal(err)
				}
			}
			fillDue(b, raw, "open", b.N, t0)
			b.ResetTimer()
			for range b.N {
				cs, err := d.ClaimDue(context.Background(), scheduler.ClaimParams{Now: t0, Limit: 1, LeaseFor: time.Minute})
				if err != nil || len(cs) != 1 {
					b.Fatalf("claim: %d %v", len(cs), err)
				}
			}
		})
	}
}
