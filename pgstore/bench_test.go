package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pacer/internal/pgtest"
	"pacer/providers"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// BenchmarkTick is the engine's hot path on PostgreSQL: each
// CompleteAndClaim completes the previous batch of claims (succeeded) and
// claims the next, batch=100, over 10 scopes. One op is one operation
// claimed and completed; enqueueing them is not timed.
//
//	go test -run='^$' -bench=Tick -benchtime=5000x ./pgstore/
func BenchmarkTick(b *testing.B) {
	const batch, scopes = 100, 10
	ctx := context.Background()
	d := openStoreAt(b, pgtest.URLFrom(b, migrated))
	for i := range scopes {
		storetest.PutScope(b, d, fmt.Sprintf("s%d", i), storetest.ScopeOpts{MaxConcurrent: 1 << 20})
	}
	ops := make([]scheduler.NewOperation, b.N)
	for i := range ops {
		ops[i] = storetest.NewOp(fmt.Sprintf("op-%d", i), fmt.Sprintf("s%d", i%scopes), storetest.T0)
	}
	for i := 0; i < len(ops); i += 1000 {
		storetest.Enqueue(b, d, storetest.T0, ops[i:min(i+1000, len(ops))]...)
	}
	b.ResetTimer()
	var pending []scheduler.Completion
	for done := 0; done < b.N; {
		now := storetest.T0.Add(time.Second)
		_, claims, err := d.CompleteAndClaim(ctx, pending, scheduler.ClaimParams{Now: now, Limit: batch, LeaseFor: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		done += len(pending)
		pending = pending[:0]
		for _, c := range claims {
			pending = append(pending, storetest.CompletionOf(c, now, scheduler.Decision{State: scheduler.StateSucceeded}, providers.Outcome{Class: providers.ClassSuccess, Status: 200}))
		}
		if len(claims) == 0 && len(pending) == 0 && done < b.N {
			b.Fatalf("nothing claimed after %d of %d", done, b.N)
		}
	}
}
