package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"pacer/providers"
	"pacer/scheduler"
)

// testNextWakeIsWhenTheClaimAdmits: NextWake and ClaimDue follow one rule
// (design §11 "Idle is idle"). Over random scope states reached through
// the Store (holds, pauses, rate slots, learned budgets of the default
// and of a named resource above, at and below their reserve with resets
// past, future and unknown, learned routes, full and free concurrency,
// leases, due work now, past and future), the time NextWake returns is
// never one at which the claim admits nothing (unless a lease expires
// then): a wake-up in the past is a claim loop that spins. And it is
// never late: a millisecond before it, nothing is admitted.
//
// One store serves every case: each case's scopes are its own, and the
// case leaves them with nothing running or waiting.
func testNextWakeIsWhenTheClaimAdmits(t *testing.T, open Opener) {
	d := open(t)
	ctx := context.Background()
	cases := 0
	rapid.Check(t, func(rt *rapid.T) {
		cases++
		defer settleAll(rt, d)
		offset := func(label string, lo, hi int) time.Time {
			return T0.Add(time.Duration(rapid.IntRange(lo, hi).Draw(rt, label)) * time.Second)
		}
		claimAt := func(when time.Time, limit int, lease time.Duration) []scheduler.Claim {
			cs, err := d.ClaimDue(ctx, scheduler.ClaimParams{Now: when, Limit: limit, LeaseFor: lease})
			if err != nil {
				rt.Fatal(err)
			}
			return cs
		}
		answer := func(c scheduler.Claim, at time.Time, eff scheduler.ScopeEffect) {
			applied, err := d.Complete(ctx, []scheduler.Completion{{
				OperationID: c.Operation.ID, LeaseToken: c.Operation.LeaseToken, Attempt: c.Operation.Attempt, FinishedAt: at,
				Outcome: providers.Outcome{Class: providers.ClassSuccess, Status: 200, Budget: eff.Budget, Resource: eff.Resource}, Decision: scheduler.Decision{State: scheduler.StateSucceeded, Scope: eff},
			}})
			if err != nil || !applied[0] {
				rt.Fatalf("answer %s: %v %v", c.Operation.ID, applied, err)
			}
		}
		budget := func(resource string) *providers.Budget {
			if !rapid.Bool().Draw(rt, "budget") {
				return nil
			}
			b := &providers.Budget{Remaining: int64(rapid.IntRange(0, 5).Draw(rt, "remaining")), Limit: 100, Resource: resource}
			if rapid.IntRange(0, 3).Draw(rt, "resetKnown") > 0 {
				b.ResetAt = offset("resetAt", -30, 300)
			}
			return b
		}
		budgetPause := func() time.Time {
			if rapid.IntRange(0, 3).Draw(rt, "budgetPaused") == 0 {
				return offset("budgetPausedUntil", -30, 120)
			}
			return time.Time{}
		}

		// The scopes and their work; a GET /search/… spends the search
		// budget once an answer named it.
		nScopes := rapid.IntRange(1, 4).Draw(rt, "scopes")
		names := make([]string, nScopes)
		named := map[string]bool{}
		for i := range names {
			name := fmt.Sprintf("c%d-s%d", cases, i)
			names[i] = name
			cfg := scheduler.ScopeConfig{Name: name, Provider: "generic", BaseURL: "https://api.example.com",
				MaxConcurrent: rapid.IntRange(1, 3).Draw(rt, "maxConcurrent"), BudgetReserve: rapid.IntRange(0, 3).Draw(rt, "reserve")}
			if rapid.Bool().Draw(rt, "rate") {
				cfg.RateLimit = &scheduler.RateLimit{Requests: rapid.IntRange(1, 3).Draw(rt, "rateRequests"), Per: time.Duration(rapid.IntRange(1, 20).Draw(rt, "ratePerSeconds")) * time.Second}
			}
			if _, _, err := d.PutScope(ctx, cfg, scheduler.Action{Actor: "t", At: T0, Reason: "setup"}); err != nil {
				rt.Fatal(err)
			}
			named[name] = rapid.Bool().Draw(rt, "namedResource")
			var ops []scheduler.NewOperation
			if named[name] {
				fx := NewRequest(name+"-fx-search", name, "GET", "/search/fx")
				fx.NotBefore = T0.Add(-2 * time.Hour)
				ops = append(ops, fx)
			}
			for j := range rapid.IntRange(0, 4).Draw(rt, "ops") {
				op := NewOp(fmt.Sprintf("%s-%d", name, j), name, offset("due", -60, 120))
				if named[name] && rapid.Bool().Draw(rt, "searchOp") {
					op.Kind, op.Request.Method, op.Request.Path = scheduler.KindRead, "GET", "/search/q"
				}
				ops = append(ops, op)
			}
			if _, err := d.Enqueue(ctx, ops, T0.Add(-3*time.Hour)); err != nil {
				rt.Fatal(err)
			}
		}
		// A search answer teaches the route and the search budget.
		for _, c := range claimAt(T0.Add(-2*time.Hour), 100, time.Minute) {
			answer(c, T0.Add(-2*time.Hour), scheduler.ScopeEffect{Resource: "search", ResourceKnown: true,
				Budget: budget("search"), BudgetPauseUntil: budgetPause(), BudgetPauseReason: "rate limited: test"})
		}
		// Some work in flight, leased until a random time.
		for range rapid.IntRange(0, 2).Draw(rt, "claims") {
			at := offset("claimAt", -60, 0)
			claimAt(at, rapid.IntRange(1, 4).Draw(rt, "running"), offset("leaseExpires", 1, 120).Sub(at))
		}
		// Then an answer per scope gives it its admission state: a hold,
		// a pause, the default budget's figures and pause.
		var fx []scheduler.NewOperation
		for _, name := range names {
			op := NewOp(name+"-fx", name, T0.Add(-90*time.Minute))
			fx = append(fx, op)
		}
		if _, err := d.Enqueue(ctx, fx, T0.Add(-90*time.Minute)); err != nil {
			rt.Fatal(err)
		}
		fxAt := offset("answersAt", -30, 0)
		for range nScopes {
			for _, c := range claimAt(fxAt, 1, time.Hour) {
				if c.Operation.ID != c.Scope.Name+"-fx" {
					continue // a real operation: one more in flight
				}
				eff := scheduler.ScopeEffect{ResourceKnown: true, Budget: budget(""), BudgetPauseUntil: budgetPause(), BudgetPauseReason: "rate limited: test"}
				if rapid.IntRange(0, 4).Draw(rt, "held") == 0 {
					eff.Hold = scheduler.HoldAuthRevoked
				}
				if rapid.Bool().Draw(rt, "paused") {
					eff.PauseUntil, eff.PauseReason = offset("pausedUntil", -30, 120), "rate limited"
				}
				answer(c, fxAt, eff)
			}
		}
		now := offset("now", 0, 60)

		at, ok, err := d.NextWake(ctx)
		if err != nil {
			rt.Fatal(err)
		}
		var leaseEnd time.Time
		if running, err := d.ListRunning(ctx, time.Time{}, 1); err != nil {
			rt.Fatal(err)
		} else if len(running) > 0 {
			leaseEnd = running[0].Operation.LeaseExpiresAt
		}
		if !ok {
			if n := len(claimAt(now.Add(24*time.Hour), 100, time.Hour)); n != 0 {
				rt.Fatalf("NextWake says nothing waits, yet a claim a day later admits %d", n)
			}
			return
		}
		if at.After(now) {
			if n := len(claimAt(at.Add(-time.Millisecond), 100, time.Hour)); n != 0 {
				rt.Fatalf("NextWake %s is late: a claim a millisecond before admits %d", at, n)
			}
		}
		when := at
		if when.Before(now) {
			when = now
		}
		if n := len(claimAt(when, 100, time.Hour)); n == 0 && !(!leaseEnd.IsZero() && leaseEnd.Equal(at)) {
			rt.Fatalf("NextWake %s (now %s): the claim there admits nothing and no lease expires then: the loop would spin", at, now)
		}
	})
}

// settleAll leaves d with nothing running or waiting: every running
// operation succeeds and every waiting one is canceled.
func settleAll(rt *rapid.T, d scheduler.Store) {
	ctx := context.Background()
	running, err := d.ListRunning(ctx, time.Time{}, 0)
	if err != nil {
		rt.Fatal(err)
	}
	for _, c := range running {
		if _, err := d.Complete(ctx, []scheduler.Completion{{OperationID: c.Operation.ID, LeaseToken: c.Operation.LeaseToken,
			Attempt: c.Operation.Attempt, FinishedAt: T0, Outcome: providers.Outcome{Class: providers.ClassSuccess, Status: 200},
			Decision: scheduler.Decision{State: scheduler.StateSucceeded}}}); err != nil {
			rt.Fatal(err)
		}
	}
	for {
		p, err := d.ListOperations(ctx, scheduler.OperationFilter{States: []scheduler.State{scheduler.StateScheduled, scheduler.StateWaitingForBudget}, Limit: 1000})
		if err != nil {
			rt.Fatal(err)
		}
		if len(p.Operations) == 0 {
			return
		}
		for _, op := range p.Operations {
			if _, err := d.CancelOperation(ctx, op.ID, scheduler.Action{Actor: "t", At: T0, Reason: "next case"}); err != nil {
				rt.Fatal(err)
			}
		}
	}
}
