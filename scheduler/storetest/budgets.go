package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// complete finishes claim c as a success that reports budget b.
func completeWithBudget(t *testing.T, d scheduler.Store, c scheduler.Claim, at time.Time, b *providers.Budget) {
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

func enqueueN(t *testing.T, d scheduler.Store, scope string, n int) {
	t.Helper()
	var ops []scheduler.NewOperation
	for i := range n {
		ops = append(ops, NewOp(fmt.Sprintf("%s-%d", scope, i), scope, T0))
	}
	Enqueue(t, d, T0, ops...)
}

// A learned budget spent down to the reserve pauses the scope until the
// provider's reset, before the provider has to answer 429.
func testLearnedBudgetPausesBeforeTheProviderSays429(t *testing.T, open Opener) {
	d := open(t)
	PutScope(t, d, "a", ScopeOpts{MaxConcurrent: 10})
	enqueueN(t, d, "a", 5)
	reset := T0.Add(10 * time.Minute)
	cs := Claim(t, d, T0, 1)
	completeWithBudget(t, d, cs[0], T0, &providers.Budget{Remaining: 2, Limit: 60, ResetAt: reset})

	// 4 due, 2 left before the reset: the budget is paced, one at a time.
	got := Claim(t, d, T0, 10)
	if len(got) != 1 {
		t.Fatalf("claimed %d with 2 budget left and 4 due, want 1 (paced)", len(got))
	}
	s, _ := d.GetScope(context.Background(), "a")
	if s.Budget.Remaining != 1 {
		t.Errorf("remaining after a claim = %d, want 1 (in-flight counted)", s.Budget.Remaining)
	}
	// The next paced slot lies half of the time to reset ahead.
	if n := len(Claim(t, d, T0.Add(4*time.Minute), 10)); n != 0 {
		t.Fatalf("claimed %d before the paced slot", n)
	}
	if n := len(Claim(t, d, T0.Add(5*time.Minute), 10)); n != 1 {
		t.Fatalf("claimed %d at the paced slot, want 1", n)
	}
	// Budget spent: nothing more until the reset, whatever the slots.
	if n := len(Claim(t, d, reset.Add(-time.Millisecond), 10)); n != 0 {
		t.Fatalf("claimed %d with the budget spent", n)
	}
	s, _ = d.GetScope(context.Background(), "a")
	if until, _ := s.Pause(T0.Add(6 * time.Minute)); !until.Equal(reset) {
		t.Errorf("scope pause = %s, want until the reset %s", until, reset)
	}
	if n := len(Claim(t, d, reset, 10)); n != 2 {
		t.Fatalf("claimed %d after the reset, want the 2 left", n)
	}
}

// An answer from an earlier request of the same window never raises the
// remaining figure the claim already lowered.
func testBudgetKeepsTheLowerFigureWithinAWindow(t *testing.T, open Opener) {
	d := open(t)
	PutScope(t, d, "a", ScopeOpts{MaxConcurrent: 10})
	enqueueN(t, d, "a", 4)
	reset := T0.Add(time.Hour)
	cs := Claim(t, d, T0, 1)
	completeWithBudget(t, d, cs[0], T0, &providers.Budget{Remaining: 100, Limit: 100, ResetAt: reset})
	cs = Claim(t, d, T0, 3) // remaining 97 counted
	completeWithBudget(t, d, cs[0], T0, &providers.Budget{Remaining: 99, Limit: 100, ResetAt: reset})
	s, _ := d.GetScope(context.Background(), "a")
	if got, want := s.Budget.Remaining, int64(97); got != want {
		t.Errorf("remaining = %d, want %d", got, want)
	}
	// A new window replaces the figures.
	completeWithBudget(t, d, cs[1], T0, &providers.Budget{Remaining: 100, Limit: 100, ResetAt: reset.Add(time.Hour)})
	s, _ = d.GetScope(context.Background(), "a")
	if got, want := s.Budget.Remaining, int64(100); got != want {
		t.Errorf("remaining after a new window = %d, want %d", got, want)
	}
}

// A reserve keeps requests back.
func testBudgetReserve(t *testing.T, open Opener) {
	d := open(t)
	_, _, err := d.PutScope(context.Background(), scheduler.ScopeConfig{Name: "a", Provider: "generic", BaseURL: "https://x", MaxConcurrent: 10, BudgetReserve: 3},
		scheduler.Action{Actor: "t", At: T0, Reason: "setup"})
	if err != nil {
		t.Fatal(err)
	}
	enqueueN(t, d, "a", 3)
	cs := Claim(t, d, T0, 1)
	completeWithBudget(t, d, cs[0], T0, &providers.Budget{Remaining: 3, Limit: 60, ResetAt: T0.Add(time.Minute)})
	if n := len(Claim(t, d, T0, 10)); n != 0 {
		t.Fatalf("claimed %d into the reserve", n)
	}
}

// A shared limit pauses every scope of the group and only those.
func testSharedLimitPausesTheGroup(t *testing.T, open Opener) {
	d := open(t)
	put := func(name, provider, group string) {
		_, _, err := d.PutScope(context.Background(), scheduler.ScopeConfig{Name: name, Provider: provider, BaseURL: "https://x", MaxConcurrent: 1, Group: group},
			scheduler.Action{Actor: "t", At: T0, Reason: "setup"})
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
	cs := Claim(t, d, T0, 10)
	var g1 scheduler.Claim
	for _, c := range cs {
		if c.Scope.Name == "g1" {
			g1 = c
		}
	}
	until := T0.Add(time.Minute)
	applied, err := d.Complete(context.Background(), []scheduler.Completion{{
		OperationID: g1.Operation.ID, LeaseToken: g1.Operation.LeaseToken, Attempt: g1.Operation.Attempt, FinishedAt: T0,
		Outcome: providers.Outcome{Class: providers.ClassRateLimited, Status: 429, Shared: true},
		Decision: scheduler.Decision{State: scheduler.StateWaitingForBudget, NextAttemptAt: until, Reason: "rl",
			Scope: scheduler.ScopeEffect{PauseUntil: until, PauseReason: "project quota", Shared: true}},
	}})
	if err != nil || !applied[0] {
		t.Fatal(applied, err)
	}
	for name, paused := range map[string]bool{"g1": true, "g2": true, "g3": false, "other": false} {
		s, _ := d.GetScope(context.Background(), name)
		if got := s.Status(T0) == scheduler.ScopePaused; got != paused {
			t.Errorf("%s paused = %v, want %v", name, got, paused)
		}
	}
}

// sortedIDs lists the operation IDs of claims, sorted.
func sortedIDs(cs []scheduler.Claim) []string {
	ids := ClaimedIDs(cs)
	slices.Sort(ids)
	return ids
}

// Design §12 "Separate budgets where the provider keeps them": a spent
// search budget holds back only the requests learned to spend it; a REST
// write of the same scope goes at once, and the scope stays open.
func testSpentResourceBudgetHoldsOnlyItsRequests(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	PutScope(t, d, "gh", ScopeOpts{MaxConcurrent: 10})
	Enqueue(t, d, T0, NewRequest("search-1", "gh", "GET", "/search/issues?q=a"))
	reset := T0.Add(time.Minute)
	// The provider answers the search: its budget is spent until reset.
	cs := Claim(t, d, T0, 10)
	Answer(t, d, cs[0], T0, "search", &providers.Budget{Remaining: 0, Limit: 30, ResetAt: reset, Resource: "search"}, reset, true)

	// A second search learns its route at enqueue; a REST write spends
	// the default budget.
	Enqueue(t, d, T0, NewRequest("search-2", "gh", "GET", "/search/commits?q=b"), NewRequest("patch", "gh", "PATCH", "/repos/o/r/issues/1"))
	for _, id := range []string{"search-1", "search-2"} {
		if op := GetOp(t, d, id); op.State != scheduler.StateWaitingForBudget || !op.NextAttemptAt.Equal(reset) {
			t.Errorf("%s: %s until %s, want waitingForBudget until the search reset %s", id, op.State, op.NextAttemptAt, reset)
		}
	}
	if op := GetOp(t, d, "patch"); op.State != scheduler.StateScheduled {
		t.Errorf("patch: %s, want scheduled (the search budget is not its)", op.State)
	}
	if got := sortedIDs(Claim(t, d, T0, 10)); !slices.Equal(got, []string{"patch"}) {
		t.Fatalf("claimed %v while search is spent, want [patch]", got)
	}
	s, err := d.GetScope(ctx, "gh")
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Status(T0); st != scheduler.ScopeOpen {
		t.Errorf("scope %s, want open: only its search budget is spent", st)
	}
	if len(s.Resources) != 1 || s.Resources[0].Resource != "search" || !s.Resources[0].PauseEnds.Equal(reset) {
		t.Fatalf("resources %+v, want search paused until %s", s.Resources, reset)
	}
	// The budget's pause is pacer's own audit entry on the scope.
	entries, err := d.ListScopeAudit(ctx, "gh")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(entries); n == 0 || entries[n-1].Actor != scheduler.SystemActor || entries[n-1].Action != "pause" ||
		!strings.Contains(entries[n-1].Detail, "its budget search paused until") {
		t.Fatalf("audit %+v, want pacer's pause of the search budget", entries)
	}
	// The claim wakes for the search reset, and admits both then.
	at, ok, err := d.NextWake(ctx)
	if err != nil || !ok || !at.Equal(reset) {
		t.Fatalf("next wake %s %v %v, want the search reset %s", at, ok, err, reset)
	}
	if got := sortedIDs(Claim(t, d, reset, 10)); !slices.Equal(got, []string{"search-1", "search-2"}) {
		t.Fatalf("claimed %v at the reset, want both searches", got)
	}
}

// The default budget spent does not hold a named resource's requests
// either, and a spent budget's requests report their own reset.
func testSpentDefaultBudgetHoldsOnlyItsRequests(t *testing.T, open Opener) {
	d := open(t)
	PutScope(t, d, "gh", ScopeOpts{MaxConcurrent: 10})
	Enqueue(t, d, T0, NewRequest("graphql", "gh", "POST", "/graphql"), NewRequest("patch", "gh", "PATCH", "/repos/o/r"))
	cs := Claim(t, d, T0, 10)
	reset := T0.Add(time.Hour)
	for _, c := range cs {
		switch c.Operation.ID {
		case "graphql":
			Answer(t, d, c, T0, "graphql", &providers.Budget{Remaining: 4000, Limit: 5000, ResetAt: reset, Resource: "graphql"}, time.Time{}, true)
		case "patch":
			Answer(t, d, c, T0, "", &providers.Budget{Remaining: 0, Limit: 5000, ResetAt: reset}, reset, true)
		}
	}
	if got := sortedIDs(Claim(t, d, T0, 10)); !slices.Equal(got, []string{"graphql"}) {
		t.Fatalf("claimed %v with the core budget spent, want [graphql]", got)
	}
	if op := GetOp(t, d, "patch"); op.State != scheduler.StateWaitingForBudget || !op.NextAttemptAt.Equal(reset) {
		t.Errorf("patch: %s until %s, want waitingForBudget until %s", op.State, op.NextAttemptAt, reset)
	}
	s, _ := d.GetScope(context.Background(), "gh")
	if st := s.Status(T0); st != scheduler.ScopePaused {
		t.Errorf("scope %s, want paused: its default budget is spent", st)
	}
}
