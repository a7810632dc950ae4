package scheduler_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"pacer/scheduler"
)

// tickSpy watches the engine's ticks: how many commit completions, how
// many completions they carry, and the most operations running in the
// store right after one.
type tickSpy struct {
	scheduler.Store
	mu                            sync.Mutex
	ticks, completed, mostRunning int
	// full says the last claim took every slot offered (backlog);
	// ungathered counts the ticks after one that carried fewer than
	// share completions.
	full       bool
	share      int
	ungathered int
}

func (s *tickSpy) CompleteAndClaim(ctx context.Context, cs []scheduler.Completion, p scheduler.ClaimParams) ([]bool, []scheduler.Claim, error) {
	applied, claims, err := s.Store.CompleteAndClaim(ctx, cs, p)
	counts, cerr := s.Store.CountByState(ctx, time.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.full && len(cs) < s.share {
		s.ungathered++
	}
	if p.Limit > 0 {
		s.full = err == nil && len(claims) == p.Limit
	}
	if len(cs) > 0 {
		s.ticks++
		s.completed += len(cs)
	}
	if cerr == nil {
		s.mostRunning = max(s.mostRunning, counts.Operations[scheduler.StateRunning])
	}
	return applied, claims, err
}

// The gathered tick: with a backlog, finished attempts are committed
// together with the claim that takes their slots, a share of the workers
// at a time, and a slot is reused only once its attempt is committed: the
// store never holds more running operations than the engine has workers.
func TestTicksGatherCompletionsWithTheClaim(t *testing.T) {
	const workers, ops = 6, 60
	h, prov := setupWithProvider(t)
	h.scope("a", prov.URL, "", 50)
	for i := range ops {
		h.enqueue(scheduler.OperationInput{ID: fmt.Sprintf("op-%02d", i), Scope: "a", Method: "GET", Path: "/x"})
	}
	spy := &tickSpy{Store: h.store, share: workers / 3}
	eng := newScheduler(t, spy, h.clock, scheduler.Config{Engine: scheduler.EngineConfig{Workers: workers, Random: half}}).Engine
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	// The mock clock stands still: nothing but the gathering rule makes a
	// tick commit while there is backlog.
	waitFor(t, func() bool {
		n, err := h.store.CountOperations(context.Background(), scheduler.OperationFilter{State: scheduler.StateSucceeded})
		return err == nil && n == ops
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	spy.mu.Lock()
	defer spy.mu.Unlock()
	if spy.completed != ops {
		t.Fatalf("%d completions committed, want %d", spy.completed, ops)
	}
	if spy.mostRunning > workers {
		t.Fatalf("%d operations running after a tick with %d workers: a slot was reused before its attempt was committed", spy.mostRunning, workers)
	}
	// A share is a third of the workers (2); the clock stands still, so
	// no gathering wait ends early.
	if spy.ungathered > 0 {
		t.Fatalf("%d of %d ticks after a full claim committed fewer than %d attempts: completions were not gathered", spy.ungathered, spy.ticks, spy.share)
	}
}
