package db_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pacer/db"
	"pacer/providers"
	"pacer/scheduler"
)

// complete finishes claim c as a success that reports budget b.
func completeWithBudget(t *testing.T, d *db.DB, c scheduler.Claim, at time.Time, b *providers.Budget) {
	t.Helper()
	applied, err := d.Complete(context.Background(), []scheduler.Completion{{
		OperationID: c.Operation.ID, LeaseToken: c.Operation.LeaseToken, Attempt: c.Operation.Attempt, FinishedAt: at,
		Outcome:  providers.Outcome{Class: providers.ClassSuccess, Status: 200, Budget: b},
		Decision: scheduler.Decision{State: scheduler.StateSucceeded, Reason: "ok", Scope: scheduler.ScopeEffect{Budget: b}},
	}})
	if err != nil || !applied[0] {
		t.Fatalf("complete %s: %v %v", c.Operation.ID, applied, err)
	}
}

func enqueueN(t *testing.T, d *db.DB, scope string, n int) {
	t.Helper()
	var ops []scheduler.NewOperation
	for i := range n {
		ops = append(ops, newOp(fmt.Sprintf("%s-%d", scope, i), scope, t0))
	}
	enqueue(t, d, t0, ops...)
}

// A learned budget spent down to the reserve pauses the scope until the
// provider's reset, before the provider has to answer 429.
func TestLearnedBudgetPausesBeforeTheProviderSays429(t *testing.T) {
	d, _ := newTestDB(t)
	putScope(t, d, "a", scopeOpts{MaxConcurrent: 10})
	enqueueN(t, d, "a", 5)
	reset := t0.Add(10 * time.Minute)
	cs := claim(t, d, t0, 1)
	completeWithBudget(t, d, cs[0], t0, &providers.Budget{Remaining: 2, Limit: 60, ResetAt: reset})

	// 4 due, 2 left before the reset: the budget is paced, one at a time.
	got := claim(t, d, t0, 10)
	if len(got) != 1 {
		t.Fatalf("claimed %d with 2 budget left and 4 due, want 1 (paced)", len(got))
	}
	s, _ := d.GetScope(context.Background(), "a")
	if s.Budget.Remaining != 1 {
		t.Errorf("remaining after a claim = %d, want 1 (in-flight counted)", s.Budget.Remaining)
	}
	// The next paced slot lies half of the time to reset ahead.
	if n := len(claim(t, d, t0.Add(4*time.Minute), 10)); n != 0 {
		t.Fatalf("claimed %d before the paced slot", n)
	}
	if n := len(claim(t, d, t0.Add(5*time.Minute), 10)); n != 1 {
		t.Fatalf("claimed %d at the paced slot, want 1", n)
	}
	// Budget spent: nothing more until the reset, whatever the slots.
	if n := len(claim(t, d, reset.Add(-time.Millisecond), 10)); n != 0 {
		t.Fatalf("claimed %d with the budget spent", n)
	}
	s, _ = d.GetScope(context.Background(), "a")
	if until, _ := s.Pause(t0.Add(6 * time.Minute)); !until.Equal(reset) {
		t.Errorf("scope pause = %s, want until the reset %s", until, reset)
	}
	if n := len(claim(t, d, reset, 10)); n != 2 {
		t.Fatalf("claimed %d after the reset, want the 2 left", n)
	}
}

// An answer from an earlier request of the same window never raises the
// remaining figure the claim already lowered.
func TestBudgetKeepsTheLowerFigureWithinAWindow(t *testing.T) {
	d, _ := newTestDB(t)
	putScope(t, d, "a", scopeOpts{MaxConcurrent: 10})
	enqueueN(t, d, "a", 4)
	reset := t0.Add(time.Hour)
	cs := claim(t, d, t0, 1)
	completeWithBudget(t, d, cs[0], t0, &providers.Budget{Remaining: 100, Limit: 100, ResetAt: reset})
	cs = claim(t, d, t0, 3) // remaining 97 counted
	completeWithBudget(t, d, cs[0], t0, &providers.Budget{Remaining: 99, Limit: 100, ResetAt: reset})
	s, _ := d.GetScope(context.Background(), "a")
	if got, want := s.Budget.Remaining, int64(97); got != want {
		t.Errorf("remaining = %d, want %d", got, want)
	}
	// A new window replaces the figures.
	completeWithBudget(t, d, cs[1], t0, &providers.Budget{Remaining: 100, Limit: 100, ResetAt: reset.Add(time.Hour)})
	s, _ = d.GetScope(context.Background(), "a")
	if got, want := s.Budget.Remaining, int64(100); got != want {
		t.Errorf("remaining after a new window = %d, want %d", got, want)
	}
}

// A reserve keeps requests back.
func TestBudgetReserve(t *testing.T) {
	d, _ := newTestDB(t)
	_, _, err := d.PutScope(context.Background(), scheduler.ScopeConfig{Name: "a", Provider: "generic", BaseURL: "https://x", MaxConcurrent: 10, BudgetReserve: 3},
		scheduler.Action{Actor: "t", At: t0, Reason: "setup"})
	if err != nil {
		t.Fatal(err)
	}
	enqueueN(t, d, "a", 3)
	cs := claim(t, d, t0, 1)
	completeWithBudget(t, d, cs[0], t0, &providers.Budget{Remaining: 3, Limit: 60, ResetAt: t0.Add(time.Minute)})
	if n := len(claim(t, d, t0, 10)); n != 0 {
		t.Fatalf("claimed %d into the reserve", n)
	}
}

// A shared limit pauses every scope of the group and only those.
func TestSharedLimitPausesTheGroup(t *testing.T) {
	d, _ := newTestDB(t)
	put := func(name, provider, group string) {
		_, _, err := d.PutScope(context.Background(), scheduler.ScopeConfig{Name: name, Provider: provider, BaseURL: "https://x", MaxConcurrent: 1, Group: group},
			scheduler.Action{Actor: "t", At: t0, Reason: "setup"})
		if err != nil {
			t.Fatal(err)
		}
	}
	put("g1", "google", "")      // group "google" by default
	put("g2", "google", "")      // same group
	put("g3", "google", "app-b") // another app: another group
	put("other", "generic", "")  // another provider
	for _, s := range []string{"g1", "g2", "g3", "other"} {
		enqueueN(t, d, s, 2)
	}
	cs := claim(t, d, t0, 10)
	var g1 scheduler.Claim
	for _, c := range cs {
		if c.Scope.Name == "g1" {
			g1 = c
		}
	}
	until := t0.Add(time.Minute)
	applied, err := d.Complete(context.Background(), []scheduler.Completion{{
		OperationID: g1.Operation.ID, LeaseToken: g1.Operation.LeaseToken, Attempt: g1.Operation.Attempt, FinishedAt: t0,
		Outcome: providers.Outcome{Class: providers.ClassRateLimited, Status: 429, Shared: true},
		Decision: scheduler.Decision{State: scheduler.StateWaitingForBudget, NextAttemptAt: until, Reason: "rl",
			Scope: scheduler.ScopeEffect{PauseUntil: until, PauseReason: "project quota", Shared: true}},
	}})
	if err != nil || !applied[0] {
		t.Fatal(applied, err)
	}
	for name, paused := range map[string]bool{"g1": true, "g2": true, "g3": false, "other": false} {
		s, _ := d.GetScope(context.Background(), name)
		if got := s.Status(t0) == scheduler.ScopePaused; got != paused {
			t.Errorf("%s paused = %v, want %v", name, got, paused)
		}
	}
}
