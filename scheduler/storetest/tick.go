package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// testCompleteAndClaim: the engine's tick. The completions apply first and
// the claim sees them (a freed slot goes to a new claim, a pause the
// answer taught keeps the scope back); a failure rolls back both halves.
func testCompleteAndClaim(t *testing.T, open Opener) {
	ctx := context.Background()
	success := scheduler.Decision{State: scheduler.StateSucceeded}
	ok := providers.Outcome{Class: providers.ClassSuccess, Status: 200}
	at := T0.Add(time.Second)
	lease := scheduler.ClaimParams{Now: at, Limit: 10, LeaseFor: time.Minute}

	t.Run("FreedSlotGoesToTheClaim", func(t *testing.T) {
		t.Parallel()
		d := open(t)
		PutScope(t, d, "a", ScopeOpts{MaxConcurrent: 1})
		Enqueue(t, d, T0, NewOp("first", "a", T0), NewOp("second", "a", T0))
		c := Claim(t, d, T0, 10)
		if len(c) != 1 {
			t.Fatalf("claimed %v, want first only (one slot)", ClaimedIDs(c))
		}
		applied, claims, err := d.CompleteAndClaim(ctx, []scheduler.Completion{CompletionOf(c[0], at, success, ok)}, lease)
		if err != nil || len(applied) != 1 || !applied[0] {
			t.Fatalf("CompleteAndClaim: applied %v, %v", applied, err)
		}
		if got := ClaimedIDs(claims); len(got) != 1 || got[0] != "second" {
			t.Fatalf("claimed %v, want [second]: the completion freed the only slot", got)
		}
		if op := GetOp(t, d, "first"); op.State != scheduler.StateSucceeded {
			t.Fatalf("first is %s, want succeeded", op.State)
		}
		if s := claims[0].Scope; s.InFlight != 1 {
			t.Fatalf("claimed scope in flight %d, want 1", s.InFlight)
		}
	})

	t.Run("PauseTaughtHoldsTheClaim", func(t *testing.T) {
		t.Parallel()
		d := open(t)
		PutScope(t, d, "a", ScopeOpts{})
		PutScope(t, d, "b", ScopeOpts{})
		Enqueue(t, d, T0, NewOp("a1", "a", T0))
		c := Claim(t, d, T0, 10)
		Enqueue(t, d, T0, NewOp("a2", "a", T0), NewOp("b1", "b", T0))
		pause := at.Add(time.Minute)
		limited := scheduler.Decision{
			State: scheduler.StateWaitingForBudget, NextAttemptAt: pause, Reason: "retry-after",
			Scope: scheduler.ScopeEffect{PauseUntil: pause, PauseReason: "rate limited"},
		}
		_, claims, err := d.CompleteAndClaim(ctx, []scheduler.Completion{CompletionOf(c[0], at, limited, providers.Outcome{Class: providers.ClassRateLimited, Status: 429})}, lease)
		if err != nil {
			t.Fatal(err)
		}
		if got := ClaimedIDs(claims); len(got) != 1 || got[0] != "b1" {
			t.Fatalf("claimed %v, want [b1]: a is paused by the answer committed in the same tick", got)
		}
	})

	t.Run("FailureRollsBackBoth", func(t *testing.T) {
		t.Parallel()
		d := open(t)
		PutScope(t, d, "a", ScopeOpts{})
		Enqueue(t, d, T0, NewOp("one", "a", T0), NewOp("two", "a", T0))
		c := Claim(t, d, T0, 1)
		Enqueue(t, d, T0, NewOp("three", "a", T0))
		invalid := scheduler.Decision{State: scheduler.StateRunning} // no completion decides running
		cs := []scheduler.Completion{
			CompletionOf(c[0], at, success, ok),
			CompletionOf(c[0], at, invalid, providers.Outcome{Class: providers.ClassPermanent, Status: 400}),
		}
		if _, claims, err := d.CompleteAndClaim(ctx, cs, lease); err == nil || len(claims) != 0 {
			t.Fatalf("CompleteAndClaim with an invalid decision: claims %v, err %v; want an error and no claim", ClaimedIDs(claims), err)
		}
		if op := GetOp(t, d, "one"); op.State != scheduler.StateRunning {
			t.Fatalf("one is %s after a failed tick, want still running (rolled back)", op.State)
		}
		for _, id := range []string{"two", "three"} {
			if op := GetOp(t, d, id); op.State != scheduler.StateScheduled || op.Attempt != 0 {
				t.Fatalf("%s is %s (attempt %d) after a failed tick, want scheduled and never claimed", id, op.State, op.Attempt)
			}
		}
		// The same completion alone still applies: nothing half-written.
		applied, claims, err := d.CompleteAndClaim(ctx, cs[:1], lease)
		if err != nil || !applied[0] || len(claims) != 2 {
			t.Fatalf("retry: applied %v, claimed %v, %v", applied, ClaimedIDs(claims), err)
		}
	})

	t.Run("FencedCompletionStillClaims", func(t *testing.T) {
		t.Parallel()
		d := openWithOps(t, open, NewOp("op", "a", T0), NewOp("next", "a", T0))
		c := Claim(t, d, T0, 1)[0]
		stale := c
		stale.Operation.LeaseToken--
		applied, claims, err := d.CompleteAndClaim(ctx, []scheduler.Completion{CompletionOf(stale, at, success, ok)}, lease)
		if err != nil || len(applied) != 1 || applied[0] {
			t.Fatalf("fenced completion: applied %v, %v; want [false]", applied, err)
		}
		if got := ClaimedIDs(claims); len(got) != 1 || got[0] != "next" {
			t.Fatalf("claimed %v, want [next]", got)
		}
		if op := GetOp(t, d, "op"); op.State != scheduler.StateRunning {
			t.Fatalf("op is %s, want running: a stale completion changes nothing", op.State)
		}
	})

	t.Run("NeitherHalf", func(t *testing.T) {
		t.Parallel()
		d := openWithOps(t, open, NewOp("op", "a", T0))
		applied, claims, err := d.CompleteAndClaim(ctx, nil, scheduler.ClaimParams{Now: at})
		if err != nil || len(applied) != 0 || len(claims) != 0 {
			t.Fatalf("empty tick: %v %v %v", applied, claims, err)
		}
		if _, _, err := d.CompleteAndClaim(ctx, nil, scheduler.ClaimParams{Now: at, Limit: 1}); err == nil {
			t.Fatal("a claim without a lease duration was accepted")
		} else if errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	})
}
