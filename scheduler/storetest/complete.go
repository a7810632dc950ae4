package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

func testComplete(t *testing.T, open Opener) {
	ctx := context.Background()

	t.Run("Applied", func(t *testing.T) {
		t.Parallel()
		d := openWithOps(t, open, NewOp("op", "a", T0))
		c := Claim(t, d, T0, 1)[0]
		hint := providers.Hint{Source: "retry-after", Raw: "57", At: T0.Add(58 * time.Second)}
		reset := T0.Add(time.Hour)
		ok := Complete(t, d, c, T0.Add(time.Second), scheduler.Decision{
			State: scheduler.StateWaitingForBudget, NextAttemptAt: hint.At, Reason: "retry-after 57s honoured",
			Scope: scheduler.ScopeEffect{PauseUntil: hint.At, PauseReason: "rate limited",
				Budget: &providers.Budget{Remaining: 0, Limit: 5000, ResetAt: reset}},
		}, providers.Outcome{Class: providers.ClassRateLimited, Status: 429, Hint: hint, Reason: "primary", Detail: strings.Repeat("é", 2000)})
		if !ok {
			t.Fatal("not applied")
		}
		op := GetOp(t, d, "op")
		// The budget spent until the reset holds it back past its own time.
		if op.State != scheduler.StateWaitingForBudget || !op.NextAttemptAt.Equal(reset) || !op.LeaseExpiresAt.IsZero() ||
			op.LastOutcome == nil || op.LastOutcome.Class != providers.ClassRateLimited || op.LastOutcome.Status != 429 ||
			op.LastOutcome.Hint == nil || op.LastOutcome.Hint.Raw != "57" || !op.LastOutcome.At.Equal(T0.Add(time.Second)) {
			t.Fatalf("op %+v / %+v", op, op.LastOutcome)
		}
		if n := len(op.LastOutcome.Detail); n > providers.MaxDetail || !strings.HasSuffix(op.LastOutcome.Detail, "é") {
			t.Fatalf("detail not bounded on a rune boundary: %d bytes", n)
		}
		as, _ := d.ListAttempts(ctx, "op")
		a := as[0]
		if a.Class != providers.ClassRateLimited || a.Status != 429 || a.Hint == nil || !a.Hint.At.Equal(hint.At) ||
			a.DecidedState != scheduler.StateWaitingForBudget || !a.DecidedAt.Equal(hint.At) ||
			a.Decision != "retry-after 57s honoured" || a.Stale || a.Duration() != time.Second {
			t.Fatalf("attempt %+v", a)
		}
		s, _ := d.GetScope(ctx, "a")
		if !s.PausedUntil.Equal(hint.At) || s.PauseReason != "rate limited" || s.Budget == nil ||
			s.Budget.Remaining != 0 || s.Budget.Limit != 5000 || !s.Budget.ResetAt.Equal(reset) || s.InFlight != 0 {
			t.Fatalf("scope %+v", s)
		}
	})

	t.Run("SuccessKeepsResult", func(t *testing.T) {
		t.Parallel()
		d := openWithOps(t, open, NewOp("op", "a", T0))
		c := Claim(t, d, T0, 1)[0]
		res := &scheduler.Result{Status: 201, Headers: map[string]string{"Location": "/x/1"}, Body: []byte(`{"id":1}`)}
		Complete(t, d, c, T0, scheduler.Decision{State: scheduler.StateSucceeded, Result: res}, providers.Outcome{Class: providers.ClassSuccess, Status: 201})
		op := GetOp(t, d, "op")
		if op.State != scheduler.StateSucceeded || op.Result == nil || op.Result.Status != 201 || string(op.Result.Body) != `{"id":1}` || !op.NextAttemptAt.IsZero() {
			t.Fatalf("op %+v", op)
		}
	})

	t.Run("FencedOutByStaleToken", func(t *testing.T) {
		t.Parallel()
		d := openWithOps(t, open, NewOp("op", "a", T0))
		c := Claim(t, d, T0, 1)[0]
		before := GetOp(t, d, "op")
		stale := c
		stale.Operation.LeaseToken = c.Operation.LeaseToken - 1
		if Complete(t, d, stale, T0.Add(time.Second), scheduler.Decision{State: scheduler.StateSucceeded,
			Scope: scheduler.ScopeEffect{PauseUntil: T0.Add(time.Hour)}}, providers.Outcome{Class: providers.ClassSuccess, Status: 200}) {
			t.Fatal("stale completion applied")
		}
		if after := GetOp(t, d, "op"); after.State != scheduler.StateRunning || !after.UpdatedAt.Equal(before.UpdatedAt) || after.LastOutcome != nil {
			t.Fatalf("op changed: %+v", after)
		}
		if s, _ := d.GetScope(ctx, "a"); !s.PausedUntil.IsZero() {
			t.Fatal("stale completion paused the scope")
		}
	})

	t.Run("PauseNeverShortened", func(t *testing.T) {
		t.Parallel()
		d := openWithOps(t, open, NewOp("op-1", "a", T0), NewOp("op-2", "a", T0))
		cs := Claim(t, d, T0, 2)
		long, short := T0.Add(time.Hour), T0.Add(time.Minute)
		applied, err := d.Complete(ctx, []scheduler.Completion{
			completion(cs[0], T0, long), completion(cs[1], T0, short),
		})
		if err != nil || !applied[0] || !applied[1] {
			t.Fatalf("complete = %v, %v", applied, err)
		}
		if s, _ := d.GetScope(ctx, "a"); !s.PausedUntil.Equal(long) || s.PauseReason != "pause until "+long.Format(time.RFC3339) {
			t.Fatalf("paused until %v (%s), want %v", s.PausedUntil, s.PauseReason, long)
		}
	})

	t.Run("HoldsScope", func(t *testing.T) {
		t.Parallel()
		d := openWithOps(t, open, NewOp("op-1", "a", T0), NewOp("op-2", "a", T0.Add(time.Second)))
		c := Claim(t, d, T0, 1)[0]
		Complete(t, d, c, T0, scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked,
			Scope: scheduler.ScopeEffect{Hold: scheduler.HoldAuthRevoked}}, providers.Outcome{Class: providers.ClassAuthRevoked, Status: 401})
		if op := GetOp(t, d, "op-1"); op.State != scheduler.StateHeld || op.HoldReason != scheduler.HoldAuthRevoked {
			t.Fatalf("op %+v", op)
		}
		if got := Claim(t, d, T0.Add(time.Hour), 10); len(got) != 0 {
			t.Fatalf("claimed %d from a held scope", len(got))
		}
	})

	t.Run("ErrInvalidDecision", func(t *testing.T) {
		t.Parallel()
		d := openWithOps(t, open, NewOp("op", "a", T0))
		c := Claim(t, d, T0, 1)[0]
		_, err := d.Complete(ctx, []scheduler.Completion{{OperationID: "op", LeaseToken: c.Operation.LeaseToken, Attempt: 1,
			FinishedAt: T0, Decision: scheduler.Decision{State: scheduler.StateHeld}}})
		if err == nil {
			t.Fatal("held without a reason accepted")
		}
		if op := GetOp(t, d, "op"); op.State != scheduler.StateRunning {
			t.Fatalf("op %+v", op)
		}
	})
}

// completion is a rate-limited completion of c that pauses the scope until.
func completion(c scheduler.Claim, at, until time.Time) scheduler.Completion {
	return scheduler.Completion{
		OperationID: c.Operation.ID, LeaseToken: c.Operation.LeaseToken, Attempt: c.Operation.Attempt, FinishedAt: at,
		Outcome: providers.Outcome{Class: providers.ClassRateLimited, Status: 429},
		Decision: scheduler.Decision{State: scheduler.StateWaitingForBudget, NextAttemptAt: until,
			Scope: scheduler.ScopeEffect{PauseUntil: until, PauseReason: "pause until " + until.Format(time.RFC3339)}},
	}
}

// The maybe-applied mark: set by an uncertain attempt's completion, never
// unset by later ones, kept across a release, cleared by a resolve. A
// rate-limited completion gives back the attempt's count.
func testCompleteRecordsMaybeAppliedAndCounts(t *testing.T, open Opener) {
	ctx := context.Background()
	d := openWithOps(t, open, NewOp("m", "a", T0))
	at := T0
	step := func(dec scheduler.Decision, out providers.Outcome) scheduler.Operation {
		t.Helper()
		at = at.Add(time.Minute)
		cs := Claim(t, d, at, 1)
		if len(cs) != 1 {
			t.Fatalf("nothing claimed at %s", at)
		}
		if dec.State.Due() {
			dec.NextAttemptAt = at.Add(time.Second)
		}
		Complete(t, d, cs[0], at, dec, out)
		return GetOp(t, d, "m")
	}
	op := step(scheduler.Decision{State: scheduler.StateWaitingForBudget, Uncounted: true}, providers.Outcome{Class: providers.ClassRateLimited, Status: 429})
	if op.MaybeApplied || op.BudgetAttempts != 0 || op.Attempt != 1 {
		t.Fatalf("after a rate limit: maybeApplied=%v budgetAttempts=%d attempt=%d, want false 0 1", op.MaybeApplied, op.BudgetAttempts, op.Attempt)
	}
	op = step(scheduler.Decision{State: scheduler.StateScheduled, MaybeApplied: true}, providers.Outcome{Class: providers.ClassUnknownOutcome})
	if !op.MaybeApplied || op.BudgetAttempts != 1 || op.Attempt != 2 {
		t.Fatalf("after an uncertain attempt: maybeApplied=%v budgetAttempts=%d attempt=%d, want true 1 2", op.MaybeApplied, op.BudgetAttempts, op.Attempt)
	}
	op = step(scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldUnknownOutcome}, providers.Outcome{Class: providers.ClassTransient, Status: 503})
	if !op.MaybeApplied || op.BudgetAttempts != 2 {
		t.Fatalf("a later certain attempt unset the mark: maybeApplied=%v budgetAttempts=%d", op.MaybeApplied, op.BudgetAttempts)
	}
	act := scheduler.Action{Actor: "staff", At: at, Reason: "try again"}
	if op, err := d.ReleaseOperation(ctx, "m", at, act); err != nil || !op.MaybeApplied {
		t.Fatalf("release: maybeApplied=%v err=%v, want kept", op.MaybeApplied, err)
	}
	step(scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldUnknownOutcome}, providers.Outcome{Class: providers.ClassTransient, Status: 503})
	op, err := d.ResolveOperation(ctx, "m", false, act)
	if err != nil || op.MaybeApplied || op.State != scheduler.StateFailed {
		t.Fatalf("resolve: %s maybeApplied=%v err=%v, want failed and cleared", op.State, op.MaybeApplied, err)
	}
	if got := GetOp(t, d, "m"); got.MaybeApplied {
		t.Fatal("resolve did not clear the mark in the store")
	}
}
