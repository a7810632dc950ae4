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

func testClaimDue(t *testing.T, open Opener) {
	t.Run("RespectsNextAttemptAt", func(t *testing.T) {
		t.Parallel()
		d := openWithOps(t, open, NewOp("now", "a", T0), NewOp("later", "a", T0.Add(time.Minute)))
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
		d := openWithOps(t, open, NewOp("op", "a", T0))
		if got := Claim(t, d, T0, 0); len(got) != 0 {
			t.Fatalf("claimed %d with limit 0", len(got))
		}
	})
}

func testListRunning(t *testing.T, open Opener) {
	ctx := context.Background()
	d := openWithOps(t, open, NewOp("early", "a", T0), NewOp("late", "a", T0))
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

// testListOrphaned: what a store may call orphaned is running (the
// caller's own leases among them on a store one process owns, none of a
// live process's on a shared one), carries its scope's credentials'
// values as a claim does, and is bounded by limit; a lease completed is
// never listed.
func testListOrphaned(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	PutScope(t, d, "a", ScopeOpts{Credentials: scheduler.Credentials{Type: scheduler.CredentialBearer, Token: "tok"}})
	Enqueue(t, d, T0, NewOp("done", "a", T0), NewOp("running", "a", T0), NewOp("waiting", "a", T0.Add(time.Hour)))
	cs := Claim(t, d, T0, 2)
	for _, c := range cs {
		if c.Operation.ID == "done" {
			Complete(t, d, c, T0, scheduler.Decision{State: scheduler.StateSucceeded}, providers.Outcome{Class: providers.ClassSuccess, Status: 200})
		}
	}
	orphans, err := d.ListOrphaned(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if ids := ClaimedIDs(orphans); len(ids) > 1 || (len(ids) == 1 && ids[0] != "running") {
		t.Fatalf("orphaned = %v; want at most [running]", ids)
	}
	for _, c := range orphans {
		if c.Operation.State != scheduler.StateRunning || c.Scope.Credentials.Token != "tok" {
			t.Fatalf("orphan %s: state %s, credentials %+v; want running with the scope's token", c.Operation.ID, c.Operation.State, c.Scope.Credentials)
		}
	}
	if none, err := d.ListOrphaned(ctx, 0); err != nil || len(none) > 1 {
		t.Fatalf("limit 0 gave %d (%v)", len(none), err)
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

// EnqueueBehindScopes enqueues at T0 one operation due at T0 in each of
// the scopes "paused" (paused until pauseEnd), "spent" (its budget spent
// until reset), "slot" (its rate slot taken until slot), "held" and
// "open", and one due after pauseEnd in "paused", and checks that each,
// as Enqueue returns it and as GetOperation reads it, says what its scope
// does to it: waitingForBudget until the scope admits it, or blocked by a
// held scope. It returns the number of operations it enqueued.
func EnqueueBehindScopes(t testing.TB, d scheduler.Store, pauseEnd, reset, slot time.Time) int {
	t.Helper()
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
	return len(want)
}

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
	EnqueueBehindScopes(t, d, pauseEnd, reset, slot)
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
				Outcome: providers.Outcome{Class: providers.ClassSuccess, Status: 200, Budget: eff.Budget}, Decision: scheduler.Decision{State: scheduler.StateSucceeded, Scope: eff},
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
		CheckNextWake(rt, d, offset("now", 0, 60), func() time.Time {
			running, err := d.ListRunning(ctx, time.Time{}, 1)
			if err != nil {
				rt.Fatal(err)
			}
			if len(running) == 0 {
				return time.Time{}
			}
			return running[0].Operation.LeaseExpiresAt
		})
	})
}

// CheckNextWake checks the time NextWake of d returns against the claim
// at now (design §11 "Idle is idle"): never one at which the claim
// admits nothing, unless the earliest lease of a running operation
// (leaseEnd, read after NextWake; zero when none runs) expires then, and
// never late: a millisecond before it, nothing is admitted. When NextWake
// says nothing waits, a claim a day later admits nothing. The claims it
// makes lease what they take for an hour.
func CheckNextWake(rt *rapid.T, d scheduler.Store, now time.Time, leaseEnd func() time.Time) {
	ctx := context.Background()
	at, ok, err := d.NextWake(ctx)
	if err != nil {
		rt.Fatal(err)
	}
	end := leaseEnd()
	claimAt := func(when time.Time) int {
		cs, err := d.ClaimDue(ctx, scheduler.ClaimParams{Now: when, Limit: 100, LeaseFor: time.Hour})
		if err != nil {
			rt.Fatal(err)
		}
		return len(cs)
	}
	if !ok {
		if n := claimAt(now.Add(24 * time.Hour)); n != 0 {
			rt.Fatalf("NextWake says nothing waits, yet a claim a day later admits %d", n)
		}
		return
	}
	if at.After(now) {
		if n := claimAt(at.Add(-time.Millisecond)); n != 0 {
			rt.Fatalf("NextWake %s is late: a claim a millisecond before admits %d", at, n)
		}
	}
	when := at
	if when.Before(now) {
		when = now
	}
	if n := claimAt(when); n == 0 && !(!end.IsZero() && end.Equal(at)) {
		rt.Fatalf("NextWake %s (now %s): the claim there admits nothing and no lease expires then: the loop would spin", at, now)
	}
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
