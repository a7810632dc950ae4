package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"pacer/scheduler"
)

func newPruner(t *testing.T, h *harness, cfg scheduler.PrunerConfig) *scheduler.Pruner {
	t.Helper()
	return newScheduler(t, h.store, h.clock, scheduler.Config{Pruner: cfg}).Pruner
}

func TestPrunerRemovesOnlyOldFinishedOperations(t *testing.T) {
	ctx := context.Background()
	h, prov := setupWithProvider(t)
	h.scope("a", prov.URL, "", 4)
	prov.script("/bad", answer{status: 400, body: `{"error":"invalid"}`})
	prov.script("/unsure", answer{status: 502})
	prov.script("/resolved", answer{status: 502})
	later := t0.Add(time.Hour)
	h.enqueue(scheduler.OperationInput{ID: "ok", Scope: "a", Method: "GET", Path: "/ok"})
	h.enqueue(scheduler.OperationInput{ID: "bad", Scope: "a", Method: "POST", Path: "/bad"})
	h.enqueue(scheduler.OperationInput{ID: "unsure", Scope: "a", Method: "POST", Path: "/unsure"})
	h.enqueue(scheduler.OperationInput{ID: "resolved", Scope: "a", Method: "POST", Path: "/resolved"})
	h.enqueue(scheduler.OperationInput{ID: "canceled", Scope: "a", Method: "GET", Path: "/never", NotBefore: &later})
	h.pass()
	h.wantState("ok", scheduler.StateSucceeded)
	h.wantState("bad", scheduler.StateFailed)
	h.wantState("unsure", scheduler.StateHeld)
	h.wantState("resolved", scheduler.StateHeld)
	if _, err := h.svc.Resolve(ctx, "resolved", scheduler.ResolvedApplied, "checked: it was created", "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Cancel(ctx, "canceled", "not needed", "test"); err != nil {
		t.Fatal(err)
	}

	pr := newPruner(t, h, scheduler.PrunerConfig{Retention: 24 * time.Hour})
	h.clock.Add(24 * time.Hour) // exactly the retention: nothing is older yet
	if res, err := pr.RunOnce(ctx); err != nil || res != (scheduler.PruneResult{}) {
		t.Fatalf("RunOnce at the retention boundary = %+v, %v; want nothing removed", res, err)
	}

	h.clock.Add(time.Minute)
	h.enqueue(scheduler.OperationInput{ID: "fresh", Scope: "a", Method: "GET", Path: "/fresh"})
	h.pass()
	changesBefore := h.place.Rows(t, "changes")
	res, err := pr.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Operations, 3; got != want {
		t.Errorf("removed %d operations, want %d (ok, resolved, canceled)", got, want)
	}
	if got, want := res.Attempts, 2; got != want {
		t.Errorf("removed %d attempts, want %d", got, want)
	}
	if got, want := res.Audit, 2; got != want {
		t.Errorf("removed %d audit entries, want %d (resolve, cancel)", got, want)
	}
	if res.More {
		t.Error("More is true after a batch that was not full")
	}
	for _, id := range []string{"ok", "resolved", "canceled"} {
		if _, err := h.svc.GetOperation(ctx, id); !errors.Is(err, scheduler.ErrNotFound) {
			t.Errorf("%s: GetOperation err = %v, want ErrNotFound", id, err)
		}
		if _, err := h.svc.ListAttempts(ctx, id); !errors.Is(err, scheduler.ErrNotFound) {
			t.Errorf("%s: ListAttempts err = %v, want ErrNotFound", id, err)
		}
	}
	h.wantState("bad", scheduler.StateFailed)
	h.wantState("unsure", scheduler.StateHeld)
	h.wantState("fresh", scheduler.StateSucceeded)
	if a, err := h.svc.ListAttempts(ctx, "bad"); err != nil || len(a) != 1 {
		t.Errorf("attempts of the failed operation: %d, %v; want 1 kept", len(a), err)
	}
	// The old changes went (every change but fresh's three is older than
	// the retention); fresh's stay.
	if got, want := h.place.Rows(t, "changes"), 3; got != want {
		t.Errorf("changes left: %d (of %d), want %d", got, changesBefore, want)
	}
	if got, want := res.Changes, changesBefore-3; got != want {
		t.Errorf("res.Changes = %d, want %d", got, want)
	}
}

func TestPrunerWorksInBatches(t *testing.T) {
	ctx := context.Background()
	h, prov := setupWithProvider(t)
	h.scope("a", prov.URL, "", 10)
	for i := range 5 {
		h.enqueue(scheduler.OperationInput{ID: fmt.Sprintf("op-%d", i), Scope: "a", Method: "GET", Path: "/ok"})
	}
	h.pass()
	h.clock.Add(2 * time.Hour)
	pr := newPruner(t, h, scheduler.PrunerConfig{Retention: time.Hour, BatchSize: 2})
	var total scheduler.PruneResult
	for i := 0; ; i++ {
		if i == 20 {
			t.Fatal("pruning did not finish in 20 batches")
		}
		res, err := pr.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Operations > 2 || res.Changes > 2 {
			t.Fatalf("batch %d removed %+v, more than the batch size 2", i, res)
		}
		total = total.Add(res)
		if !res.More {
			break
		}
	}
	if total.Operations != 5 || total.Attempts != 5 || total.Changes != 15 {
		t.Errorf("removed %+v in total, want 5 operations, 5 attempts, 15 changes", total)
	}
	if n := h.place.Rows(t, "operations"); n != 0 {
		t.Errorf("%d operations left", n)
	}
}

func TestPrunerConfigValidation(t *testing.T) {
	h := setup(t, scheduler.EngineConfig{})
	for _, cfg := range []scheduler.PrunerConfig{
		{Retention: time.Second},
		{BatchSize: -1},
		{Interval: -time.Second},
	} {
		if _, err := scheduler.New(h.store, h.clock, scheduler.Config{Pruner: cfg}); err == nil {
			t.Errorf("New with pruner config %+v accepted an invalid config", cfg)
		}
	}
	p := newPruner(t, h, scheduler.PrunerConfig{})
	if got := p.Retention(); got != scheduler.DefaultRetention {
		t.Errorf("default retention %s, want %s", got, scheduler.DefaultRetention)
	}
}

// TestRetentionUnderLoad runs the engine claiming and completing steady
// traffic while the pruner runs batch after batch in another goroutine:
// every round's work is still claimed and finished, no held or failed
// operation is removed, and the row counts stay bounded by what the
// retention window holds instead of growing with the traffic.
func TestRetentionUnderLoad(t *testing.T) {
	ctx := context.Background()
	h := setup(t, scheduler.EngineConfig{Workers: 8})
	prov := newProvider(t, h.clock)
	h.scope("a", prov.URL, "", 8)
	h.scope("b", prov.URL, "", 8)
	prov.script("/bad", answer{status: 422})
	prov.script("/unsure", answer{status: 502})
	const (
		rounds    = 36
		perRound  = 12
		step      = 10 * time.Minute
		retention = time.Hour
	)
	pr := newPruner(t, h, scheduler.PrunerConfig{Retention: retention, BatchSize: 25})

	stop := make(chan struct{})
	var (
		wg        sync.WaitGroup
		pruneErrs []error
		batches   int
	)
	wg.Add(1)
	go func() { // the pruner, as fast as it can go, until stopped
		defer wg.Done()
		for i := 0; i < 1_000_000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := pr.RunOnce(ctx); err != nil {
				pruneErrs = append(pruneErrs, err)
				return
			}
			batches++
			time.Sleep(time.Millisecond) // the Pause between batches, shortened
		}
	}()

	for r := range rounds {
		ins := make([]scheduler.OperationInput, perRound)
		for i := range ins {
			ins[i] = scheduler.OperationInput{ID: fmt.Sprintf("r%d-%d", r, i), Scope: []string{"a", "b"}[i%2], Method: "GET", Path: "/ok"}
			switch i {
			case 0:
				ins[i].Method, ins[i].Path = "POST", "/bad"
			case 1:
				ins[i].Method, ins[i].Path = "POST", "/unsure"
			}
		}
		if _, err := h.svc.Enqueue(ctx, ins, func(int) string { return "" }); err != nil {
			t.Fatal(err)
		}
		for pass := 0; ; pass++ {
			if pass == 50 {
				t.Fatalf("round %d: work still being claimed after 50 passes", r)
			}
			if h.pass() == 0 {
				break
			}
		}
		c, err := h.store.CountByState(ctx, h.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if n := c.Operations[scheduler.StateScheduled] + c.Operations[scheduler.StateWaitingForBudget] + c.Operations[scheduler.StateRunning]; n != 0 {
			t.Fatalf("round %d: %d operations not finished while the pruner runs (%v)", r, n, c.Operations)
		}
		h.clock.Add(step)
	}
	close(stop)
	wg.Wait()
	if len(pruneErrs) > 0 {
		t.Fatalf("pruner failed under load: %v", pruneErrs)
	}
	for { // drain what the last rounds left behind, bounded by the table
		res, err := pr.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !res.More {
			break
		}
	}

	c, err := h.store.CountByState(ctx, h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Operations[scheduler.StateHeld], rounds; got != want {
		t.Errorf("held operations: %d, want all %d kept", got, want)
	}
	if got, want := c.Operations[scheduler.StateFailed], rounds; got != want {
		t.Errorf("failed operations: %d, want all %d kept", got, want)
	}
	// What the retention window holds: the rounds finished within the last
	// hour (plus the one at its edge).
	window := int(retention/step) + 1
	maxSucceeded := (perRound - 2) * window
	if got := c.Operations[scheduler.StateSucceeded]; got > maxSucceeded || got == 0 {
		t.Errorf("succeeded operations kept: %d, want 1..%d (of %d finished)", got, maxSucceeded, (perRound-2)*rounds)
	}
	maxOps := maxSucceeded + 2*rounds
	if got := h.place.Rows(t, "operations"); got > maxOps {
		t.Errorf("operations rows: %d, want at most %d", got, maxOps)
	}
	if got := h.place.Rows(t, "attempts"); got > maxOps {
		t.Errorf("attempts rows: %d, want at most %d", got, maxOps)
	}
	// Three changes (scheduled, running, final) per operation of the window.
	if got, max := h.place.Rows(t, "changes"), 3*perRound*window; got > max {
		t.Errorf("changes rows: %d, want at most %d", got, max)
	}
	t.Logf("pruner ran %d batches during %d rounds of %d operations", batches, rounds, perRound)
}

// TestPrunerRunStopsWithItsContext runs the loop on a mock clock: it prunes
// at once, then waits; canceling its context ends it without an error.
func TestPrunerRunStopsWithItsContext(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.scope("a", prov.URL, "", 4)
	h.enqueue(scheduler.OperationInput{ID: "old", Scope: "a", Method: "GET", Path: "/ok"})
	h.pass()
	h.clock.Add(2 * time.Hour)
	pr := newPruner(t, h, scheduler.PrunerConfig{Retention: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pr.Run(ctx) }()
	for i := 0; ; i++ { // the first batch runs before any wait
		if _, err := h.svc.GetOperation(context.Background(), "old"); errors.Is(err, scheduler.ErrNotFound) {
			break
		}
		if i == 1000 {
			t.Fatal("Run did not prune")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run returned %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// KeepForever (serve --retention 0) removes nothing, however old, and its
// Run only waits for its context.
func TestPrunerKeepForever(t *testing.T) {
	ctx := context.Background()
	h, prov := setupWithProvider(t)
	h.scope("a", prov.URL, "", 4)
	h.enqueue(scheduler.OperationInput{ID: "ok", Scope: "a", Method: "GET", Path: "/ok"})
	h.pass()
	h.wantState("ok", scheduler.StateSucceeded)
	pr := newPruner(t, h, scheduler.PrunerConfig{KeepForever: true, Retention: time.Second})
	h.clock.Add(365 * 24 * time.Hour)
	if res, err := pr.RunOnce(ctx); err != nil || res != (scheduler.PruneResult{}) {
		t.Fatalf("RunOnce = %+v, %v; want nothing removed", res, err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pr.Run(runCtx) }()
	for range 50 {
		h.clock.Add(time.Hour)
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.wantState("ok", scheduler.StateSucceeded)
	if n := h.place.Rows(t, "changes"); n == 0 {
		t.Error("the change feed was pruned")
	}
}
