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
				"release op: only held or failed operations can be released; this one is scheduled"},
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
