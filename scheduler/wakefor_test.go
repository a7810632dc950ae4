package scheduler_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"pacer/scheduler"
)

// countsClaims counts claims (CompleteAndClaim calls): the loop's passes.
type countsClaims struct {
	scheduler.Store
	claims atomic.Int32
}

func (s *countsClaims) CompleteAndClaim(ctx context.Context, cs []scheduler.Completion, p scheduler.ClaimParams) ([]bool, []scheduler.Claim, error) {
	s.claims.Add(1)
	return s.Store.CompleteAndClaim(ctx, cs, p)
}

// An enqueue wakes the sleeping loop only for work due before the loop
// wakes by itself: an operation due after that is left to the pass the
// loop runs then, an earlier one wakes it, and it is sent when due.
func TestEnqueueWakesTheLoopForEarlierWork(t *testing.T) {
	h := setup(t, scheduler.EngineConfig{})
	prov := newProvider(t, h.clock)
	h.scope("a", prov.URL, "", 4)
	store := &countsClaims{Store: h.place.Open(t)}
	s := newScheduler(t, store, h.clock, scheduler.Config{Engine: scheduler.EngineConfig{PollInterval: time.Hour, Random: half}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Engine.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	waitFor(t, func() bool { return s.Engine.SleepsUntil().Equal(t0.Add(time.Hour)) })
	passes := store.claims.Load()

	enqueue := func(id string, at time.Time) {
		t.Helper()
		res, err := s.Service.Enqueue(ctx, []scheduler.OperationInput{{ID: id, Scope: "a", Method: "GET", Path: "/" + id, NotBefore: &at}}, func(int) string { return "" })
		if err != nil || res[0].Err != nil || !res[0].Created {
			t.Fatalf("enqueue %s: %+v, %v", id, res, err)
		}
	}
	enqueue("later", t0.Add(2*time.Hour))
	time.Sleep(50 * time.Millisecond) // a woken loop runs a pass at once
	if got := store.claims.Load(); got != passes || !s.Engine.SleepsUntil().Equal(t0.Add(time.Hour)) {
		t.Fatalf("after enqueueing work due after the loop's sleep: %d passes (was %d), sleeps until %s; want it left asleep", got, passes, s.Engine.SleepsUntil())
	}

	enqueue("soon", t0.Add(time.Minute))
	waitFor(t, func() bool {
		until := s.Engine.SleepsUntil()
		return store.claims.Load() > passes && !until.IsZero() && !until.After(t0.Add(time.Minute+time.Millisecond))
	})
	waitFor(t, func() bool {
		if len(prov.requests("/soon")) == 1 {
			return true
		}
		if until := s.Engine.SleepsUntil(); !until.IsZero() && h.clock.Now().Before(until) {
			h.clock.Set(until) // the loop sleeps: let its sleep end
		}
		return false
	})
	if got := prov.requests("/soon")[0].at; got.Before(t0.Add(time.Minute)) {
		t.Fatalf("soon sent at %s, before it was due", got)
	}
	if n := len(prov.requests("/later")); n != 0 {
		t.Fatalf("later sent %d times before its time", n)
	}
}
