package db_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"pacer/internal/pacertest"
	"pacer/scheduler"
)

// BenchmarkListOperations_Support measures the support page's queries
// over 100,000 operations (5% held or failed): one page of 50 and the
// count, for each filter the page offers.
func BenchmarkListOperations_Support(b *testing.B) {
	ctx := context.Background()
	path := b.TempDir() + "/pacer.db"
	d := pacertest.OpenStoreAt(b, path)
	for i := range 20 {
		if _, _, err := d.PutScope(ctx, scheduler.ScopeConfig{
			Name: fmt.Sprintf("s%02d", i), Provider: "generic", BaseURL: "https://api.example.com", MaxConcurrent: 4,
		}, scheduler.Action{Actor: "bench", At: t0, Reason: "setup"}); err != nil {
			b.Fatal(err)
		}
	}
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)")
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	// 100,000 rows: scopes in runs of 7; 2% held, 3% failed, 5% waiting.
	_, err = raw.Exec(`
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000)
		INSERT INTO operations (operation_id, scope_id, kind, method, path, request_identity, state,
			next_attempt_at, hold_reason, failure_reason, created_at, updated_at, deadline,
			max_attempts, max_elapsed_ms, content_hash)
		SELECT 'op-' || i, 1 + ((i / 7) % 20), 'mutation', 'POST', '/x', 'op-' || i,
			CASE WHEN i % 100 < 2 THEN 'held' WHEN i % 100 < 5 THEN 'failed'
			     WHEN i % 100 < 10 THEN 'waitingForBudget' ELSE 'succeeded' END,
			CASE WHEN i % 100 BETWEEN 5 AND 9 THEN 1000 END,
			CASE WHEN i % 100 = 0 THEN 'unknownOutcome' WHEN i % 100 = 1 THEN 'authRevoked' END,
			CASE WHEN i % 100 BETWEEN 2 AND 4 THEN 'permanent' END,
			1000000 + i, 1000000 + i, 9000000, 5, 1000, 'h'
		FROM n`)
	if err != nil {
		b.Fatal(err)
	}
	attention := func() []scheduler.State { return []scheduler.State{scheduler.StateHeld, scheduler.StateFailed} }
	for _, bc := range []struct {
		name string
		f    scheduler.OperationFilter
	}{
		{"Attention", scheduler.OperationFilter{States: attention()}},
		{"AttentionScope", scheduler.OperationFilter{States: attention(), Scope: "s03"}},
		{"AttentionReason", scheduler.OperationFilter{States: attention(), Reason: "unknownOutcome"}},
		{"Held", scheduler.OperationFilter{State: scheduler.StateHeld}},
		{"WaitingInScope", scheduler.OperationFilter{States: []scheduler.State{scheduler.StateScheduled, scheduler.StateWaitingForBudget}, Scope: "s03"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f := bc.f
			f.Limit = 50
			// A page deep in the list: the 20th.
			for range 20 {
				page, err := d.ListOperations(ctx, f)
				if err != nil {
					b.Fatal(err)
				}
				if page.Next == "" {
					break
				}
				f.Cursor = page.Next
			}
			for b.Loop() {
				if _, err := d.ListOperations(ctx, f); err != nil {
					b.Fatal(err)
				}
				if _, err := d.CountOperations(ctx, f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
