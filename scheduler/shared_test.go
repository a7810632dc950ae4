package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pacer/scheduler"
)

// Design §10: on a store other processes share (PostgreSQL), a starting
// scheduler never takes the leases it finds running, neither in Recover
// nor in Run: they may be a live process's, whose requests are in flight.
// On a store of one process (the caller holds the lock) it takes them, as
// a restart must.
func TestSharedStoreKeepsRunningLeases(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			ctx := context.Background()
			h, prov := setupWithProvider(t)
			h.scope("a", prov.URL, "", 1)
			prov.script("/hang", answer{hang: true}, answer{status: 200})
			h.enqueue(scheduler.OperationInput{ID: "r", Scope: "a", Method: "GET", Path: "/hang"})
			if n, err := h.engine.RunOnce(ctx); err != nil || n != 1 {
				t.Fatalf("claim: %d, %v", n, err)
			}
			waitFor(t, func() bool { return len(prov.requests("/hang")) == 1 })
			claimed := h.wantState("r", scheduler.StateRunning)

			// Another process starts on the same store.
			other := newScheduler(t, h.store, h.clock, scheduler.Config{Engine: scheduler.EngineConfig{Random: half}, Shared: shared})
			if err := other.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- other.Run(runCtx) }()
			waitFor(t, func() bool { return !other.Engine.LastPass().IsZero() })
			stop()
			if err := <-done; err != nil {
				t.Fatal(err)
			}

			op := h.op("r")
			if kept := op.State == scheduler.StateRunning && op.LeaseToken == claimed.LeaseToken; kept != shared {
				t.Fatalf("after another scheduler started (shared %v): state %s, lease token %d (claimed with %d)", shared, op.State, op.LeaseToken, claimed.LeaseToken)
			}
			h.clock.Add(time.Minute) // the hung request's deadline
			h.engine.Wait()
		})
	}
}
