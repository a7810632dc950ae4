package scheduler_test

import (
	"strings"
	"testing"
	"time"

	"pacer/scheduler"
)

// Design §3 invariant 1 within a process: an attempt leased before an
// answer paused its scope is not sent while that pause lasts, even before
// the pause is committed (its worker checks the pauses its engine decided
// just before sending); it waits for the pause's end, counts nothing
// toward its retry budget, and is sent once the pause is over.
func TestLeasedAttemptIsNotSentIntoADecidedPause(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.scope("a", prov.URL, "", 4)
	h.scope("b", prov.URL, "", 4)
	h.enqueue(scheduler.OperationInput{ID: "x", Scope: "a", Method: "GET", Path: "/x"})
	h.enqueue(scheduler.OperationInput{ID: "y", Scope: "b", Method: "GET", Path: "/y"})
	until := h.clock.Now().Add(time.Minute)
	h.engine.NotePause("a", until) // a worker read a 429 of scope a; its tick has not committed it
	if n := h.pass(); n != 2 {
		t.Fatalf("claimed %d, want both: the store knows no pause yet", n)
	}
	if n := len(prov.requests("/x")); n != 0 {
		t.Fatalf("x sent %d times into its scope's decided pause, want 0", n)
	}
	if n := len(prov.requests("/y")); n != 1 {
		t.Fatalf("y (another scope) sent %d times, want 1", n)
	}
	op := h.wantState("x", scheduler.StateWaitingForBudget)
	if !op.NextAttemptAt.Equal(until) || op.BudgetAttempts != 0 {
		t.Fatalf("x waits until %s with %d attempts of its budget spent; want the pause's end %s and none", op.NextAttemptAt, op.BudgetAttempts, until)
	}
	atts, err := h.svc.ListAttempts(t.Context(), "x")
	if err != nil || len(atts) != 1 || !strings.Contains(atts[0].Decision, "not sent") {
		t.Fatalf("attempts of x: %+v, %v; want one recorded as not sent", atts, err)
	}
	h.clock.Add(time.Minute + time.Second)
	h.pass()
	if n := len(prov.requests("/x")); n != 1 {
		t.Fatalf("x sent %d times after the pause, want 1", n)
	}
	h.wantState("x", scheduler.StateSucceeded)
}

// A worker notes the pause an answer teaches the moment it decides it,
// for the other workers' check before they send.
func TestAnswerPauseIsNotedWhenDecided(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.scope("a", prov.URL, "", 4)
	prov.script("/first", answer{status: 429, headers: map[string]string{"Retry-After": "60"}})
	h.enqueue(scheduler.OperationInput{ID: "first", Scope: "a", Method: "GET", Path: "/first"})
	h.pass()
	until, ok := h.engine.LearnedPause("a", h.clock.Now())
	if !ok || until.Before(h.clock.Now().Add(59*time.Second)) {
		t.Fatalf("learned pause of a: %s, %v; want about a minute from now", until, ok)
	}
	if _, ok := h.engine.LearnedPause("a", until); ok {
		t.Fatal("a pause is still noted once it has ended")
	}
}
