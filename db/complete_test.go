package db_test

import (
	"context"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// A completion of an attempt the operation has moved past is fenced out
// and marks that attempt stale; the state it needs (the operation back to
// scheduled with attempt 1 left unfinished, as a recovery that never
// finished the attempt would leave it) is set with SQL: the Store has no
// method that leaves it so.
func TestLateCompletionMarksAttemptStale(t *testing.T) {
	ctx := context.Background()
	d, path := newTestDB(t)
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{})
	storetest.Enqueue(t, d, t0, storetest.NewOp("op", "a", t0))
	old := storetest.Claim(t, d, t0, 1)[0]
	// The operation moves on without the first worker: a later claim
	// holds it with a new token (recovery left attempt 1 unfinished).
	if _, err := d.Complete(ctx, []scheduler.Completion{{OperationID: "op", LeaseToken: 1, Attempt: 99, FinishedAt: t0,
		Outcome: providers.Outcome{Class: providers.ClassTransient}, Decision: scheduler.Decision{State: scheduler.StateScheduled, NextAttemptAt: t0}}}); err == nil {
		t.Fatal("completion of a missing attempt number accepted")
	}
	if _, err := rawDB(t, path).Exec(`UPDATE operations SET state = 'scheduled', lease_expires_at = NULL WHERE operation_id = 'op'`); err != nil {
		t.Fatal(err)
	}
	storetest.Claim(t, d, t0, 1)
	if storetest.Complete(t, d, old, t0.Add(time.Second), scheduler.Decision{State: scheduler.StateSucceeded}, providers.Outcome{Class: providers.ClassSuccess, Status: 200}) {
		t.Fatal("late completion applied")
	}
	as, _ := d.ListAttempts(ctx, "op")
	if len(as) != 2 || !as[0].Stale || !as[0].FinishedAt.IsZero() || as[1].Stale {
		t.Fatalf("attempts %+v", as)
	}
	if op := storetest.GetOp(t, d, "op"); op.State != scheduler.StateRunning || op.LeaseToken != 2 {
		t.Fatalf("op %+v", op)
	}
}
