package db_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// heldOp enqueues, claims and holds an operation for unknownOutcome.
func heldOp(t *testing.T, d interface {
	Complete(context.Context, []scheduler.Completion) ([]bool, error)
}, c scheduler.Claim) {
	t.Helper()
	complete(t, d, c, t0, scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldUnknownOutcome, Reason: "timeout after write"},
		providers.Outcome{Class: providers.ClassUnknownOutcome})
}

func TestManualActions(t *testing.T) {
	ctx := context.Background()
	act := scheduler.Action{Actor: "carol", At: t0.Add(time.Hour), Reason: "checked the provider"}

	t.Run("ReleaseHeld", func(t *testing.T) {
		d, _ := newTestDB(t)
		putScope(t, d, "a", scopeOpts{})
		enqueue(t, d, t0, newOp("op", "a", t0))
		heldOp(t, d, claim(t, d, t0, 1)[0])
		at := t0.Add(2 * time.Hour)
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
		if cs := claim(t, d, at, 1); len(cs) != 1 || cs[0].Operation.BudgetAttempts != 1 || cs[0].Operation.Attempt != 2 {
			t.Fatalf("claim after release %+v", cs)
		}
	})

	t.Run("ResolveSucceededAndFailed", func(t *testing.T) {
		d, _ := newTestDB(t)
		putScope(t, d, "a", scopeOpts{})
		enqueue(t, d, t0, newOp("ok", "a", t0), newOp("bad", "a", t0))
		for _, c := range claim(t, d, t0, 2) {
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
		if op, err := d.ReleaseOperation(ctx, "bad", t0, act); err != nil || op.State != scheduler.StateScheduled || op.FailureReason != "" {
			t.Fatalf("release failed = %+v, %v", op, err)
		}
	})

	t.Run("ErrResolveAuthRevokedHold", func(t *testing.T) {
		d, _ := newTestDB(t)
		putScope(t, d, "a", scopeOpts{})
		enqueue(t, d, t0, newOp("op", "a", t0))
		complete(t, d, claim(t, d, t0, 1)[0], t0, scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked},
			providers.Outcome{Class: providers.ClassAuthRevoked, Status: 401})
		if _, err := d.ResolveOperation(ctx, "op", true, act); !errors.Is(err, scheduler.ErrInvalidTransition) {
			t.Fatalf("resolve authRevoked hold = %v", err)
		}
	})

	t.Run("Cancel", func(t *testing.T) {
		d, _ := newTestDB(t)
		putScope(t, d, "a", scopeOpts{})
		enqueue(t, d, t0, newOp("waiting", "a", t0.Add(time.Hour)), newOp("running", "a", t0))
		claim(t, d, t0, 1)
		op, err := d.CancelOperation(ctx, "waiting", act)
		if err != nil || op.State != scheduler.StateCanceled || !op.NextAttemptAt.IsZero() {
			t.Fatalf("cancel = %+v, %v", op, err)
		}
		for _, id := range []string{"running", "waiting"} {
			if _, err := d.CancelOperation(ctx, id, act); !errors.Is(err, scheduler.ErrInvalidTransition) {
				t.Fatalf("cancel %s = %v, want ErrInvalidTransition", id, err)
			}
		}
		if _, err := d.ReleaseOperation(ctx, "waiting", t0, act); !errors.Is(err, scheduler.ErrInvalidTransition) {
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
		d, _ := newTestDB(t)
		putScope(t, d, "a", scopeOpts{})
		enqueue(t, d, t0, newOp("unknown", "a", t0), newOp("revoked", "a", t0), newOp("waiting", "a", t0.Add(time.Hour)))
		cs := claim(t, d, t0, 2)
		complete(t, d, cs[0], t0, scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldUnknownOutcome, MaybeApplied: true},
			providers.Outcome{Class: providers.ClassUnknownOutcome})
		complete(t, d, cs[1], t0, scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked},
			providers.Outcome{Class: providers.ClassAuthRevoked, Status: 401})
		at := t0.Add(time.Hour)
		op, err := d.ReleaseUnapplied(ctx, "unknown", at, act)
		if err != nil {
			t.Fatal(err)
		}
		// As a release: same identity, fresh budget, MaybeApplied kept.
		if op.State != scheduler.StateScheduled || op.HoldReason != "" || !op.NextAttemptAt.Equal(at) || op.BudgetAttempts != 0 ||
			op.RequestIdentity != "unknown" || !op.MaybeApplied {
			t.Fatalf("released %+v", op)
		}
		if e, _ := d.ListAudit(ctx, "unknown"); len(e) != 1 || e[0].Action != "resolve" || !strings.Contains(e[0].Detail, "held (unknownOutcome) → scheduled") {
			t.Fatalf("audit %+v", e)
		}
		// Only an operation held for unknownOutcome: not one held for
		// another reason, nor one that waits, nor the same one again.
		for _, tt := range []struct {
			id   string
			from scheduler.State
		}{{"revoked", scheduler.StateHeld}, {"waiting", scheduler.StateScheduled}, {"unknown", scheduler.StateScheduled}} {
			before := getOp(t, d, tt.id)
			_, err := d.ReleaseUnapplied(ctx, tt.id, at, act)
			var te *scheduler.TransitionError
			if !errors.As(err, &te) || te.Action != scheduler.ActResolve || te.From != tt.from || !errors.Is(err, scheduler.ErrInvalidTransition) {
				t.Fatalf("release unapplied %s = %v, want a TransitionError from %s", tt.id, err, tt.from)
			}
			if after := getOp(t, d, tt.id); after.State != before.State || !after.UpdatedAt.Equal(before.UpdatedAt) {
				t.Fatalf("refused release changed %s: %+v", tt.id, after)
			}
		}
		if _, err := d.ReleaseUnapplied(ctx, "nope", at, act); !errors.Is(err, scheduler.ErrNotFound) {
			t.Fatalf("release unapplied unknown = %v", err)
		}
	})

	t.Run("TransitionErrorReadsOnce", func(t *testing.T) {
		d, _ := newTestDB(t)
		putScope(t, d, "a", scopeOpts{})
		enqueue(t, d, t0, newOp("op", "a", t0), newOp("run", "a", t0.Add(-time.Minute)))
		claim(t, d, t0, 1) // run
		for _, tt := range []struct {
			err  func() error
			want string
		}{
			{func() error { _, err := d.ReleaseOperation(ctx, "op", t0, act); return err },
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

func TestDurableAcrossReopen(t *testing.T) {
	ctx := context.Background()
	d, path := newTestDB(t)
	putScope(t, d, "a", scopeOpts{MaxConcurrent: 2, Rate: &scheduler.RateLimit{Requests: 1, Per: time.Minute}})
	putScope(t, d, "b", scopeOpts{})
	enqueue(t, d, t0, newOp("a-1", "a", t0), newOp("a-2", "a", t0), newOp("b-1", "b", t0.Add(time.Hour)))
	c := claim(t, d, t0, 10)[0] // a-1; the rate then spaces a's next send by a minute
	complete(t, d, c, t0.Add(time.Second), scheduler.Decision{
		State: scheduler.StateWaitingForBudget, NextAttemptAt: t0.Add(20 * time.Minute),
		Scope: scheduler.ScopeEffect{PauseUntil: t0.Add(10 * time.Minute), PauseReason: "rate limited",
			Budget: &providers.Budget{Remaining: 0, Limit: 60, ResetAt: t0.Add(10 * time.Minute)}},
	}, providers.Outcome{Class: providers.ClassRateLimited, Status: 429})
	enqueue(t, d, t0, newOp("a-3", "a", t0))
	running := claim(t, d, t0.Add(10*time.Minute), 10) // a-2, left running by a "crash"
	if fmt.Sprint(claimedIDs(running)) != "[a-2]" {
		t.Fatalf("claimed %v", claimedIDs(running))
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	d = openTestDB(t, path)
	s, err := d.GetScope(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if !s.PausedUntil.Equal(t0.Add(10*time.Minute)) || s.Budget == nil || s.Budget.Limit != 60 || s.InFlight != 1 {
		t.Fatalf("scope after reopen %+v", s)
	}
	if op := getOp(t, d, "a-1"); op.State != scheduler.StateWaitingForBudget || !op.NextAttemptAt.Equal(t0.Add(20*time.Minute)) {
		t.Fatalf("a-1 after reopen %+v", op)
	}
	expired, err := d.ListRunning(ctx, t0.Add(11*time.Minute), 10)
	if err != nil || fmt.Sprint(claimedIDs(expired)) != "[a-2]" || expired[0].Operation.LeaseToken != 1 {
		t.Fatalf("running after reopen %v, %v", claimedIDs(expired), err)
	}
	// Nothing runs early after the restart: a's next rate slot is at +11m.
	if got := claim(t, d, t0.Add(11*time.Minute-time.Millisecond), 10); len(got) != 0 {
		t.Fatalf("claimed %v before the rate slot", claimedIDs(got))
	}
	if got := claimedIDs(claim(t, d, t0.Add(11*time.Minute), 10)); fmt.Sprint(got) != "[a-3]" {
		t.Fatalf("claimed %v at the rate slot", got)
	}
	if at, ok, err := d.NextWake(ctx); err != nil || !ok || !at.Equal(t0.Add(11*time.Minute)) {
		t.Fatalf("next wake %v, %v, %v: want +11m (rate slot and lease expiry)", at, ok, err)
	}
}

func TestChangesFeed(t *testing.T) {
	ctx := context.Background()
	d, path := newTestDB(t)
	putScope(t, d, "a", scopeOpts{})
	enqueue(t, d, t0, newOp("op", "a", t0))
	c := claim(t, d, t0.Add(time.Second), 1)[0]
	complete(t, d, c, t0.Add(2*time.Second), scheduler.Decision{State: scheduler.StateSucceeded}, providers.Outcome{Class: providers.ClassSuccess, Status: 200})
	enqueue(t, d, t0.Add(3*time.Second), newOp("op-2", "a", t0))
	if _, err := d.CancelOperation(ctx, "op-2", scheduler.Action{Actor: "x", At: t0.Add(4 * time.Second), Reason: "r"}); err != nil {
		t.Fatal(err)
	}

	rows, err := rawDB(t, path).Query(`SELECT seq, operation_id, scope, state, at FROM changes ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	last := int64(0)
	for rows.Next() {
		var seq, at int64
		var id, scope, state string
		if err := rows.Scan(&seq, &id, &scope, &state, &at); err != nil {
			t.Fatal(err)
		}
		if seq <= last {
			t.Fatalf("seq %d after %d", seq, last)
		}
		last = seq
		got = append(got, fmt.Sprintf("%s:%s:%s:+%ds", id, scope, state, (at-t0.UnixMilli())/1000))
	}
	want := "op:a:scheduled:+0s op:a:running:+1s op:a:succeeded:+2s op-2:a:scheduled:+3s op-2:a:canceled:+4s"
	if g := strings.Join(got, " "); g != want {
		t.Fatalf("changes\n got %s\nwant %s", g, want)
	}
}
