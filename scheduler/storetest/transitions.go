package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
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

	t.Run("ManyInOneCall", func(t *testing.T) {
		// One call with more completions than a store may take in one
		// statement, in any order: each is fenced and applied as if alone,
		// in order, so a second completion of the same attempt (or one of
		// a stale lease) is fenced out, and each operation gets its own
		// decision, outcome and result.
		t.Parallel()
		var ops []scheduler.NewOperation
		for i := range 45 {
			ops = append(ops, NewOp(fmt.Sprintf("op-%02d", i), "a", T0))
		}
		d := open(t)
		PutScope(t, d, "a", ScopeOpts{MaxConcurrent: 100})
		Enqueue(t, d, T0, ops...)
		claims := Claim(t, d, T0, 45)
		if len(claims) != 45 {
			t.Fatalf("claimed %d, want 45", len(claims))
		}
		at := T0.Add(time.Second)
		decide := func(i int) (scheduler.Decision, providers.Outcome) {
			switch i % 3 {
			case 0:
				return scheduler.Decision{State: scheduler.StateSucceeded, Reason: "ok",
					Result: &scheduler.Result{Status: 200, Body: []byte(fmt.Sprintf("body-%d", i))}}, providers.Outcome{Class: providers.ClassSuccess, Status: 200}
			case 1:
				return scheduler.Decision{State: scheduler.StateScheduled, NextAttemptAt: at.Add(time.Duration(i) * time.Second), Reason: "retry"},
					providers.Outcome{Class: providers.ClassTransient, Status: 503, Reason: fmt.Sprintf("busy-%d", i)}
			}
			return scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldUnknownOutcome, Reason: "uncertain"},
				providers.Outcome{Class: providers.ClassUnknownOutcome, Reason: fmt.Sprintf("timeout-%d", i)}
		}
		var cs []scheduler.Completion
		var want []bool
		for i, c := range claims {
			dec, out := decide(i)
			comp := CompletionOf(c, at, dec, out)
			switch i {
			case 5: // a stale lease's completion before the real one
				stale := comp
				stale.LeaseToken--
				cs, want = append(cs, stale), append(want, false)
			case 40: // the same completion twice: the second finds it done
				cs, want = append(cs, comp), append(want, true)
			}
			cs, want = append(cs, comp), append(want, true)
			if i == 40 {
				want[len(want)-1] = false
			}
		}
		applied, err := d.Complete(ctx, cs)
		if err != nil || !reflect.DeepEqual(applied, want) {
			t.Fatalf("applied %v, %v\nwant %v", applied, err, want)
		}
		for i, c := range claims {
			dec, out := decide(i)
			op := GetOp(t, d, c.Operation.ID)
			if op.State != dec.State || !op.NextAttemptAt.Equal(dec.NextAttemptAt) || op.LastOutcome == nil ||
				op.LastOutcome.Reason != out.Reason || op.LastOutcome.Class != out.Class || !reflect.DeepEqual(op.Result, dec.Result) {
				t.Errorf("%s: %s next %s outcome %+v result %+v; want %s next %s outcome %q result %+v",
					op.ID, op.State, op.NextAttemptAt, op.LastOutcome, op.Result, dec.State, dec.NextAttemptAt, out.Reason, dec.Result)
			}
			as, err := d.ListAttempts(ctx, op.ID)
			if err != nil || len(as) != 1 || as[0].Stale || as[0].DecidedState != dec.State {
				t.Errorf("%s: attempts %+v, %v", op.ID, as, err)
			}
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

// heldOp enqueues, claims and holds an operation for unknownOutcome.
func heldOp(t *testing.T, d scheduler.Store, c scheduler.Claim) {
	t.Helper()
	Complete(t, d, c, T0, scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldUnknownOutcome, Reason: "timeout after write"},
		providers.Outcome{Class: providers.ClassUnknownOutcome})
}

func testManualActions(t *testing.T, open Opener) {
	ctx := context.Background()
	act := scheduler.Action{Actor: "carol", At: T0.Add(time.Hour), Reason: "checked the provider"}

	t.Run("ReleaseHeld", func(t *testing.T) {
		t.Parallel()
		d := openWithOps(t, open, NewOp("op", "a", T0))
		heldOp(t, d, Claim(t, d, T0, 1)[0])
		at := T0.Add(2 * time.Hour)
		op, err := d.ReleaseOperation(ctx, "op", at, act)
		if err != nil {
			t.Fatal(err)
		}
		if op.State != scheduler.StateScheduled || op.HoldReason != "" || !op.NextAttemptAt.Equal(at) || op.BudgetAttempts != 0 ||
			op.Attempt != 1 || !op.Deadline.Equal(at.Add(time.Hour)) || op.RequestIdentity != "op" || !op.UpdatedAt.Equal(act.At) {
			t.Fatalf("released %+v", op)
		}
		entries, err := d.ListAudit(ctx, "op")
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Action != "release" || entries[0].Actor != "carol" || entries[0].Reason != act.Reason ||
			entries[0].OperationID != "op" || entries[0].Scope != "a" || !entries[0].At.Equal(act.At) ||
			!strings.Contains(entries[0].Detail, "held (unknownOutcome) → scheduled at 2026-09-11T04:00:00Z") {
			t.Fatalf("audit %+v", entries)
		}
		// Released work runs again at its time, with the same identity.
		if cs := Claim(t, d, at, 1); len(cs) != 1 || cs[0].Operation.BudgetAttempts != 1 || cs[0].Operation.Attempt != 2 {
			t.Fatalf("claim after release %+v", cs)
		}
	})

	t.Run("ResolveSucceededAndFailed", func(t *testing.T) {
		t.Parallel()
		d := openWithOps(t, open, NewOp("ok", "a", T0), NewOp("bad", "a", T0))
		for _, c := range Claim(t, d, T0, 2) {
			heldOp(t, d, c)
		}
		op, err := d.ResolveOperation(ctx, "ok", true, act)
		if err != nil || op.State != scheduler.StateSucceeded || op.HoldReason != "" {
			t.Fatalf("resolve succeeded = %+v, %v", op, err)
		}
		op, err = d.ResolveOperation(ctx, "bad", false, act)
		if err != nil || op.State != scheduler.StateFailed || op.FailureReason != scheduler.FailureResolvedFailed {
			t.Fatalf("resolve failed = %+v, %v", op, err)
		}
		if _, err := d.ResolveOperation(ctx, "ok", false, act); !errors.Is(err, scheduler.ErrInvalidTransition) {
			t.Fatalf("resolve twice = %v", err)
		}
		if e, _ := d.ListAudit(ctx, "bad"); len(e) != 1 || e[0].Action != "resolve" || e[0].Detail != "held (unknownOutcome) → failed" {
			t.Fatalf("audit %+v", e)
		}
		// A failed operation may be released again.
		if op, err := d.ReleaseOperation(ctx, "bad", T0, act); err != nil || op.State != scheduler.StateScheduled || op.FailureReason != "" {
			t.Fatalf("release failed = %+v, %v", op, err)
		}
	})

	t.Run("ErrResolveAuthRevokedHold", func(t *testing.T) {
		t.Parallel()
		d := openWithOps(t, open, NewOp("op", "a", T0))
		Complete(t, d, Claim(t, d, T0, 1)[0], T0, scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked},
			providers.Outcome{Class: providers.ClassAuthRevoked, Status: 401})
		if _, err := d.ResolveOperation(ctx, "op", true, act); !errors.Is(err, scheduler.ErrInvalidTransition) {
			t.Fatalf("resolve authRevoked hold = %v", err)
		}
	})

	t.Run("Cancel", func(t *testing.T) {
		t.Parallel()
		d := openWithOps(t, open, NewOp("waiting", "a", T0.Add(time.Hour)), NewOp("running", "a", T0))
		Claim(t, d, T0, 1)
		op, err := d.CancelOperation(ctx, "waiting", act)
		if err != nil || op.State != scheduler.StateCanceled || !op.NextAttemptAt.IsZero() {
			t.Fatalf("cancel = %+v, %v", op, err)
		}
		for _, id := range []string{"running", "waiting"} {
			if _, err := d.CancelOperation(ctx, id, act); !errors.Is(err, scheduler.ErrInvalidTransition) {
				t.Fatalf("cancel %s = %v, want ErrInvalidTransition", id, err)
			}
		}
		if _, err := d.ReleaseOperation(ctx, "waiting", T0, act); !errors.Is(err, scheduler.ErrInvalidTransition) {
			t.Fatalf("release canceled = %v", err)
		}
		if _, err := d.CancelOperation(ctx, "nope", act); !errors.Is(err, scheduler.ErrNotFound) {
			t.Fatalf("cancel unknown = %v", err)
		}
		if e, _ := d.ListAudit(ctx, "waiting"); len(e) != 1 || e[0].Detail != "scheduled → canceled" {
			t.Fatalf("audit %+v", e)
		}
		if e, _ := d.ListAudit(ctx, "running"); len(e) != 0 {
			t.Fatalf("refused actions audited: %+v", e)
		}
	})

	t.Run("ReleaseUnapplied", func(t *testing.T) {
		t.Parallel()
		d := openWithOps(t, open, NewOp("unknown", "a", T0), NewOp("revoked", "a", T0), NewOp("waiting", "a", T0.Add(time.Hour)))
		cs := Claim(t, d, T0, 2)
		Complete(t, d, cs[0], T0, scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldUnknownOutcome, MaybeApplied: true},
			providers.Outcome{Class: providers.ClassUnknownOutcome})
		Complete(t, d, cs[1], T0, scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked},
			providers.Outcome{Class: providers.ClassAuthRevoked, Status: 401})
		at := T0.Add(time.Hour)
		op, err := d.ReleaseUnapplied(ctx, "unknown", at, act)
		if err != nil {
			t.Fatal(err)
		}
		// As a release: same identity, fresh budget, MaybeApplied kept.
		if op.State != scheduler.StateScheduled || op.HoldReason != "" || !op.NextAttemptAt.Equal(at) || op.BudgetAttempts != 0 ||
			op.RequestIdentity != "unknown" || !op.MaybeApplied {
			t.Fatalf("released %+v", op)
		}
		if e, _ := d.ListAudit(ctx, "unknown"); len(e) != 1 || e[0].Action != "resolve" || !strings.Contains(e[0].Detail, "not applied, sent again: held (unknownOutcome) → scheduled") {
			t.Fatalf("audit %+v", e)
		}
		// Only an operation held for unknownOutcome: not one held for
		// another reason, nor one that waits, nor the same one again.
		for _, tt := range []struct {
			id   string
			from scheduler.State
		}{{"revoked", scheduler.StateHeld}, {"waiting", scheduler.StateScheduled}, {"unknown", scheduler.StateScheduled}} {
			before := GetOp(t, d, tt.id)
			_, err := d.ReleaseUnapplied(ctx, tt.id, at, act)
			var te *scheduler.TransitionError
			if !errors.As(err, &te) || te.Action != scheduler.ActResolve || te.From != tt.from || !errors.Is(err, scheduler.ErrInvalidTransition) {
				t.Fatalf("release unapplied %s = %v, want a TransitionError from %s", tt.id, err, tt.from)
			}
			if after := GetOp(t, d, tt.id); after.State != before.State || !after.UpdatedAt.Equal(before.UpdatedAt) {
				t.Fatalf("refused release changed %s: %+v", tt.id, after)
			}
		}
		if _, err := d.ReleaseUnapplied(ctx, "nope", at, act); !errors.Is(err, scheduler.ErrNotFound) {
			t.Fatalf("release unapplied unknown = %v", err)
		}
	})

	t.Run("TransitionErrorReadsOnce", func(t *testing.T) {
		t.Parallel()
		d := openWithOps(t, open, NewOp("op", "a", T0), NewOp("run", "a", T0.Add(-time.Minute)))
		Claim(t, d, T0, 1) // run
		for _, tt := range []struct {
			err  func() error
			want string
		}{
			{func() error { _, err := d.ReleaseOperation(ctx, "op", T0, act); return err },
				"release op: only held or failed operations, and released ones not sent yet, can be released; this one is scheduled"},
			{func() error { _, err := d.ResolveOperation(ctx, "op", true, act); return err },
				"resolve op: only operations held for unknownOutcome can be resolved; this one is scheduled"},
			{func() error { _, err := d.CancelOperation(ctx, "run", act); return err },
				"cancel run: only scheduled, waitingForBudget, held or failed operations can be canceled; this one is running: its request is already on its way"},
		} {
			err := tt.err()
			var te *scheduler.TransitionError
			if !errors.As(err, &te) || !errors.Is(err, scheduler.ErrInvalidTransition) {
				t.Fatalf("%v: not a TransitionError", err)
			}
			if err.Error() != tt.want {
				t.Fatalf("error reads %q, want %q", err, tt.want)
			}
		}
	})
}

func testReleaseHeldInScope(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	PutScope(t, d, "a", ScopeOpts{MaxConcurrent: 100})
	PutScope(t, d, "b", ScopeOpts{MaxConcurrent: 100})
	Enqueue(t, d, T0,
		NewOp("unknown-1", "a", T0), NewOp("unknown-2", "a", T0), NewOp("auth-1", "a", T0),
		NewOp("bad-1", "a", T0), NewOp("ok-1", "a", T0), NewOp("unknown-b", "b", T0))
	settle(t, d, T0, decideByPrefix)

	at := T0.Add(time.Hour)
	act := scheduler.Action{Actor: "alice", At: at, Reason: "provider checked: none applied"}
	n, err := d.ReleaseHeldInScope(ctx, "a", at, act)
	if err != nil || n != 3 {
		t.Fatalf("release held = %d, %v; want 3", n, err)
	}
	for _, id := range []string{"unknown-1", "unknown-2", "auth-1"} {
		op := GetOp(t, d, id)
		if op.State != scheduler.StateScheduled || op.HoldReason != "" || !op.NextAttemptAt.Equal(at) || op.BudgetAttempts != 0 ||
			!op.Deadline.Equal(at.Add(time.Hour)) || op.RequestIdentity != id || !op.UpdatedAt.Equal(at) {
			t.Fatalf("%s after release: %+v", id, op)
		}
		entries, err := d.ListAudit(ctx, id)
		if err != nil || len(entries) != 1 {
			t.Fatalf("audit of %s = %+v, %v", id, entries, err)
		}
		e := entries[0]
		if e.Action != "release" || e.Actor != "alice" || e.Reason != act.Reason || !e.At.Equal(at) ||
			!strings.HasPrefix(e.Detail, "held (") || !strings.HasSuffix(e.Detail, ") → scheduled at 2026-09-11T03:00:00Z") {
			t.Fatalf("audit entry of %s: %+v", id, e)
		}
	}
	if op := GetOp(t, d, "bad-1"); op.State != scheduler.StateFailed {
		t.Fatalf("failed operation changed: %s", op.State)
	}
	if op := GetOp(t, d, "unknown-b"); op.State != scheduler.StateHeld {
		t.Fatalf("other scope's operation changed: %s", op.State)
	}
	scopeAudit, err := d.ListScopeAudit(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	last := scopeAudit[len(scopeAudit)-1]
	if last.Action != "releaseHeld" || last.Actor != "alice" || last.Reason != act.Reason || !strings.Contains(last.Detail, "released 3 held operations") {
		t.Fatalf("scope audit: %+v", last)
	}
	changes := 0
	for _, c := range AllChanges(t, d) {
		if c.State == scheduler.StateScheduled && c.At.Equal(at) {
			changes++
		}
	}
	if changes != 3 {
		t.Fatalf("change feed rows = %d; want 3", changes)
	}
	// The released operations are due again at `at`, with the same identity.
	if cs := Claim(t, d, at, 10); len(cs) != 3 {
		t.Fatalf("claimed %d after release, want 3", len(cs))
	}

	t.Run("NothingHeld", func(t *testing.T) {
		n, err := d.ReleaseHeldInScope(ctx, "a", at, act)
		if err != nil || n != 0 {
			t.Fatalf("second release = %d, %v; want 0", n, err)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		if _, err := d.ReleaseHeldInScope(ctx, "nope", at, act); !errors.Is(err, scheduler.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	})
}

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
	b, err := d.ListChanges(ctx, scheduler.ChangeFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if last := b.Changes[len(b.Changes)-1]; !last.At.Equal(now) {
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

// A release not sent yet can be changed (released again: it keeps what
// it was released from) or undone (back to that state and reason); once
// a claim sent it, it cannot (design §14).
func testChangeOrUndoRelease(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	PutScope(t, d, "a", ScopeOpts{MaxConcurrent: 5})
	Enqueue(t, d, T0, NewOp("op", "a", T0), NewOp("sent", "a", T0))
	for _, c := range Claim(t, d, T0, 2) {
		heldOp(t, d, c)
	}
	act := func(reason string) scheduler.Action {
		return scheduler.Action{Actor: "carol", At: T0.Add(time.Minute), Reason: reason}
	}
	later, mistyped := T0.Add(3*time.Hour), T0.Add(30*24*time.Hour)
	op, err := d.ReleaseOperation(ctx, "op", mistyped, act("after the window"))
	if err != nil {
		t.Fatal(err)
	}
	want := scheduler.ReleasedFrom{State: scheduler.StateHeld, HoldReason: scheduler.HoldUnknownOutcome}
	if op.ReleasedFrom == nil || *op.ReleasedFrom != want || !op.CanUnrelease() {
		t.Fatalf("released: releasedFrom %+v, want %+v", op.ReleasedFrom, want)
	}
	// Changed: the new time, still released from the hold.
	if op, err = d.ReleaseOperation(ctx, "op", later, act("typo in the date")); err != nil || !op.NextAttemptAt.Equal(later) || op.ReleasedFrom == nil || *op.ReleasedFrom != want {
		t.Fatalf("changed release: %v at %s from %+v", err, op.NextAttemptAt, op.ReleasedFrom)
	}
	// Undone: held for unknownOutcome again, nothing to send.
	if op, err = d.UnreleaseOperation(ctx, "op", act("not after all")); err != nil || op.State != scheduler.StateHeld || op.HoldReason != scheduler.HoldUnknownOutcome || op.ReleasedFrom != nil || !op.NextAttemptAt.IsZero() {
		t.Fatalf("undone: %+v, %v", op, err)
	}
	entries, err := d.ListAudit(ctx, "op")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(entries); n != 3 || !strings.Contains(entries[1].Detail, "release changed from") || entries[2].Action != "unrelease" || !strings.Contains(entries[2].Detail, "→ held (unknownOutcome)") {
		t.Fatalf("audit %+v, want release, release, unrelease", entries)
	}
	var te *scheduler.TransitionError
	if _, err := d.UnreleaseOperation(ctx, "op", act("again")); !errors.As(err, &te) {
		t.Fatalf("undo of no release = %v, want a TransitionError", err)
	}
	// Once sent, the release is spent: nothing to undo or change.
	if _, err := d.ReleaseOperation(ctx, "sent", T0.Add(time.Minute), act("now")); err != nil {
		t.Fatal(err)
	}
	cs := Claim(t, d, T0.Add(time.Minute), 1)
	if len(cs) != 1 || cs[0].Operation.ReleasedFrom != nil {
		t.Fatalf("claim of the released operation: %+v", cs)
	}
	Complete(t, d, cs[0], T0.Add(2*time.Minute), scheduler.Decision{State: scheduler.StateScheduled, NextAttemptAt: T0.Add(time.Hour), Reason: "503"},
		providers.Outcome{Class: providers.ClassTransient, Status: 503})
	if _, err := d.UnreleaseOperation(ctx, "sent", act("undo")); !errors.As(err, &te) {
		t.Fatalf("undo after the release was sent = %v, want a TransitionError", err)
	}
	if op := GetOp(t, d, "sent"); op.ReleasedFrom != nil || op.CanRelease() {
		t.Fatalf("sent: releasedFrom %+v, canRelease %v; want neither", op.ReleasedFrom, op.CanRelease())
	}
	if _, err := d.UnreleaseOperation(ctx, "nope", act("x")); !errors.Is(err, scheduler.ErrNotFound) {
		t.Fatalf("undo unknown = %v", err)
	}
}

// ActOnOperations releases or cancels a list of operations in one
// transaction, each audited, skipping those the action does not fit and
// IDs that do not exist.
func testActOnOperations(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	PutScope(t, d, "a", ScopeOpts{MaxConcurrent: 5})
	Enqueue(t, d, T0, NewOp("h-1", "a", T0), NewOp("h-2", "a", T0), NewOp("s-1", "a", T0.Add(time.Hour)))
	for _, c := range Claim(t, d, T0, 2) {
		heldOp(t, d, c)
	}
	act := scheduler.Action{Actor: "carol", At: T0.Add(time.Minute), Reason: "provider fixed"}
	n, err := d.ActOnOperations(ctx, scheduler.ActRelease, []string{"h-1", "h-2", "s-1", "nope"}, T0.Add(time.Minute), act)
	if err != nil || n != 2 {
		t.Fatalf("release: %d, %v; want 2 (s-1 is scheduled, nope does not exist)", n, err)
	}
	for _, id := range []string{"h-1", "h-2"} {
		if op := GetOp(t, d, id); op.State != scheduler.StateScheduled {
			t.Fatalf("%s %s after the release", id, op.State)
		}
		if e, _ := d.ListAudit(ctx, id); len(e) != 1 || e[0].Action != "release" || e[0].Reason != "provider fixed" {
			t.Fatalf("audit of %s: %+v", id, e)
		}
	}
	if n, err = d.ActOnOperations(ctx, scheduler.ActCancel, []string{"h-1", "h-2", "s-1"}, T0, act); err != nil || n != 3 {
		t.Fatalf("cancel: %d, %v; want 3", n, err)
	}
	if _, err := d.ActOnOperations(ctx, scheduler.ActResolve, []string{"h-1"}, T0, act); err == nil {
		t.Fatal("resolve on many was taken")
	}
}
