package db_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pacer/db"
	"pacer/internal/pacertest"
	"pacer/providers"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// The hot path of the store, one benchmark per step an operation takes:
// enqueue, claim, complete. Each reports ns per operation (not per call),
// so batch sizes compare directly; run with -count=10 and feed the output
// to benchstat:
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
// each) and of 1,000 (POST /v1/operations/batch). One op is one operation.
func BenchmarkEnqueue(b *testing.B) {
	for _, batch := range []int{1, 1000} {
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
	benchClaimComplete(b, true, nil)
}

// BenchmarkClaimBatchDurable is BenchmarkClaimBatch where every claim is
// of a mutation the provider cannot deduplicate: each claim transaction
// is followed by a small commit with synchronous=FULL, one WAL sync per
// batch (see scheduler.ClaimParams.Durable).
func BenchmarkClaimBatchDurable(b *testing.B) {
	benchClaimComplete(b, true, func(scheduler.Claim) bool { return true })
}

// BenchmarkComplete records successful attempts, 64 per transaction (a
// group commit of a busy engine); the claims run outside the timer. One op
// is one completion.
func BenchmarkComplete(b *testing.B) {
	benchClaimComplete(b, false, nil)
}

// benchClaimComplete enqueues b.N operations, then claims and completes
// them 64 at a time, timing only the claims or only the completions;
// durable is the claims' ClaimParams.Durable.
func benchClaimComplete(b *testing.B, timeClaims bool, durable func(scheduler.Claim) bool) {
	d := openBenchDB(b)
	ctx := context.Background()
	ops := benchOps("c", b.N)
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
		claims, err := d.ClaimDue(ctx, scheduler.ClaimParams{Now: t0, Limit: min(64, b.N-done), LeaseFor: time.Minute, Durable: durable})
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
