package db_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// complete applies one completion of claim c and returns whether it applied.
func complete(t *testing.T, d interface {
	Complete(context.Context, []scheduler.Completion) ([]bool, error)
}, c scheduler.Claim, at time.Time, dec scheduler.Decision, out providers.Outcome) bool {
	t.Helper()
	applied, err := d.Complete(context.Background(), []scheduler.Completion{{
		OperationID: c.Operation.ID, LeaseToken: c.Operation.LeaseToken, Attempt: c.Operation.Attempt,
		FinishedAt: at, Outcome: out, Decision: dec,
	}})
	if err != nil {
		t.Fatalf("complete %s: %v", c.Operation.ID, err)
	}
	return applied[0]
}

func TestComplete(t *testing.T) {
	ctx := context.Background()

	t.Run("Applied", func(t *testing.T) {
		d, _ := newTestDB(t)
		putScope(t, d, "a", scopeOpts{})
		enqueue(t, d, t0, newOp("op", "a", t0))
		c := claim(t, d, t0, 1)[0]
		hint := providers.Hint{Source: "retry-after", Raw: "57", At: t0.Add(58 * time.Second)}
		reset := t0.Add(time.Hour)
		ok := complete(t, d, c, t0.Add(time.Second), scheduler.Decision{
			State: scheduler.StateWaitingForBudget, NextAttemptAt: hint.At, Reason: "retry-after 57s honoured",
			Scope: scheduler.ScopeEffect{PauseUntil: hint.At, PauseReason: "rate limited",
				Budget: &providers.Budget{Remaining: 0, Limit: 5000, ResetAt: reset}},
		}, providers.Outcome{Class: providers.ClassRateLimited, Status: 429, Hint: hint, Reason: "primary", Detail: strings.Repeat("é", 2000)})
		if !ok {
			t.Fatal("not applied")
		}
		op := getOp(t, d, "op")
		// The budget spent until the reset holds it back past its own time.
		if op.State != scheduler.StateWaitingForBudget || !op.NextAttemptAt.Equal(reset) || !op.LeaseExpiresAt.IsZero() ||
			op.LastOutcome == nil || op.LastOutcome.Class != providers.ClassRateLimited || op.LastOutcome.Status != 429 ||
			op.LastOutcome.Hint == nil || op.LastOutcome.Hint.Raw != "57" || !op.LastOutcome.At.Equal(t0.Add(time.Second)) {
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
		d, _ := newTestDB(t)
		putScope(t, d, "a", scopeOpts{})
		enqueue(t, d, t0, newOp("op", "a", t0))
		c := claim(t, d, t0, 1)[0]
		res := &scheduler.Result{Status: 201, Headers: map[string]string{"Location": "/x/1"}, Body: []byte(`{"id":1}`)}
		complete(t, d, c, t0, scheduler.Decision{State: scheduler.StateSucceeded, Result: res}, providers.Outcome{Class: providers.ClassSuccess, Status: 201})
		op := getOp(t, d, "op")
		if op.State != scheduler.StateSucceeded || op.Result == nil || op.Result.Status != 201 || string(op.Result.Body) != `{"id":1}` || !op.NextAttemptAt.IsZero() {
			t.Fatalf("op %+v", op)
		}
	})

	t.Run("FencedOutByStaleToken", func(t *testing.T) {
		d, _ := newTestDB(t)
		putScope(t, d, "a", scopeOpts{})
		enqueue(t, d, t0, newOp("op", "a", t0))
		c := claim(t, d, t0, 1)[0]
		before := getOp(t, d, "op")
		stale := c
		stale.Operation.LeaseToken = c.Operation.LeaseToken - 1
		if complete(t, d, stale, t0.Add(time.Second), scheduler.Decision{State: scheduler.StateSucceeded,
			Scope: scheduler.ScopeEffect{PauseUntil: t0.Add(time.Hour)}}, providers.Outcome{Class: providers.ClassSuccess, Status: 200}) {
			t.Fatal("stale completion applied")
		}
		if after := getOp(t, d, "op"); after.State != scheduler.StateRunning || !after.UpdatedAt.Equal(before.UpdatedAt) || after.LastOutcome != nil {
			t.Fatalf("op changed: %+v", after)
		}
		if s, _ := d.GetScope(ctx, "a"); !s.PausedUntil.IsZero() {
			t.Fatal("stale completion paused the scope")
		}
	})

	t.Run("LateCompletionMarksAttemptStale", func(t *testing.T) {
		d, path := newTestDB(t)
		putScope(t, d, "a", scopeOpts{})
		enqueue(t, d, t0, newOp("op", "a", t0))
		old := claim(t, d, t0, 1)[0]
		// The operation moves on without the first worker: a later claim
		// holds it with a new token (recovery left attempt 1 unfinished).
		if _, err := d.Complete(ctx, []scheduler.Completion{{OperationID: "op", LeaseToken: 1, Attempt: 99, FinishedAt: t0,
			Outcome: providers.Outcome{Class: providers.ClassTransient}, Decision: scheduler.Decision{State: scheduler.StateScheduled, NextAttemptAt: t0}}}); err == nil {
			t.Fatal("completion of a missing attempt number accepted")
		}
		if _, err := rawDB(t, path).Exec(`UPDATE operations SET state = 'scheduled', lease_expires_at = NULL WHERE operation_id = 'op'`); err != nil {
			t.Fatal(err)
		}
		claim(t, d, t0, 1)
		if complete(t, d, old, t0.Add(time.Second), scheduler.Decision{State: scheduler.StateSucceeded}, providers.Outcome{Class: providers.ClassSuccess, Status: 200}) {
			t.Fatal("late completion applied")
		}
		as, _ := d.ListAttempts(ctx, "op")
		if len(as) != 2 || !as[0].Stale || !as[0].FinishedAt.IsZero() || as[1].Stale {
			t.Fatalf("attempts %+v", as)
		}
		if op := getOp(t, d, "op"); op.State != scheduler.StateRunning || op.LeaseToken != 2 {
			t.Fatalf("op %+v", op)
		}
	})

	t.Run("PauseNeverShortened", func(t *testing.T) {
		d, _ := newTestDB(t)
		putScope(t, d, "a", scopeOpts{})
		enqueue(t, d, t0, newOp("op-1", "a", t0), newOp("op-2", "a", t0))
		cs := claim(t, d, t0, 2)
		long, short := t0.Add(time.Hour), t0.Add(time.Minute)
		applied, err := d.Complete(ctx, []scheduler.Completion{
			completion(cs[0], t0, long), completion(cs[1], t0, short),
		})
		if err != nil || !applied[0] || !applied[1] {
			t.Fatalf("complete = %v, %v", applied, err)
		}
		if s, _ := d.GetScope(ctx, "a"); !s.PausedUntil.Equal(long) || s.PauseReason != "pause until "+long.Format(time.RFC3339) {
			t.Fatalf("paused until %v (%s), want %v", s.PausedUntil, s.PauseReason, long)
		}
	})

	t.Run("HoldsScope", func(t *testing.T) {
		d, _ := newTestDB(t)
		putScope(t, d, "a", scopeOpts{})
		enqueue(t, d, t0, newOp("op-1", "a", t0), newOp("op-2", "a", t0.Add(time.Second)))
		c := claim(t, d, t0, 1)[0]
		complete(t, d, c, t0, scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked,
			Scope: scheduler.ScopeEffect{Hold: scheduler.HoldAuthRevoked}}, providers.Outcome{Class: providers.ClassAuthRevoked, Status: 401})
		if op := getOp(t, d, "op-1"); op.State != scheduler.StateHeld || op.HoldReason != scheduler.HoldAuthRevoked {
			t.Fatalf("op %+v", op)
		}
		if got := claim(t, d, t0.Add(time.Hour), 10); len(got) != 0 {
			t.Fatalf("claimed %d from a held scope", len(got))
		}
	})

	t.Run("ErrInvalidDecision", func(t *testing.T) {
		d, _ := newTestDB(t)
		putScope(t, d, "a", scopeOpts{})
		enqueue(t, d, t0, newOp("op", "a", t0))
		c := claim(t, d, t0, 1)[0]
		_, err := d.Complete(ctx, []scheduler.Completion{{OperationID: "op", LeaseToken: c.Operation.LeaseToken, Attempt: 1,
			FinishedAt: t0, Decision: scheduler.Decision{State: scheduler.StateHeld}}})
		if err == nil {
			t.Fatal("held without a reason accepted")
		}
		if op := getOp(t, d, "op"); op.State != scheduler.StateRunning {
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
