package scheduler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"pacer/scheduler"
)

// recorder is an Observer that keeps what the engine reports.
type recorder struct {
	scheduler.NopObserver
	mu       sync.Mutex
	claims   int
	lateness []time.Duration
}

func (r *recorder) ObserveClaim(time.Duration, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.claims++
}

func (r *recorder) ObserveDispatch(_ string, lateness time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lateness = append(r.lateness, lateness)
}

func (r *recorder) counts() (int, []time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.claims, append([]time.Duration(nil), r.lateness...)
}

// putScope creates a scope of provider with a budget reserve.
func (h *harness) putScope(name, provider, url string, maxConcurrent, reserve int) {
	h.t.Helper()
	_, _, err := h.svc.PutScope(context.Background(), scheduler.ScopeInput{
		Name: name, Provider: provider, BaseURL: url, MaxConcurrent: maxConcurrent, BudgetReserve: reserve,
	}, "test")
	if err != nil {
		h.t.Fatal(err)
	}
}

// Design §11 "Idle is idle": a scope held back only by its budget reserve
// (the provider's reset ten minutes ahead) costs no claim passes faster than
// the poll interval. Run drives the loop on the mock clock for 20 s in
// 100 ms steps; a NextWake in the past made it claim at every step (~755
// empty claim transactions a second in real time).
func TestReserveBlockedScopeDoesNotSpin(t *testing.T) {
	rec := &recorder{}
	h := setup(t, scheduler.EngineConfig{Observer: rec})
	prov := newProvider(t, h.clock)
	h.putScope("a", "generic", prov.URL, 1, 10)
	prov.script("/x", answer{status: 200, headers: map[string]string{"X-RateLimit-Remaining": "5", "X-RateLimit-Limit": "100", "X-RateLimit-Reset": "600"}})
	for _, id := range []string{"a1", "a2", "a3"} {
		h.enqueue(scheduler.OperationInput{ID: id, Scope: "a", Method: "GET", Path: "/x"})
	}
	if n := h.pass(); n != 1 {
		t.Fatalf("first pass claimed %d, want 1", n)
	}
	sc, _ := h.svc.GetScope(context.Background(), "a")
	if until, _ := sc.Pause(h.clock.Now()); !until.Equal(t0.Add(10 * time.Minute)) {
		t.Fatalf("scope pause %s, want until the reset (5 left, reserve 10)", until)
	}
	before, _ := rec.counts()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.engine.Run(ctx) }()
	for range 200 {
		time.Sleep(2 * time.Millisecond) // let the loop take its turn
		h.clock.Add(100 * time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	after, _ := rec.counts()
	// 20 s at a 5 s poll interval: a handful of passes.
	if passes := after - before; passes > 8 {
		t.Fatalf("%d claim passes in 20 s of a scope blocked by its reserve, want at most 8 (poll interval %s)", passes, scheduler.DefaultPollInterval)
	}
	if got := len(prov.requests("/x")); got != 1 {
		t.Fatalf("provider saw %d requests, want 1: the reserve keeps the rest back", got)
	}
}

// Design §11 "What the API says is what will happen": an operation behind
// a paused scope reports waitingForBudget at the pause end, not scheduled
// in the past; dispatch lateness counts from that moment, so a pause is
// not lateness.
func TestPausedScopeIsNotLateness(t *testing.T) {
	rec := &recorder{}
	h := setup(t, scheduler.EngineConfig{Observer: rec})
	prov := newProvider(t, h.clock)
	h.scope("a", prov.URL, "", 1)
	prov.script("/first", answer{status: 429, headers: map[string]string{"Retry-After": "60"}}, answer{status: 200})
	h.enqueue(scheduler.OperationInput{ID: "first", Scope: "a", Method: "GET", Path: "/first"})
	h.pass()
	pauseEnd := t0.Add(time.Minute)
	h.clock.Add(10 * time.Second)
	h.enqueue(scheduler.OperationInput{ID: "behind", Scope: "a", Method: "GET", Path: "/behind"})
	op := h.wantState("behind", scheduler.StateWaitingForBudget)
	if !op.NextAttemptAt.Equal(pauseEnd) || op.BlockedBy != "" {
		t.Fatalf("behind: next attempt %s blocked by %q, want the pause end %s and nothing", op.NextAttemptAt, op.BlockedBy, pauseEnd)
	}
	h.clock.Add(50*time.Second + 200*time.Millisecond) // 200 ms after the pause end
	if n := h.pass(); n != 1 {
		t.Fatalf("claimed %d after the pause, want 1 (behind)", n)
	}
	h.wantState("behind", scheduler.StateSucceeded)
	_, lateness := rec.counts()
	if last := lateness[len(lateness)-1]; last != 200*time.Millisecond {
		t.Fatalf("dispatch lateness %s, want 200ms (from the pause end, not from its own time 50 s earlier)", last)
	}
}

// An operation behind a held scope says so (blockedBy scopeHeld), and its
// resource keeps its own time: the earliest it may go once the hold ends.
func TestHeldScopeBlocksOperations(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.scope("a", prov.URL, "", 1)
	prov.script("/first", answer{status: 401})
	h.enqueue(scheduler.OperationInput{ID: "first", Scope: "a", Method: "GET", Path: "/first"})
	h.pass()
	h.enqueue(scheduler.OperationInput{ID: "behind", Scope: "a", Method: "GET", Path: "/behind"})
	op := h.wantState("behind", scheduler.StateScheduled)
	if op.BlockedBy != scheduler.BlockedByScopeHeld {
		t.Fatalf("behind a held scope: blocked by %q, want %q", op.BlockedBy, scheduler.BlockedByScopeHeld)
	}
	if _, err := h.svc.ResumeScope(context.Background(), "a", "credentials fixed", "test"); err != nil {
		t.Fatal(err)
	}
	if op := h.op("behind"); op.BlockedBy != "" {
		t.Fatalf("after resume: blocked by %q", op.BlockedBy)
	}
}

// Design §11: resume lifts every kind of wait of the scope at once: its
// pause, its learned budget's wait for the reset and its rate slot.
func TestResumeLiftsEveryWait(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answer  answer
		rate    *scheduler.RateLimit
		reserve int
	}{
		{"Pause", answer{status: 429, headers: map[string]string{"Retry-After": "3600"}}, nil, 0},
		{"SpentBudget", answer{status: 200, headers: map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "3600"}}, nil, 0},
		{"Reserve", answer{status: 200, headers: map[string]string{"X-RateLimit-Remaining": "3", "X-RateLimit-Reset": "3600"}}, nil, 5},
		{"RateSlot", answer{status: 200}, &scheduler.RateLimit{Requests: 1, Per: time.Hour}, 0},
		{"PacedBudget", answer{status: 200, headers: map[string]string{"X-RateLimit-Remaining": "2", "X-RateLimit-Reset": "3600"}}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, prov := setupWithProvider(t)
			_, _, err := h.svc.PutScope(context.Background(), scheduler.ScopeInput{
				Name: "a", Provider: "generic", BaseURL: prov.URL, MaxConcurrent: 1, BudgetReserve: tc.reserve, RateLimit: tc.rate,
			}, "test")
			if err != nil {
				t.Fatal(err)
			}
			prov.script("/first", tc.answer)
			h.enqueue(scheduler.OperationInput{ID: "first", Scope: "a", Method: "GET", Path: "/first"})
			h.pass()
			for _, id := range []string{"b", "c", "d"} {
				h.enqueue(scheduler.OperationInput{ID: id, Scope: "a", Method: "GET", Path: "/" + id})
			}
			h.clock.Add(time.Second)
			h.pass() // a paced budget lets one go, then spaces the rest
			if n := h.pass(); n != 0 {
				t.Fatalf("claimed %d before resume: the wait is not in place", n)
			}
			if op := h.op("d"); op.State != scheduler.StateWaitingForBudget || !op.NextAttemptAt.After(h.clock.Now()) {
				t.Fatalf("before resume d is %s at %s, want waitingForBudget in the future", op.State, op.NextAttemptAt)
			}
			sc, err := h.svc.ResumeScope(context.Background(), "a", "go", "test")
			if err != nil {
				t.Fatal(err)
			}
			if st := sc.Status(h.clock.Now()); st != scheduler.ScopeOpen {
				t.Fatalf("scope %s after resume", st)
			}
			if op := h.op("d"); op.State != scheduler.StateScheduled || op.NextAttemptAt.After(h.clock.Now()) {
				t.Fatalf("after resume d is %s at %s, want scheduled now", op.State, op.NextAttemptAt)
			}
			if n := h.pass(); n < 1 {
				t.Fatalf("claimed %d right after resume, want at least 1", n)
			}
		})
	}
}
