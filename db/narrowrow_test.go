package db_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"pacer/internal/pacertest"
	"pacer/providers"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// Migration 12 (the narrow hot row) on a database with work in every
// stage: each operation and its attempts read the same after it, the live
// leases' completions apply, and the rest of the work runs to its end,
// each operation keeping one whole answer.
func TestMigrationNarrowRowFinishesLiveWork(t *testing.T) {
	ctx := context.Background()
	t0 := storetest.T0
	d, path := newTestDB(t)
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{MaxConcurrent: 10})
	ops := []scheduler.NewOperation{
		storetest.NewOp("live", "a", t0), storetest.NewOp("retry", "a", t0), storetest.NewOp("done", "a", t0),
		storetest.NewOp("held", "a", t0), storetest.NewOp("again", "a", t0),
	}
	ops[0].Request.Headers = map[string]string{"X-Trace": "t-1"}
	storetest.Enqueue(t, d, t0, append(ops, storetest.NewOp("waiting", "a", t0.Add(time.Hour)))...)
	claims := map[string]scheduler.Claim{}
	for _, c := range storetest.Claim(t, d, t0, 10) {
		claims[c.Operation.ID] = c
	}
	if len(claims) != 5 {
		t.Fatalf("claimed %v, want the five due", claims)
	}
	answer := &scheduler.Result{Status: 503, Headers: map[string]string{"Retry-After": "1"}, Body: []byte("busy, try later")}
	retry := func(c scheduler.Claim, at time.Time) scheduler.Completion {
		comp := storetest.CompletionOf(c, at, scheduler.Decision{State: scheduler.StateScheduled, NextAttemptAt: at.Add(time.Second), Reason: "retry-after 1s"},
			providers.Outcome{Class: providers.ClassTransient, Status: 503, Hint: providers.Hint{Source: "retry-after", Raw: "1"}, Reason: "unavailable"})
		comp.Response, comp.AttemptResponse = answer, &scheduler.Result{Status: 503, Body: []byte("busy")}
		return comp
	}
	success := func(c scheduler.Claim, at time.Time, body string) scheduler.Completion {
		return storetest.CompletionOf(c, at, scheduler.Decision{State: scheduler.StateSucceeded, Reason: "ok",
			Result: &scheduler.Result{Status: 200, Headers: map[string]string{"Content-Type": "text/plain"}, Body: []byte(body)}},
			providers.Outcome{Class: providers.ClassSuccess, Status: 200})
	}
	at := t0.Add(100 * time.Millisecond)
	completions := []scheduler.Completion{
		retry(claims["retry"], at), retry(claims["again"], at), success(claims["done"], at, "done"),
		storetest.CompletionOf(claims["held"], at, scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldUnknownOutcome, Reason: "uncertain"},
			providers.Outcome{Class: providers.ClassUnknownOutcome, Reason: "timeout", Detail: "no answer in 30s"}),
	}
	if applied, err := d.Complete(ctx, completions); err != nil || !reflect.DeepEqual(applied, []bool{true, true, true, true}) {
		t.Fatalf("complete: %v, %v", applied, err)
	}
	// "again" is claimed a second time and left running, with its first
	// answer kept.
	var second scheduler.Claim
	for _, c := range storetest.Claim(t, d, t0.Add(1100*time.Millisecond), 1) {
		second = c
	}
	if second.Operation.ID != "retry" && second.Operation.ID != "again" {
		t.Fatalf("second claim %+v, want a retried operation", second.Operation.ID)
	}
	ids := []string{"live", "retry", "done", "held", "again", "waiting"}
	before := map[string]scheduler.Operation{}
	attempts := map[string][]scheduler.Attempt{}
	for _, id := range ids {
		before[id] = storetest.GetOp(t, d, id)
		as, err := d.ListAttempts(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		attempts[id] = as
	}
	if before["retry"].LastOutcome == nil || before["retry"].LastOutcome.Response == nil || before["done"].Result == nil {
		t.Fatalf("before the migration: retry %+v, done %+v", before["retry"].LastOutcome, before["done"].Result)
	}
	d.Close()

	raw := rawDB(t, path)
	if _, err := raw.Exec(undoNarrowRow); err != nil {
		t.Fatal(err)
	}
	// Version 11's row: the request and the answers in the operation row.
	var method, outcome string
	if err := raw.QueryRow(`SELECT method, last_outcome FROM operations WHERE operation_id = 'retry'`).Scan(&method, &outcome); err != nil || method != "POST" || outcome == "" {
		t.Fatalf("version 11 row: %q %q %v", method, outcome, err)
	}
	raw.Close()

	d = pacertest.OpenStoreAt(t, path)
	for _, id := range ids {
		if got := storetest.GetOp(t, d, id); !reflect.DeepEqual(got, before[id]) {
			t.Errorf("%s after the migration:\n got %+v\nwant %+v", id, got, before[id])
		}
		if got, err := d.ListAttempts(ctx, id); err != nil || !reflect.DeepEqual(got, attempts[id]) {
			t.Errorf("attempts of %s after the migration: %v\n got %+v\nwant %+v", id, err, got, attempts[id])
		}
	}

	// The live leases' completions apply; then the rest runs to its end.
	at = t0.Add(2 * time.Second)
	live := []scheduler.Completion{success(claims["live"], at, "live"), success(second, at, "second")}
	if applied, err := d.Complete(ctx, live); err != nil || !reflect.DeepEqual(applied, []bool{true, true}) {
		t.Fatalf("complete the live leases: %v, %v", applied, err)
	}
	for _, c := range storetest.Claim(t, d, t0.Add(2*time.Hour), 10) {
		storetest.Complete(t, d, c, t0.Add(2*time.Hour), scheduler.Decision{State: scheduler.StateSucceeded, Result: &scheduler.Result{Status: 204}},
			providers.Outcome{Class: providers.ClassSuccess, Status: 204})
	}
	for _, id := range ids {
		op := storetest.GetOp(t, d, id)
		want := scheduler.StateSucceeded
		if id == "held" {
			want = scheduler.StateHeld
		}
		if op.State != want || (want == scheduler.StateSucceeded && (op.Result == nil || op.LastOutcome.Response != nil)) {
			t.Errorf("%s at the end: %s, result %+v, last outcome %+v; want %s with its result", id, op.State, op.Result, op.LastOutcome, want)
		}
	}
	if h := storetest.GetOp(t, d, "held"); h.LastOutcome == nil || h.LastOutcome.Detail != "no answer in 30s" {
		t.Errorf("held's last outcome %+v", h.LastOutcome)
	}
	// One whole answer per operation: a retried operation's first answer
	// went when its next one came.
	raw = rawDB(t, path)
	var kept int
	if err := raw.QueryRow(`SELECT count(*) FROM attempts WHERE answer IS NOT NULL`).Scan(&kept); err != nil || kept != 5 {
		t.Errorf("%d whole answers kept (%v), want 5: one per answered operation", kept, err)
	}
}
