package scheduler_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pacer/scheduler"
)

// failsListRunning fails its first `fail` ListRunning and ListOrphaned
// calls (the reads of recovery), as a store that is briefly unusable at
// start.
type failsListRunning struct {
	scheduler.Store
	fail  atomic.Int32
	calls atomic.Int32
}

func (s *failsListRunning) failing() error {
	s.calls.Add(1)
	if s.fail.Add(-1) >= 0 {
		return errors.New("database is locked")
	}
	return nil
}

func (s *failsListRunning) ListRunning(ctx context.Context, expiredBy time.Time, limit int) ([]scheduler.Claim, error) {
	if err := s.failing(); err != nil {
		return nil, err
	}
	return s.Store.ListRunning(ctx, expiredBy, limit)
}

func (s *failsListRunning) ListOrphaned(ctx context.Context, limit int) ([]scheduler.Claim, error) {
	if err := s.failing(); err != nil {
		return nil, err
	}
	return s.Store.ListOrphaned(ctx, limit)
}

// Scheduler.Run recovers the leases an earlier process left (trying again
// while the store fails), then runs the engine: the operation that was
// running when that process died is sent again and succeeds, and Run
// returns once its context ends.
func TestSchedulerRunRecoversThenRunsTheLoops(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.scope("a", prov.URL, "", 4)
	h.enqueue(scheduler.OperationInput{ID: "left", Scope: "a", Method: "GET", Path: "/left"})
	// An earlier process's claim, on a store of its own that it closed as
	// it ended: its lease runs for an hour yet.
	earlier := h.place.Open(t)
	if claims, err := earlier.ClaimDue(context.Background(), scheduler.ClaimParams{Now: t0, Limit: 1, LeaseFor: time.Hour}); err != nil || len(claims) != 1 {
		t.Fatalf("claim: %d, %v", len(claims), err)
	}
	earlier.Close()
	store := &failsListRunning{Store: h.store}
	store.fail.Store(2)
	s := newScheduler(t, store, h.clock, scheduler.Config{Engine: scheduler.EngineConfig{Random: half}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	// The mock clock moves only for the retries' waits (seconds, not the
	// hour of the lease).
	waitFor(t, func() bool {
		if store.calls.Load() <= 2 {
			h.clock.Add(time.Second)
		}
		return len(prov.requests("/left")) == 1
	})
	if h.clock.Now().Sub(t0) >= time.Hour {
		t.Fatalf("sent after %s: by the lease's expiry, not by the recovery at start", h.clock.Now().Sub(t0))
	}
	waitFor(t, func() bool { return h.op("left").State == scheduler.StateSucceeded })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// inFlightObserver sums the engine's in-flight deltas.
type inFlightObserver struct {
	scheduler.NopObserver
	mu  sync.Mutex
	sum int
}

func (o *inFlightObserver) ObserveInFlight(delta int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sum += delta
}

func (o *inFlightObserver) value() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.sum
}

var _ scheduler.Observer = (*inFlightObserver)(nil)

// The Observer's in-flight deltas add up to Engine.InFlight: up while a
// request is out, back to zero once it is recorded (the metrics gauge is
// built on them).
func TestObserverCountsRequestsInFlight(t *testing.T) {
	obs := &inFlightObserver{}
	h := setup(t, scheduler.EngineConfig{Observer: obs})
	prov := newProvider(t, h.clock)
	h.scope("a", prov.URL, "", 4)
	prov.script("/slow", answer{hang: true})
	h.enqueue(scheduler.OperationInput{ID: "slow", Scope: "a", Method: "GET", Path: "/slow"})
	h.enqueue(scheduler.OperationInput{ID: "quick", Scope: "a", Method: "GET", Path: "/quick"})
	if n, err := h.engine.RunOnce(context.Background()); err != nil || n != 2 {
		t.Fatalf("claim: %d, %v", n, err)
	}
	// The quick attempt is decided; the next pass commits it.
	waitFor(t, func() bool { return len(prov.requests("/slow")) == 1 && h.engine.PendingAttempts() == 1 })
	if _, err := h.engine.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.wantState("quick", scheduler.StateSucceeded)
	if got, want := obs.value(), h.engine.InFlight(); got != 1 || want != 1 {
		t.Fatalf("in flight: observer %d, engine %d; want 1 and 1", got, want)
	}
	// The hanging request ends when its deadline passes on the mock clock.
	waitFor(t, func() bool { h.clock.Add(time.Second); return h.engine.InFlight() == 0 })
	h.engine.Wait()
	if got := obs.value(); got != 0 {
		t.Fatalf("in flight after every attempt was recorded: observer %d, want 0", got)
	}
}
