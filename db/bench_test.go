package db_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"pacer/db"
	"pacer/internal/pacertest"
	"pacer/providers"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// Every benchmark of the store. The hot path has one per step an
// operation takes: enqueue, claim, complete. Each reports ns per operation
// (not per call), so batch sizes compare directly; run with -count=10 and
// feed the output to benchstat:
//
//	go test -run='^$' -bench='Enqueue|ClaimBatch|Complete' -count=10 ./db/ > new.txt

// benchScopes is how many scopes the hot-path benchmarks spread work over.
const benchScopes = 10

// openBenchDB opens a fresh store with benchScopes open scopes s0…s9.
func openBenchDB(b *testing.B) *db.DB {
	b.Helper()
	d := pacertest.OpenStore(b)
	for i := range benchScopes {
		storetest.PutScope(b, d, fmt.Sprintf("s%d", i), storetest.ScopeOpts{MaxConcurrent: 1 << 20})
	}
	return d
}

// benchOps returns n new operations, round robin over the bench scopes.
func benchOps(prefix string, n int) []scheduler.NewOperation {
	ops := make([]scheduler.NewOperation, n)
	for i := range ops {
		ops[i] = storetest.NewOp(fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf("s%d", i%benchScopes), t0)
	}
	return ops
}

// BenchmarkEnqueue stores new operations in batches of 1 (one transaction
// each), of 32 (a group commit of 32 concurrent POST /v1/operations) and
// of 1,000 (POST /v1/operations/batch). One op is one operation.
func BenchmarkEnqueue(b *testing.B) {
	for _, batch := range []int{1, 32, 1000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			d := openBenchDB(b)
			ops := benchOps("e", b.N)
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				res, err := d.Enqueue(ctx, ops[i:min(i+batch, b.N)], t0)
				if err != nil || res[0].Err != nil {
					b.Fatalf("enqueue: %v %v", err, res[0].Err)
				}
			}
		})
	}
}

// BenchmarkClaimBatch claims due operations, up to 64 per transaction (the
// engine's default worker count), from 10 scopes; each batch is completed
// outside the timer, so at most 64 run at once, as under the engine. One op
// is one claimed operation.
func BenchmarkClaimBatch(b *testing.B) {
	benchClaimComplete(b, true, 64, nil, benchOps("c", b.N))
}

// BenchmarkClaimBatchLargeRequest is BenchmarkClaimBatch with requests of
// a 2 KiB body and 400 bytes of headers: the claim rewrites only the hot
// row, not the request (issue 15, the narrow hot row).
func BenchmarkClaimBatchLargeRequest(b *testing.B) {
	benchClaimComplete(b, true, 64, nil, largeRequests(benchOps("c", b.N)))
}

// BenchmarkClaimSmallBatch is BenchmarkClaimBatch with claims of up to 4
// operations, as the engine's claims are when it claims again as soon as
// a worker frees up (issue 15): each claim reads up to 4 scopes. One op
// is one claimed operation.
func BenchmarkClaimSmallBatch(b *testing.B) {
	benchClaimComplete(b, true, 4, nil, benchOps("c", b.N))
}

// BenchmarkClaimBatchDurable is BenchmarkClaimBatch where every claim is
// of a mutation the provider cannot deduplicate: each claim transaction
// is followed by a small commit with synchronous=FULL, one WAL sync per
// batch (see scheduler.ClaimParams.Durable).
func BenchmarkClaimBatchDurable(b *testing.B) {
	benchClaimComplete(b, true, 64, func(scheduler.Claim) bool { return true }, benchOps("c", b.N))
}

// BenchmarkComplete records successful attempts, 64 per transaction (a
// group commit of a busy engine); the claims run outside the timer. One op
// is one completion.
func BenchmarkComplete(b *testing.B) {
	benchClaimComplete(b, false, 64, nil, benchOps("c", b.N))
}

// BenchmarkCompleteLargeRequest is BenchmarkComplete with the requests of
// BenchmarkClaimBatchLargeRequest.
func BenchmarkCompleteLargeRequest(b *testing.B) {
	benchClaimComplete(b, false, 64, nil, largeRequests(benchOps("c", b.N)))
}

// largeRequests gives each of ops a 2 KiB body and two headers of 200
// bytes.
func largeRequests(ops []scheduler.NewOperation) []scheduler.NewOperation {
	body := make([]byte, 2048)
	headers := map[string]string{"X-A": strings.Repeat("a", 200), "X-B": strings.Repeat("b", 200)}
	for i := range ops {
		ops[i].Request.Body, ops[i].Request.Headers = body, headers
	}
	return ops
}

// benchClaimComplete enqueues ops (b.N of them), then claims and
// completes them batch at a time, timing only the claims or only the
// completions; durable is the claims' ClaimParams.Durable.
func benchClaimComplete(b *testing.B, timeClaims bool, batch int, durable func(scheduler.Claim) bool, ops []scheduler.NewOperation) {
	d := openBenchDB(b)
	ctx := context.Background()
	for i := 0; i < b.N; i += scheduler.MaxBatch {
		if _, err := d.Enqueue(ctx, ops[i:min(i+scheduler.MaxBatch, b.N)], t0); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for done := 0; done < b.N; {
		if !timeClaims {
			b.StopTimer()
		}
		claims, err := d.ClaimDue(ctx, scheduler.ClaimParams{Now: t0, Limit: min(batch, b.N-done), LeaseFor: time.Minute, Durable: durable})
		if err != nil || len(claims) == 0 {
			b.Fatalf("claim: %d %v", len(claims), err)
		}
		cs := make([]scheduler.Completion, len(claims))
		for i, c := range claims {
			cs[i] = scheduler.Completion{
				OperationID: c.Operation.ID, LeaseToken: c.Operation.LeaseToken, Attempt: c.Operation.Attempt,
				FinishedAt: t0.Add(time.Second),
				Outcome:    providers.Outcome{Class: providers.ClassSuccess, Status: 200, Reason: "2xx", Detail: `{"ok":true}`},
				Decision: scheduler.Decision{State: scheduler.StateSucceeded, Reason: "succeeded",
					Result: &scheduler.Result{Status: 200, Body: []byte(`{"ok":true}`)}},
			}
		}
		if timeClaims {
			b.StopTimer()
		} else {
			b.StartTimer()
		}
		applied, err := d.Complete(ctx, cs)
		if err != nil || !applied[0] {
			b.Fatalf("complete: %v %v", applied, err)
		}
		b.StartTimer()
		done += len(claims)
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
			d, path := newTestDB(b)
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

// fillFinished inserts n operations of scope that succeeded at `at`, each
// with one attempt (and, through the triggers, one change).
func fillFinished(tb testing.TB, raw *sql.DB, scope string, n int, at time.Time) {
	tb.Helper()
	ms := at.UnixMilli()
	_, err := raw.Exec(`
		WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?1)
		INSERT INTO operations (operation_id, scope_id, kind, method, path, request_identity, state, attempt,
			budget_attempts, created_at, updated_at, deadline, max_attempts, max_elapsed_ms, lease_token, first_sent_at, content_hash)
		SELECT ?2 || '-done-' || i, (SELECT id FROM scopes WHERE name = ?2), 'read', 'GET', '/x', ?2 || '-done-' || i,
			'succeeded', 1, 1, ?3, ?3, ?3 + 86400000, 5, 86400000, 1, ?3, 'h'
		FROM seq`, n, scope, ms)
	if err != nil {
		tb.Fatalf("fill finished %s: %v", scope, err)
	}
	_, err = raw.Exec(`
		INSERT INTO attempts (operation_id, number, lease_token, started_at, finished_at, class, status, decided_state)
		SELECT id, 1, 1, ?1, ?1, 'success', 200, 'succeeded' FROM operations WHERE state = 'succeeded' AND operation_id LIKE ?2 || '-done-%'`, ms, scope)
	if err != nil {
		tb.Fatalf("fill attempts %s: %v", scope, err)
	}
}

// BenchmarkPruneBatch measures one retention batch (500 operations with
// their attempts and 500 changes) in a table of 200,000 finished
// operations: the longest the claim loop waits for the pruner.
//
//	go test -run=^$ -bench=PruneBatch -benchtime=100x ./db/
func BenchmarkPruneBatch(b *testing.B) {
	d, path := newTestDB(b)
	storetest.PutScope(b, d, "a", storetest.ScopeOpts{})
	raw := rawDB(b, path)
	fillFinished(b, raw, "a", max(200_000, 500*b.N), t0)
	b.ResetTimer()
	for range b.N {
		res, err := d.PruneFinished(context.Background(), scheduler.PruneParams{Before: t0.Add(time.Hour), Limit: scheduler.DefaultPruneBatch})
		if err != nil || res.Operations != scheduler.DefaultPruneBatch {
			b.Fatalf("prune: %+v %v", res, err)
		}
	}
}

// BenchmarkCountByState measures the query behind the metrics' state
// gauges on 1,000,000 operations.
//
//	go test -run=^$ -bench=CountByState -benchtime=20x ./db/
func BenchmarkCountByState(b *testing.B) {
	d, path := newTestDB(b)
	storetest.PutScope(b, d, "a", storetest.ScopeOpts{})
	raw := rawDB(b, path)
	fillDue(b, raw, "a", 500_000, t0)
	fillFinished(b, raw, "a", 500_000, t0)
	b.ResetTimer()
	for range b.N {
		if _, err := d.CountByState(context.Background(), t0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListOperations_Support measures the support page's queries
// over 100,000 operations (5% held or failed): one page of 50 and the
// count, for each filter the page offers.
func BenchmarkListOperations_Support(b *testing.B) {
	ctx := context.Background()
	d, path := newTestDB(b)
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
