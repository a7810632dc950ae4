package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// Design §11 "Deadlines end work even when it never ran", in the store:
// waiting operations past their deadline end as the policy decides (held
// for a maybe-applied mutation), whatever else they are; running, held
// and not yet overdue ones are left alone; the change feed sees it.
func testExpireOverdue(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	for _, s := range []string{"a", "b", "c", "d"} {
		PutScope(t, d, s, ScopeOpts{})
	}
	now := T0.Add(2 * time.Hour)
	Enqueue(t, d, T0,
		OpWith("late", "a", T0, time.Hour),                      // deadline T0+1h
		OpWith("later", "a", T0.Add(30*time.Minute), time.Hour), // T0+1h30
		OpWith("edge", "a", T0.Add(time.Hour), time.Hour),       // T0+2h: not before now
		OpWith("fresh", "a", T0.Add(3*time.Hour), time.Hour),    // T0+4h
		OpWith("waiting", "b", T0, time.Hour),
		OpWith("running", "c", T0, time.Hour),
		OpWith("held", "d", T0, time.Hour),
	)
	// waiting: an uncertain attempt was retried, then a rate limit.
	w := Claim(t, d, T0, 4)
	byID := map[string]scheduler.Claim{}
	for _, c := range w {
		byID[c.Operation.ID] = c
	}
	Complete(t, d, byID["waiting"], T0.Add(time.Second), scheduler.Decision{State: scheduler.StateScheduled, NextAttemptAt: T0.Add(2 * time.Second), MaybeApplied: true, Reason: "uncertain"},
		providers.Outcome{Class: providers.ClassUnknownOutcome, Reason: "timeout"})
	Complete(t, d, byID["held"], T0.Add(time.Second), scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked, Reason: "401"},
		providers.Outcome{Class: providers.ClassAuthRevoked, Status: 401})
	if _, ok := byID["late"]; ok {
		delete(byID, "late") // scope a's head was claimed: put it back waiting
		Complete(t, d, w[0], T0.Add(time.Second), scheduler.Decision{State: scheduler.StateScheduled, NextAttemptAt: T0.Add(time.Minute), Reason: "503"}, providers.Outcome{Class: providers.ClassTransient, Status: 503})
	}
	c2 := Claim(t, d, T0.Add(3*time.Second), 4)
	for _, c := range c2 {
		if c.Operation.ID == "waiting" {
			Complete(t, d, c, T0.Add(4*time.Second), scheduler.Decision{State: scheduler.StateWaitingForBudget, NextAttemptAt: T0.Add(10 * time.Minute), Uncounted: true, Reason: "429"},
				providers.Outcome{Class: providers.ClassRateLimited, Status: 429})
		}
	}
	for id, want := range map[string]scheduler.State{"waiting": scheduler.StateWaitingForBudget, "running": scheduler.StateRunning, "held": scheduler.StateHeld, "late": scheduler.StateScheduled} {
		if got := GetOp(t, d, id).State; got != want {
			t.Fatalf("setup: %s is %s, want %s", id, got, want)
		}
	}
	before := Feed(t, d, scheduler.ChangeFilter{Limit: 1000})

	res := Expire(t, d, now, 100)
	if res.Expired != 3 || res.More || !res.Next.Equal(T0.Add(2*time.Hour)) {
		t.Fatalf("result %+v, want 3 expired, no more, next deadline T0+2h (edge)", res)
	}
	for _, id := range []string{"late", "later"} {
		op := GetOp(t, d, id)
		if op.State != scheduler.StateFailed || op.FailureReason != scheduler.FailureRetryBudgetExhausted || !op.NextAttemptAt.IsZero() || !op.UpdatedAt.Equal(now) {
			t.Errorf("%s: %s/%s next %s updated %s, want failed/retryBudgetExhausted at now", id, op.State, op.FailureReason, op.NextAttemptAt, op.UpdatedAt)
		}
	}
	if op := GetOp(t, d, "waiting"); op.State != scheduler.StateHeld || op.HoldReason != scheduler.HoldUnknownOutcome || !op.MaybeApplied {
		t.Errorf("maybe-applied waiting mutation: %s/%s maybeApplied=%v, want held/unknownOutcome", op.State, op.HoldReason, op.MaybeApplied)
	}
	for id, want := range map[string]scheduler.State{"edge": scheduler.StateScheduled, "fresh": scheduler.StateScheduled, "running": scheduler.StateRunning, "held": scheduler.StateHeld} {
		if got := GetOp(t, d, id).State; got != want {
			t.Errorf("%s: %s, want %s (untouched)", id, got, want)
		}
	}
	after := Feed(t, d, scheduler.ChangeFilter{Limit: 1000})
	added := strings.TrimSpace(strings.TrimPrefix(after, before))
	for _, want := range []string{":late:a:failed", ":later:a:failed", ":waiting:b:held"} {
		if !strings.Contains(added, want) {
			t.Errorf("change feed %q lacks %s", added, want)
		}
	}
	if n := len(strings.Fields(added)); n != 3 {
		t.Errorf("change feed gained %d entries (%q), want 3", n, added)
	}
	cs, err := d.ListChanges(ctx, scheduler.ChangeFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if last := cs[len(cs)-1]; !last.At.Equal(now) {
		t.Errorf("change at %s, want %s", last.At, now)
	}
	// A second run finds nothing.
	if res := Expire(t, d, now, 100); res.Expired != 0 || res.More {
		t.Fatalf("second run %+v", res)
	}
}

// ExpireOverdue works in bounded batches, earliest deadline first.
func testExpireOverdueBatches(t *testing.T, open Opener) {
	d := openWithOps(t, open, OpWith("second", "a", T0.Add(time.Minute), time.Hour), OpWith("first", "a", T0, time.Hour))
	now := T0.Add(3 * time.Hour)
	res := Expire(t, d, now, 1)
	if res.Expired != 1 || !res.More || !res.Next.Equal(T0.Add(time.Hour+time.Minute)) {
		t.Fatalf("first batch %+v", res)
	}
	if GetOp(t, d, "first").State != scheduler.StateFailed || GetOp(t, d, "second").State != scheduler.StateScheduled {
		t.Fatal("the batch did not take the earliest deadline first")
	}
	res = Expire(t, d, now, 1)
	if res.Expired != 1 || !res.More || !res.Next.IsZero() {
		t.Fatalf("second batch %+v", res)
	}
	if res := Expire(t, d, now, 1); res.Expired != 0 || res.More || !res.Next.IsZero() {
		t.Fatalf("third batch %+v", res)
	}
}

// A decision that does not end the operation is refused, and nothing is
// written.
func testExpireOverdueRefusesOtherStates(t *testing.T, open Opener) {
	d := openWithOps(t, open, OpWith("x", "a", T0, time.Hour), OpWith("y", "a", T0, time.Hour))
	now := T0.Add(2 * time.Hour)
	calls := 0
	_, err := d.ExpireOverdue(context.Background(), scheduler.ExpireParams{Now: now, Before: now, Limit: 10,
		Decide: func(op scheduler.Operation) scheduler.Decision {
			calls++
			if calls == 1 {
				return scheduler.DefaultPolicy().Expire(op, now)
			}
			return scheduler.Decision{State: scheduler.StateScheduled, NextAttemptAt: now}
		}})
	if !errors.Is(err, scheduler.ErrInvalidTransition) {
		t.Fatalf("err = %v, want ErrInvalidTransition", err)
	}
	for _, id := range []string{"x", "y"} {
		if got := GetOp(t, d, id).State; got != scheduler.StateScheduled {
			t.Errorf("%s: %s, want scheduled (rolled back)", id, got)
		}
	}
}
