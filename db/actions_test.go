package db_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pacer/internal/pacertest"
	"pacer/providers"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

func TestDurableAcrossReopen(t *testing.T) {
	ctx := context.Background()
	d, path := newTestDB(t)
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{MaxConcurrent: 2, Rate: &scheduler.RateLimit{Requests: 1, Per: time.Minute}})
	storetest.PutScope(t, d, "b", storetest.ScopeOpts{})
	storetest.Enqueue(t, d, t0, storetest.NewOp("a-1", "a", t0), storetest.NewOp("a-2", "a", t0), storetest.NewOp("b-1", "b", t0.Add(time.Hour)))
	c := storetest.Claim(t, d, t0, 10)[0] // a-1; the rate then spaces a's next send by a minute
	storetest.Complete(t, d, c, t0.Add(time.Second), scheduler.Decision{
		State: scheduler.StateWaitingForBudget, NextAttemptAt: t0.Add(20 * time.Minute),
		Scope: scheduler.ScopeEffect{PauseUntil: t0.Add(10 * time.Minute), PauseReason: "rate limited",
			Budget: &providers.Budget{Remaining: 0, Limit: 60, ResetAt: t0.Add(10 * time.Minute)}},
	}, providers.Outcome{Class: providers.ClassRateLimited, Status: 429})
	storetest.Enqueue(t, d, t0, storetest.NewOp("a-3", "a", t0))
	running := storetest.Claim(t, d, t0.Add(10*time.Minute), 10) // a-2, left running by a "crash"
	if fmt.Sprint(storetest.ClaimedIDs(running)) != "[a-2]" {
		t.Fatalf("claimed %v", storetest.ClaimedIDs(running))
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	d = pacertest.OpenStoreAt(t, path)
	s, err := d.GetScope(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if !s.PausedUntil.Equal(t0.Add(10*time.Minute)) || s.Budget == nil || s.Budget.Limit != 60 || s.InFlight != 1 {
		t.Fatalf("scope after reopen %+v", s)
	}
	if op := storetest.GetOp(t, d, "a-1"); op.State != scheduler.StateWaitingForBudget || !op.NextAttemptAt.Equal(t0.Add(20*time.Minute)) {
		t.Fatalf("a-1 after reopen %+v", op)
	}
	expired, err := d.ListRunning(ctx, t0.Add(11*time.Minute), 10)
	if err != nil || fmt.Sprint(storetest.ClaimedIDs(expired)) != "[a-2]" || expired[0].Operation.LeaseToken != 1 {
		t.Fatalf("running after reopen %v, %v", storetest.ClaimedIDs(expired), err)
	}
	// Nothing runs early after the restart: a's next rate slot is at +11m.
	if got := storetest.Claim(t, d, t0.Add(11*time.Minute-time.Millisecond), 10); len(got) != 0 {
		t.Fatalf("claimed %v before the rate slot", storetest.ClaimedIDs(got))
	}
	if got := storetest.ClaimedIDs(storetest.Claim(t, d, t0.Add(11*time.Minute), 10)); fmt.Sprint(got) != "[a-3]" {
		t.Fatalf("claimed %v at the rate slot", got)
	}
	if at, ok, err := d.NextWake(ctx); err != nil || !ok || !at.Equal(t0.Add(11*time.Minute)) {
		t.Fatalf("next wake %v, %v, %v: want +11m (rate slot and lease expiry)", at, ok, err)
	}
}
