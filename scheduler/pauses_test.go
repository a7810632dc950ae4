package scheduler_test

import (
	"strings"
	"testing"
	"time"

	"pacer/scheduler"
)

// Design §3 invariant 1 within a process: an attempt leased before an
// answer paused its scope is not sent while the worker's note of that
// pause holds (its worker checks the pauses its engine decided just
// before sending, before they are committed); it waits, counts nothing
// toward its retry budget, and is sent once the hold is over (the store's
// pause, once committed, decides from then on).
func TestLeasedAttemptIsNotSentIntoADecidedPause(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.scope("a", prov.URL, "", 4)
	h.scope("b", prov.URL, "", 4)
	h.enqueue(scheduler.OperationInput{ID: "x", Scope: "a", Method: "GET", Path: "/x"})
	h.enqueue(scheduler.OperationInput{ID: "y", Scope: "b", Method: "GET", Path: "/y"})
	now := h.clock.Now()
	h.engine.NotePause("a", now.Add(time.Minute), now) // a worker read a 429 of scope a; its tick has not committed it
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
	if want := now.Add(scheduler.LearnedPauseWindow); !op.NextAttemptAt.Equal(want) || op.BudgetAttempts != 0 {
		t.Fatalf("x waits until %s with %d attempts of its budget spent; want the hold's end %s and none", op.NextAttemptAt, op.BudgetAttempts, want)
	}
	atts, err := h.svc.ListAttempts(t.Context(), "x")
	if err != nil || len(atts) != 1 || !strings.Contains(atts[0].Decision, "not sent") {
		t.Fatalf("attempts of x: %+v, %v; want one recorded as not sent", atts, err)
	}
	h.clock.Add(scheduler.LearnedPauseWindow + time.Second)
	h.pass()
	if n := len(prov.requests("/x")); n != 1 {
		t.Fatalf("x sent %d times after the hold, want 1", n)
	}
	h.wantState("x", scheduler.StateSucceeded)
}

// A worker notes the pause an answer teaches the moment it decides it, for
// the other workers' check before they send; the note lasts
// LearnedPauseWindow at most, and the committed pause goes on holding the
// scope's work back after it.
func TestAnswerPauseIsNotedWhenDecided(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.scope("a", prov.URL, "", 4)
	prov.script("/first", answer{status: 429, headers: map[string]string{"Retry-After": "60"}})
	h.enqueue(scheduler.OperationInput{ID: "first", Scope: "a", Method: "GET", Path: "/first"})
	h.pass()
	until, ok := h.engine.LearnedPause("a", h.clock.Now())
	if !ok || !until.Equal(h.clock.Now().Add(scheduler.LearnedPauseWindow)) {
		t.Fatalf("learned pause of a: %s, %v; want held for %s from now", until, ok, scheduler.LearnedPauseWindow)
	}
	h.clock.Add(scheduler.LearnedPauseWindow)
	if _, ok := h.engine.LearnedPause("a", h.clock.Now()); ok {
		t.Fatal("the note still holds after its window")
	}
	h.enqueue(scheduler.OperationInput{ID: "second", Scope: "a", Method: "GET", Path: "/second"})
	if n := h.pass(); n != 0 || len(prov.requests("/second")) != 0 {
		t.Fatalf("claimed %d after the note's window, sent %d: the committed pause must hold them", n, len(prov.requests("/second")))
	}
}
