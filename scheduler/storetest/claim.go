package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

func testClaimDue(t *testing.T, open Opener) {
	t.Run("RespectsNextAttemptAt", func(t *testing.T) {
		t.Parallel()
		d := open(t)
		PutScope(t, d, "a", ScopeOpts{})
		Enqueue(t, d, T0, NewOp("now", "a", T0), NewOp("later", "a", T0.Add(time.Minute)))
		if got := ClaimedIDs(Claim(t, d, T0, 10)); fmt.Sprint(got) != "[now]" {
			t.Fatalf("claimed %v at T0", got)
		}
		if got := ClaimedIDs(Claim(t, d, T0.Add(time.Minute-time.Millisecond), 10)); len(got) != 0 {
			t.Fatalf("claimed %v a millisecond early", got)
		}
		if got := ClaimedIDs(Claim(t, d, T0.Add(time.Minute), 10)); fmt.Sprint(got) != "[later]" {
			t.Fatalf("claimed %v when due", got)
		}
	})

	t.Run("LeaseAndAttemptIntent", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		d := open(t)
		PutScope(t, d, "a", ScopeOpts{Credentials: scheduler.Credentials{Type: scheduler.CredentialBearer, Token: "tok"}})
		Enqueue(t, d, T0, NewOp("op", "a", T0))
		cs := Claim(t, d, T0, 10)
		if len(cs) != 1 {
			t.Fatalf("claims %d", len(cs))
		}
		op, sc := cs[0].Operation, cs[0].Scope
		if op.State != scheduler.StateRunning || op.LeaseToken != 1 || op.Attempt != 1 || op.BudgetAttempts != 1 ||
			!op.LeaseExpiresAt.Equal(T0.Add(time.Minute)) || !op.FirstSentAt.Equal(T0) || !op.UpdatedAt.Equal(T0) {
			t.Fatalf("claimed op %+v", op)
		}
		if sc.Name != "a" || sc.Credentials.Token != "tok" || sc.InFlight != 1 {
			t.Fatalf("claim scope %+v", sc)
		}
		as, err := d.ListAttempts(ctx, "op")
		if err != nil {
			t.Fatal(err)
		}
		if len(as) != 1 || as[0].Number != 1 || as[0].LeaseToken != 1 || !as[0].StartedAt.Equal(T0) || !as[0].FinishedAt.IsZero() {
			t.Fatalf("attempts %+v", as)
		}

		// A transient failure, then a second claim: the token and counters move on.
		Complete(t, d, cs[0], T0.Add(time.Second), scheduler.Decision{State: scheduler.StateScheduled, NextAttemptAt: T0.Add(time.Minute)},
			providers.Outcome{Class: providers.ClassTransient, Status: 503})
		cs = Claim(t, d, T0.Add(time.Minute), 10)
		op = cs[0].Operation
		if op.LeaseToken != 2 || op.Attempt != 2 || !op.FirstSentAt.Equal(T0) {
			t.Fatalf("second claim %+v", op)
		}
		if as, _ := d.ListAttempts(ctx, "op"); len(as) != 2 || as[1].LeaseToken != 2 {
			t.Fatalf("attempts %+v", as)
		}
	})

	t.Run("SkipsPausedAndHeldScopes", func(t *testing.T) {
		t.Parallel()
		d := open(t)
		for _, s := range []string{"open", "paused", "held"} {
			PutScope(t, d, s, ScopeOpts{})
		}
		// An answer pauses "paused" for a minute; another holds "held".
		Enqueue(t, d, T0, NewOp("pause", "paused", T0), NewOp("hold", "held", T0))
		for _, c := range Claim(t, d, T0, 10) {
			dec := scheduler.Decision{State: scheduler.StateSucceeded, Scope: scheduler.ScopeEffect{PauseUntil: T0.Add(time.Minute), PauseReason: "rate limited"}}
			if c.Scope.Name == "held" {
				dec = scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked, Scope: scheduler.ScopeEffect{Hold: scheduler.HoldAuthRevoked}}
			}
			Complete(t, d, c, T0, dec, providers.Outcome{Class: providers.ClassSuccess, Status: 200})
		}
		for _, s := range []string{"open", "paused", "held"} {
			Enqueue(t, d, T0, NewOp(s+"-1", s, T0))
		}
		if got := ClaimedIDs(Claim(t, d, T0, 10)); fmt.Sprint(got) != "[open-1]" {
			t.Fatalf("claimed %v", got)
		}
		if got := ClaimedIDs(Claim(t, d, T0.Add(time.Minute), 10)); fmt.Sprint(got) != "[paused-1]" {
			t.Fatalf("claimed %v after the pause", got)
		}
	})

	t.Run("MaxConcurrent", func(t *testing.T) {
		t.Parallel()
		d := open(t)
		PutScope(t, d, "a", ScopeOpts{MaxConcurrent: 2})
		for i := range 5 {
			Enqueue(t, d, T0, NewOp(fmt.Sprintf("op-%d", i), "a", T0))
		}
		first := Claim(t, d, T0, 10)
		if len(first) != 2 {
			t.Fatalf("claimed %d, want 2", len(first))
		}
		if got := Claim(t, d, T0, 10); len(got) != 0 {
			t.Fatalf("claimed %d with both slots taken", len(got))
		}
		Complete(t, d, first[0], T0, scheduler.Decision{State: scheduler.StateSucceeded}, providers.Outcome{Class: providers.ClassSuccess, Status: 200})
		if got := Claim(t, d, T0, 10); len(got) != 1 {
			t.Fatalf("claimed %d after one finished, want 1", len(got))
		}
	})

	t.Run("RateSpacing", func(t *testing.T) {
		t.Parallel()
		d := open(t)
		// 2 per second: one send every 500ms.
		PutScope(t, d, "a", ScopeOpts{MaxConcurrent: 10, Rate: &scheduler.RateLimit{Requests: 2, Per: time.Second}})
		for i := range 5 {
			Enqueue(t, d, T0, NewOp(fmt.Sprintf("op-%d", i), "a", T0))
		}
		for _, step := range []struct {
			at   time.Duration
			want int
		}{{0, 1}, {0, 0}, {499 * time.Millisecond, 0}, {500 * time.Millisecond, 1}, {time.Second, 1}, {3 * time.Second, 1}, {3 * time.Second, 0}} {
			if got := len(Claim(t, d, T0.Add(step.at), 10)); got != step.want {
				t.Fatalf("at +%s claimed %d, want %d", step.at, got, step.want)
			}
		}
		at, ok, err := d.NextWake(context.Background())
		if err != nil || !ok || !at.Equal(T0.Add(3500*time.Millisecond)) {
			t.Fatalf("next wake = %v, %v, %v; want the next slot", at, ok, err)
		}
	})

	t.Run("FairAcrossScopes", func(t *testing.T) {
		t.Parallel()
		d := open(t)
		PutScope(t, d, "a", ScopeOpts{MaxConcurrent: 100})
		PutScope(t, d, "b", ScopeOpts{MaxConcurrent: 100})
		var ops []scheduler.NewOperation
		for i := range 500 {
			ops = append(ops, NewOp(fmt.Sprintf("a-%03d", i), "a", T0.Add(-time.Hour)))
		}
		Enqueue(t, d, T0, ops...)
		for i := range 5 {
			Enqueue(t, d, T0, NewOp(fmt.Sprintf("b-%d", i), "b", T0))
		}
		got := Claim(t, d, T0, 10)
		perScope := map[string]int{}
		for _, c := range got {
			perScope[c.Operation.Scope]++
		}
		if len(got) != 10 || perScope["b"] != 5 || perScope["a"] != 5 {
			t.Fatalf("claimed %v", ClaimedIDs(got))
		}
		if got[0].Operation.ID != "a-000" || got[1].Operation.ID != "b-0" {
			t.Fatalf("order %v: want round robin, oldest due first", ClaimedIDs(got))
		}
	})

	t.Run("ZeroLimit", func(t *testing.T) {
		t.Parallel()
		d := open(t)
		PutScope(t, d, "a", ScopeOpts{})
		Enqueue(t, d, T0, NewOp("op", "a", T0))
		if got := Claim(t, d, T0, 0); len(got) != 0 {
			t.Fatalf("claimed %d with limit 0", len(got))
		}
	})
}

func testListRunning(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	PutScope(t, d, "a", ScopeOpts{})
	Enqueue(t, d, T0, NewOp("early", "a", T0), NewOp("late", "a", T0))
	Claim(t, d, T0, 1)                  // early: lease until T0+1m
	Claim(t, d, T0.Add(time.Minute), 1) // late: lease until T0+2m

	all, err := d.ListRunning(ctx, time.Time{}, 0)
	if err != nil || fmt.Sprint(ClaimedIDs(all)) != "[early late]" {
		t.Fatalf("all running = %v, %v", ClaimedIDs(all), err)
	}
	expired, err := d.ListRunning(ctx, T0.Add(time.Minute), 10)
	if err != nil || fmt.Sprint(ClaimedIDs(expired)) != "[early]" || expired[0].Scope.Name != "a" {
		t.Fatalf("expired = %v, %v", ClaimedIDs(expired), err)
	}
	if one, _ := d.ListRunning(ctx, time.Time{}, 1); len(one) != 1 {
		t.Fatalf("limit 1 gave %d", len(one))
	}
}

func testNextWake(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	wake := func() (time.Time, bool) {
		t.Helper()
		at, ok, err := d.NextWake(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return at, ok
	}
	if _, ok := wake(); ok {
		t.Fatal("wake with nothing waiting")
	}
	PutScope(t, d, "a", ScopeOpts{MaxConcurrent: 1})
	PutScope(t, d, "b", ScopeOpts{})
	Enqueue(t, d, T0, NewOp("a-1", "a", T0.Add(10*time.Minute)), NewOp("a-2", "a", T0.Add(20*time.Minute)))
	Enqueue(t, d, T0, NewOp("b-1", "b", T0.Add(5*time.Minute)))

	if at, ok := wake(); !ok || !at.Equal(T0.Add(5*time.Minute)) {
		t.Fatalf("wake = %v, want the earliest due", at)
	}
	// An answer to a request of b pauses b until +30m.
	Enqueue(t, d, T0, NewOp("b-pause", "b", T0))
	Complete(t, d, Claim(t, d, T0, 1)[0], T0, scheduler.Decision{State: scheduler.StateSucceeded,
		Scope: scheduler.ScopeEffect{PauseUntil: T0.Add(30 * time.Minute), PauseReason: "rate limited"}},
		providers.Outcome{Class: providers.ClassSuccess, Status: 200})
	if at, _ := wake(); !at.Equal(T0.Add(10 * time.Minute)) {
		t.Fatalf("wake = %v, want a's due time while b is paused until later", at)
	}
	// An answer to a request of a holds a.
	Enqueue(t, d, T0, NewOp("a-hold", "a", T0))
	Complete(t, d, Claim(t, d, T0, 1)[0], T0, scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked,
		Scope: scheduler.ScopeEffect{Hold: scheduler.HoldAuthRevoked}}, providers.Outcome{Class: providers.ClassAuthRevoked, Status: 401})
	if at, _ := wake(); !at.Equal(T0.Add(30 * time.Minute)) {
		t.Fatalf("wake = %v, want b's pause end with a held", at)
	}
	if _, err := d.ResumeScope(ctx, "a", scheduler.Action{Actor: "test", At: T0, Reason: "lift the hold"}); err != nil {
		t.Fatal(err)
	}
	// a runs a-1 (its only slot): a's backlog no longer counts, its lease does.
	if got := ClaimedIDs(Claim(t, d, T0.Add(10*time.Minute), 1)); fmt.Sprint(got) != "[a-1]" {
		t.Fatalf("claimed %v", got)
	}
	if at, _ := wake(); !at.Equal(T0.Add(11 * time.Minute)) {
		t.Fatalf("wake = %v, want the lease expiry of a-1", at)
	}
}
