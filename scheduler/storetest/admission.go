package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// Design §11 "What the API says is what will happen": an operation held
// back by its scope (pause, spent budget, rate slot) reads waitingForBudget
// at the moment its scope admits it, in every read path (get, list,
// filters, counts, the enqueue's own answer), computed at read time; one behind a held scope says so.
func testOperationsReportWhatTheirScopeDoes(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	for _, s := range []string{"paused", "spent", "held", "open"} {
		PutScope(t, d, s, ScopeOpts{MaxConcurrent: 10})
	}
	// One send a minute: a claim at T0 takes the slot until T0+1m.
	PutScope(t, d, "slot", ScopeOpts{MaxConcurrent: 10, Rate: &scheduler.RateLimit{Requests: 1, Per: time.Minute}})
	pauseEnd, reset, slot := T0.Add(time.Hour), T0.Add(2*time.Hour), T0.Add(time.Minute)
	// One answered request per scope puts it in its state: paused until
	// pauseEnd, its budget spent until reset, its rate slot taken, held.
	Enqueue(t, d, T0.Add(-time.Hour), NewOp("paused-0", "paused", T0), NewOp("spent-0", "spent", T0),
		NewOp("slot-0", "slot", T0), NewOp("held-0", "held", T0))
	effects := map[string]scheduler.ScopeEffect{
		"paused": {PauseUntil: pauseEnd, PauseReason: "rate limited"},
		"spent":  {Budget: &providers.Budget{Remaining: 0, Limit: 100, ResetAt: reset}},
		"slot":   {},
		"held":   {Hold: scheduler.HoldAuthRevoked},
	}
	cs := Claim(t, d, T0, 10)
	if len(cs) != len(effects) {
		t.Fatalf("setup claimed %v", ClaimedIDs(cs))
	}
	for _, c := range cs {
		if !Complete(t, d, c, T0, scheduler.Decision{State: scheduler.StateSucceeded, Scope: effects[c.Scope.Name]},
			providers.Outcome{Class: providers.ClassSuccess, Status: 200}) {
			t.Fatalf("setup answer of %s not applied", c.Operation.ID)
		}
	}
	created := map[string]scheduler.Operation{}
	for _, o := range Enqueue(t, d, T0,
		NewOp("paused-now", "paused", T0), NewOp("paused-after", "paused", pauseEnd.Add(time.Minute)),
		NewOp("spent-now", "spent", T0), NewOp("slot-now", "slot", T0),
		NewOp("held-now", "held", T0), NewOp("open-now", "open", T0)) {
		created[o.ID] = o
	}
	want := map[string]struct {
		state     scheduler.State
		next      time.Time
		blockedBy scheduler.BlockedBy
	}{
		"paused-now":   {scheduler.StateWaitingForBudget, pauseEnd, ""},
		"paused-after": {scheduler.StateScheduled, pauseEnd.Add(time.Minute), ""},
		"spent-now":    {scheduler.StateWaitingForBudget, reset, ""},
		"slot-now":     {scheduler.StateWaitingForBudget, slot, ""},
		"held-now":     {scheduler.StateScheduled, T0, scheduler.BlockedByScopeHeld},
		"open-now":     {scheduler.StateScheduled, T0, ""},
	}
	for id, w := range want {
		for how, op := range map[string]scheduler.Operation{"get": GetOp(t, d, id), "enqueue": created[id]} {
			if op.State != w.state || !op.NextAttemptAt.Equal(w.next) || op.BlockedBy != w.blockedBy {
				t.Errorf("%s (%s): %s at %s blocked by %q; want %s at %s blocked by %q", id, how, op.State, op.NextAttemptAt, op.BlockedBy, w.state, w.next, w.blockedBy)
			}
		}
	}
	list := func(f scheduler.OperationFilter) string {
		p, err := d.ListOperations(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		n, err := d.CountOperations(ctx, f)
		if err != nil || n != len(p.Operations) {
			t.Errorf("count %+v = %d, %v; the listing has %d", f, n, err, len(p.Operations))
		}
		var ids []string
		for _, o := range p.Operations {
			ids = append(ids, o.ID)
		}
		return fmt.Sprint(ids)
	}
	for _, tc := range []struct {
		f    scheduler.OperationFilter
		want string
	}{
		{scheduler.OperationFilter{State: scheduler.StateWaitingForBudget}, "[slot-now spent-now paused-now]"},
		{scheduler.OperationFilter{State: scheduler.StateScheduled}, "[open-now held-now paused-after]"},
		{scheduler.OperationFilter{States: []scheduler.State{scheduler.StateWaitingForBudget, scheduler.StateHeld}}, "[slot-now spent-now paused-now]"},
		{scheduler.OperationFilter{States: []scheduler.State{scheduler.StateScheduled, scheduler.StateWaitingForBudget}}, "[open-now held-now slot-now spent-now paused-after paused-now]"},
		{scheduler.OperationFilter{State: scheduler.StateWaitingForBudget, Scope: "paused"}, "[paused-now]"},
	} {
		if got := list(tc.f); got != tc.want {
			t.Errorf("list %+v = %s, want %s", tc.f, got, tc.want)
		}
	}
	c, err := d.CountByState(ctx, T0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Operations[scheduler.StateWaitingForBudget] != 3 || c.Operations[scheduler.StateScheduled] != 3 {
		t.Errorf("counts by state %v, want 3 waitingForBudget and 3 scheduled", c.Operations)
	}
}
