package db_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pacer/db"
	"pacer/providers"
	"pacer/scheduler"
)

// expire runs one ExpireOverdue batch at now with the policy's decision.
func expire(t *testing.T, d *db.DB, now time.Time, limit int) scheduler.ExpireResult {
	t.Helper()
	p := scheduler.DefaultPolicy()
	res, err := d.ExpireOverdue(context.Background(), scheduler.ExpireParams{
		Now: now, Before: now, Limit: limit,
		Decide: func(op scheduler.Operation) scheduler.Decision { return p.Expire(op, now) },
	})
	if err != nil {
		t.Fatalf("expire overdue: %v", err)
	}
	return res
}

// opWith is newOp with its own retry budget.
func opWith(id, scope string, notBefore time.Time, maxElapsed time.Duration) scheduler.NewOperation {
	op := newOp(id, scope, notBefore)
	op.Retry.MaxElapsed = maxElapsed
	return op
}

// Design §11 "Deadlines end work even when it never ran", in the store:
// waiting operations past their deadline end as the policy decides (held
// for a maybe-applied mutation), whatever else they are; running, held
// and not yet overdue ones are left alone; the change feed sees it.
func TestExpireOverdue(t *testing.T) {
	ctx := context.Background()
	d, _ := newTestDB(t)
	for _, s := range []string{"a", "b", "c", "d"} {
		putScope(t, d, s, scopeOpts{})
	}
	now := t0.Add(2 * time.Hour)
	enqueue(t, d, t0,
		opWith("late", "a", t0, time.Hour),                      // deadline t0+1h
		opWith("later", "a", t0.Add(30*time.Minute), time.Hour), // t0+1h30
		opWith("edge", "a", t0.Add(time.Hour), time.Hour),       // t0+2h: not before now
		opWith("fresh", "a", t0.Add(3*time.Hour), time.Hour),    // t0+4h
		opWith("waiting", "b", t0, time.Hour),
		opWith("running", "c", t0, time.Hour),
		opWith("held", "d", t0, time.Hour),
	)
	// waiting: an uncertain attempt was retried, then a rate limit.
	w := claim(t, d, t0, 4)
	byID := map[string]scheduler.Claim{}
	for _, c := range w {
		byID[c.Operation.ID] = c
	}
	complete(t, d, byID["waiting"], t0.Add(time.Second), scheduler.Decision{State: scheduler.StateScheduled, NextAttemptAt: t0.Add(2 * time.Second), MaybeApplied: true, Reason: "uncertain"},
		providers.Outcome{Class: providers.ClassUnknownOutcome, Reason: "timeout"})
	complete(t, d, byID["held"], t0.Add(time.Second), scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked, Reason: "401"},
		providers.Outcome{Class: providers.ClassAuthRevoked, Status: 401})
	if _, ok := byID["late"]; ok {
		delete(byID, "late") // scope a's head was claimed: put it back waiting
		complete(t, d, w[0], t0.Add(time.Second), scheduler.Decision{State: scheduler.StateScheduled, NextAttemptAt: t0.Add(time.Minute), Reason: "503"}, providers.Outcome{Class: providers.ClassTransient, Status: 503})
	}
	c2 := claim(t, d, t0.Add(3*time.Second), 4)
	for _, c := range c2 {
		if c.Operation.ID == "waiting" {
			complete(t, d, c, t0.Add(4*time.Second), scheduler.Decision{State: scheduler.StateWaitingForBudget, NextAttemptAt: t0.Add(10 * time.Minute), Uncounted: true, Reason: "429"},
				providers.Outcome{Class: providers.ClassRateLimited, Status: 429})
		}
	}
	for id, want := range map[string]scheduler.State{"waiting": scheduler.StateWaitingForBudget, "running": scheduler.StateRunning, "held": scheduler.StateHeld, "late": scheduler.StateScheduled} {
		if got := getOp(t, d, id).State; got != want {
			t.Fatalf("setup: %s is %s, want %s", id, got, want)
		}
	}
	before := feed(t, d, scheduler.ChangeFilter{Limit: 1000})

	res := expire(t, d, now, 100)
	if res.Expired != 3 || res.More || !res.Next.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("result %+v, want 3 expired, no more, next deadline t0+2h (edge)", res)
	}
	for _, id := range []string{"late", "later"} {
		op := getOp(t, d, id)
		if op.State != scheduler.StateFailed || op.FailureReason != scheduler.FailureRetryBudgetExhausted || !op.NextAttemptAt.IsZero() || !op.UpdatedAt.Equal(now) {
			t.Errorf("%s: %s/%s next %s updated %s, want failed/retryBudgetExhausted at now", id, op.State, op.FailureReason, op.NextAttemptAt, op.UpdatedAt)
		}
	}
	if op := getOp(t, d, "waiting"); op.State != scheduler.StateHeld || op.HoldReason != scheduler.HoldUnknownOutcome || !op.MaybeApplied {
		t.Errorf("maybe-applied waiting mutation: %s/%s maybeApplied=%v, want held/unknownOutcome", op.State, op.HoldReason, op.MaybeApplied)
	}
	for id, want := range map[string]scheduler.State{"edge": scheduler.StateScheduled, "fresh": scheduler.StateScheduled, "running": scheduler.StateRunning, "held": scheduler.StateHeld} {
		if got := getOp(t, d, id).State; got != want {
			t.Errorf("%s: %s, want %s (untouched)", id, got, want)
		}
	}
	after := feed(t, d, scheduler.ChangeFilter{Limit: 1000})
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
	if res := expire(t, d, now, 100); res.Expired != 0 || res.More {
		t.Fatalf("second run %+v", res)
	}
}

// ExpireOverdue works in bounded batches, earliest deadline first.
func TestExpireOverdueBatches(t *testing.T) {
	d, _ := newTestDB(t)
	putScope(t, d, "a", scopeOpts{})
	enqueue(t, d, t0, opWith("second", "a", t0.Add(time.Minute), time.Hour), opWith("first", "a", t0, time.Hour))
	now := t0.Add(3 * time.Hour)
	res := expire(t, d, now, 1)
	if res.Expired != 1 || !res.More || !res.Next.Equal(t0.Add(time.Hour+time.Minute)) {
		t.Fatalf("first batch %+v", res)
	}
	if getOp(t, d, "first").State != scheduler.StateFailed || getOp(t, d, "second").State != scheduler.StateScheduled {
		t.Fatal("the batch did not take the earliest deadline first")
	}
	res = expire(t, d, now, 1)
	if res.Expired != 1 || !res.More || !res.Next.IsZero() {
		t.Fatalf("second batch %+v", res)
	}
	if res := expire(t, d, now, 1); res.Expired != 0 || res.More || !res.Next.IsZero() {
		t.Fatalf("third batch %+v", res)
	}
}

// With nothing overdue ExpireOverdue takes no write transaction: it goes
// through while another connection holds the write lock (a write would
// wait out the busy timeout and fail with SQLITE_BUSY).
func TestExpireOverdueIdleWritesNothing(t *testing.T) {
	d, path := newTestDB(t)
	putScope(t, d, "a", scopeOpts{})
	enqueue(t, d, t0, opWith("x", "a", t0, time.Hour))
	raw := rawDB(t, path)
	conn, err := raw.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), `ROLLBACK`)
	res := expire(t, d, t0.Add(30*time.Minute), 10)
	if res.Expired != 0 || !res.Next.Equal(t0.Add(time.Hour)) {
		t.Fatalf("result %+v", res)
	}
}

// A decision that does not end the operation is refused, and nothing is
// written.
func TestExpireOverdueRefusesOtherStates(t *testing.T) {
	d, _ := newTestDB(t)
	putScope(t, d, "a", scopeOpts{})
	enqueue(t, d, t0, opWith("x", "a", t0, time.Hour), opWith("y", "a", t0, time.Hour))
	now := t0.Add(2 * time.Hour)
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
		if got := getOp(t, d, id).State; got != scheduler.StateScheduled {
			t.Errorf("%s: %s, want scheduled (rolled back)", id, got)
		}
	}
}

// The maybe-applied mark: set by an uncertain attempt's completion, never
// unset by later ones, kept across a release, cleared by a resolve. A
// rate-limited completion gives back the attempt's count.
func TestCompleteRecordsMaybeAppliedAndCounts(t *testing.T) {
	ctx := context.Background()
	d, _ := newTestDB(t)
	putScope(t, d, "a", scopeOpts{})
	enqueue(t, d, t0, newOp("m", "a", t0))
	at := t0
	step := func(dec scheduler.Decision, out providers.Outcome) scheduler.Operation {
		t.Helper()
		at = at.Add(time.Minute)
		cs := claim(t, d, at, 1)
		if len(cs) != 1 {
			t.Fatalf("nothing claimed at %s", at)
		}
		if dec.State.Due() {
			dec.NextAttemptAt = at.Add(time.Second)
		}
		complete(t, d, cs[0], at, dec, out)
		return getOp(t, d, "m")
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
	if got := getOp(t, d, "m"); got.MaybeApplied {
		t.Fatal("resolve did not clear the mark in the store")
	}
}

// Migration 2 marks the existing mutations that had an uncertain attempt
// and are not settled.
func TestMigrationMarksMaybeApplied(t *testing.T) {
	d, path := newTestDB(t)
	putScope(t, d, "a", scopeOpts{})
	putScope(t, d, "b", scopeOpts{})
	read := newOp("read", "b", t0)
	read.Kind, read.Request.Method = scheduler.KindRead, "GET"
	enqueue(t, d, t0, newOp("uncertain", "a", t0), read)
	for _, c := range claim(t, d, t0, 2) {
		complete(t, d, c, t0, scheduler.Decision{State: scheduler.StateScheduled, NextAttemptAt: t0.Add(time.Second)},
			providers.Outcome{Class: providers.ClassUnknownOutcome})
	}
	d.Close()
	// Take the file back to version 1: undo every later migration.
	raw := rawDB(t, path)
	for _, q := range []string{undoResourceBudgets, `ALTER TABLE attempts DROP COLUMN response`, `ALTER TABLE operations DROP COLUMN last_response`, `DROP TABLE write_probe`, `DROP INDEX operations_identity`, `DROP INDEX operations_waiting_deadline`, `ALTER TABLE operations DROP COLUMN maybe_applied`, `PRAGMA user_version = 1`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()
	d = openTestDB(t, path)
	if op := getOp(t, d, "uncertain"); !op.MaybeApplied {
		t.Error("the uncertain mutation is not marked")
	}
	if op := getOp(t, d, "read"); op.MaybeApplied {
		t.Error("a read is marked")
	}
}

// undoResourceBudgets takes a database from version 6 back to 5.
const undoResourceBudgets = `
	DROP TRIGGER scopes_default_budget;
	DROP TABLE scope_routes;
	DROP TABLE scope_budgets;
	DROP INDEX operations_due;
	ALTER TABLE operations DROP COLUMN resource;
	CREATE INDEX operations_due ON operations (scope_id, next_attempt_at) WHERE state IN ('scheduled', 'waitingForBudget');
	PRAGMA user_version = 5;`

// Migration 6 moves each scope's learned budget to its default budget row,
// and gives every scope one, so that its operations are admitted as
// before.
func TestMigrationMovesBudgets(t *testing.T) {
	d, path := newTestDB(t)
	putScope(t, d, "a", scopeOpts{MaxConcurrent: 5})
	putScope(t, d, "b", scopeOpts{MaxConcurrent: 5})
	enqueue(t, d, t0, newOp("a1", "a", t0), newOp("a2", "a", t0), newOp("b1", "b", t0))
	d.Close()
	raw := rawDB(t, path)
	reset := t0.Add(time.Hour)
	for _, q := range []string{undoResourceBudgets,
		fmt.Sprintf(`UPDATE scopes SET budget_remaining = 1, budget_limit = 60, budget_reset_at = %d WHERE name = 'a'`, reset.UnixMilli())} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()
	d = openTestDB(t, path)
	s, err := d.GetScope(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if b := s.Budget; b == nil || b.Remaining != 1 || b.Limit != 60 || !b.ResetAt.Equal(reset) {
		t.Fatalf("budget after migration %+v, want 1 of 60 until %s", s.Budget, reset)
	}
	// a's budget lets one through; b has none.
	var got []string
	for _, c := range claim(t, d, t0, 10) {
		got = append(got, c.Operation.ID)
	}
	if slices.Sort(got); !slices.Equal(got, []string{"a1", "b1"}) {
		t.Fatalf("claimed %v, want [a1 b1]", got)
	}
}

func TestExpireQueryPlans(t *testing.T) {
	_, path := newTestDB(t)
	raw := rawDB(t, path)
	for name, q := range map[string]string{"Overdue": db.OverdueOperations, "Earliest": db.EarliestWaitingDeadline} {
		got := queryPlan(t, raw, q, 5, 10)
		if !strings.Contains(got, "operations_waiting_deadline") || strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("%s: plan %q, want the waiting-deadline index and no sort", name, got)
		}
	}
}
