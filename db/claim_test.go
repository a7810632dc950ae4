package db_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// claimedIDs lists the operation IDs of claims, in order.
func claimedIDs(cs []scheduler.Claim) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Operation.ID
	}
	return out
}

func TestClaimDue(t *testing.T) {
	t.Run("RespectsNextAttemptAt", func(t *testing.T) {
		d, _ := newTestDB(t)
		putScope(t, d, "a", scopeOpts{})
		enqueue(t, d, t0, newOp("now", "a", t0), newOp("later", "a", t0.Add(time.Minute)))
		if got := claimedIDs(claim(t, d, t0, 10)); fmt.Sprint(got) != "[now]" {
			t.Fatalf("claimed %v at t0", got)
		}
		if got := claimedIDs(claim(t, d, t0.Add(time.Minute-time.Millisecond), 10)); len(got) != 0 {
			t.Fatalf("claimed %v a millisecond early", got)
		}
		if got := claimedIDs(claim(t, d, t0.Add(time.Minute), 10)); fmt.Sprint(got) != "[later]" {
			t.Fatalf("claimed %v when due", got)
		}
	})

	t.Run("LeaseAndAttemptIntent", func(t *testing.T) {
		ctx := context.Background()
		d, _ := newTestDB(t)
		putScope(t, d, "a", scopeOpts{Credentials: scheduler.Credentials{Type: scheduler.CredentialBearer, Token: "tok"}})
		enqueue(t, d, t0, newOp("op", "a", t0))
		cs := claim(t, d, t0, 10)
		if len(cs) != 1 {
			t.Fatalf("claims %d", len(cs))
		}
		op, sc := cs[0].Operation, cs[0].Scope
		if op.State != scheduler.StateRunning || op.LeaseToken != 1 || op.Attempt != 1 || op.BudgetAttempts != 1 ||
			!op.LeaseExpiresAt.Equal(t0.Add(time.Minute)) || !op.FirstSentAt.Equal(t0) || !op.UpdatedAt.Equal(t0) {
			t.Fatalf("claimed op %+v", op)
		}
		if sc.Name != "a" || sc.Credentials.Token != "tok" || sc.InFlight != 1 {
			t.Fatalf("claim scope %+v", sc)
		}
		as, err := d.ListAttempts(ctx, "op")
		if err != nil {
			t.Fatal(err)
		}
		if len(as) != 1 || as[0].Number != 1 || as[0].LeaseToken != 1 || !as[0].StartedAt.Equal(t0) || !as[0].FinishedAt.IsZero() {
			t.Fatalf("attempts %+v", as)
		}

		// A transient failure, then a second claim: the token and counters move on.
		complete(t, d, cs[0], t0.Add(time.Second), scheduler.Decision{State: scheduler.StateScheduled, NextAttemptAt: t0.Add(time.Minute)},
			providers.Outcome{Class: providers.ClassTransient, Status: 503})
		cs = claim(t, d, t0.Add(time.Minute), 10)
		op = cs[0].Operation
		if op.LeaseToken != 2 || op.Attempt != 2 || !op.FirstSentAt.Equal(t0) {
			t.Fatalf("second claim %+v", op)
		}
		if as, _ := d.ListAttempts(ctx, "op"); len(as) != 2 || as[1].LeaseToken != 2 {
			t.Fatalf("attempts %+v", as)
		}
	})

	t.Run("SkipsPausedAndHeldScopes", func(t *testing.T) {
		d, path := newTestDB(t)
		for _, s := range []string{"open", "paused", "held"} {
			putScope(t, d, s, scopeOpts{})
			enqueue(t, d, t0, newOp(s+"-1", s, t0))
		}
		raw := rawDB(t, path)
		if _, err := raw.Exec(`UPDATE scopes SET paused_until = ? WHERE name = 'paused'`, t0.Add(time.Minute).UnixMilli()); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec(`UPDATE scopes SET hold_reason = 'authRevoked' WHERE name = 'held'`); err != nil {
			t.Fatal(err)
		}
		if got := claimedIDs(claim(t, d, t0, 10)); fmt.Sprint(got) != "[open-1]" {
			t.Fatalf("claimed %v", got)
		}
		if got := claimedIDs(claim(t, d, t0.Add(time.Minute), 10)); fmt.Sprint(got) != "[paused-1]" {
			t.Fatalf("claimed %v after the pause", got)
		}
	})

	t.Run("MaxConcurrent", func(t *testing.T) {
		d, _ := newTestDB(t)
		putScope(t, d, "a", scopeOpts{MaxConcurrent: 2})
		for i := range 5 {
			enqueue(t, d, t0, newOp(fmt.Sprintf("op-%d", i), "a", t0))
		}
		first := claim(t, d, t0, 10)
		if len(first) != 2 {
			t.Fatalf("claimed %d, want 2", len(first))
		}
		if got := claim(t, d, t0, 10); len(got) != 0 {
			t.Fatalf("claimed %d with both slots taken", len(got))
		}
		complete(t, d, first[0], t0, scheduler.Decision{State: scheduler.StateSucceeded}, providers.Outcome{Class: providers.ClassSuccess, Status: 200})
		if got := claim(t, d, t0, 10); len(got) != 1 {
			t.Fatalf("claimed %d after one finished, want 1", len(got))
		}
	})

	t.Run("RateSpacing", func(t *testing.T) {
		d, _ := newTestDB(t)
		// 2 per second: one send every 500ms.
		putScope(t, d, "a", scopeOpts{MaxConcurrent: 10, Rate: &scheduler.RateLimit{Requests: 2, Per: time.Second}})
		for i := range 5 {
			enqueue(t, d, t0, newOp(fmt.Sprintf("op-%d", i), "a", t0))
		}
		for _, step := range []struct {
			at   time.Duration
			want int
		}{{0, 1}, {0, 0}, {499 * time.Millisecond, 0}, {500 * time.Millisecond, 1}, {time.Second, 1}, {3 * time.Second, 1}, {3 * time.Second, 0}} {
			if got := len(claim(t, d, t0.Add(step.at), 10)); got != step.want {
				t.Fatalf("at +%s claimed %d, want %d", step.at, got, step.want)
			}
		}
		at, ok, err := d.NextWake(context.Background())
		if err != nil || !ok || !at.Equal(t0.Add(3500*time.Millisecond)) {
			t.Fatalf("next wake = %v, %v, %v; want the next slot", at, ok, err)
		}
	})

	t.Run("FairAcrossScopes", func(t *testing.T) {
		d, _ := newTestDB(t)
		putScope(t, d, "a", scopeOpts{MaxConcurrent: 100})
		putScope(t, d, "b", scopeOpts{MaxConcurrent: 100})
		var ops []scheduler.NewOperation
		for i := range 500 {
			ops = append(ops, newOp(fmt.Sprintf("a-%03d", i), "a", t0.Add(-time.Hour)))
		}
		enqueue(t, d, t0, ops...)
		for i := range 5 {
			enqueue(t, d, t0, newOp(fmt.Sprintf("b-%d", i), "b", t0))
		}
		got := claim(t, d, t0, 10)
		perScope := map[string]int{}
		for _, c := range got {
			perScope[c.Operation.Scope]++
		}
		if len(got) != 10 || perScope["b"] != 5 || perScope["a"] != 5 {
			t.Fatalf("claimed %v", claimedIDs(got))
		}
		if got[0].Operation.ID != "a-000" || got[1].Operation.ID != "b-0" {
			t.Fatalf("order %v: want round robin, oldest due first", claimedIDs(got))
		}
	})

	t.Run("ZeroLimit", func(t *testing.T) {
		d, _ := newTestDB(t)
		putScope(t, d, "a", scopeOpts{})
		enqueue(t, d, t0, newOp("op", "a", t0))
		if got := claim(t, d, t0, 0); len(got) != 0 {
			t.Fatalf("claimed %d with limit 0", len(got))
		}
	})
}

func TestListRunning(t *testing.T) {
	ctx := context.Background()
	d, _ := newTestDB(t)
	putScope(t, d, "a", scopeOpts{})
	enqueue(t, d, t0, newOp("early", "a", t0), newOp("late", "a", t0))
	claim(t, d, t0, 1)                  // early: lease until t0+1m
	claim(t, d, t0.Add(time.Minute), 1) // late: lease until t0+2m

	all, err := d.ListRunning(ctx, time.Time{}, 0)
	if err != nil || fmt.Sprint(claimedIDs(all)) != "[early late]" {
		t.Fatalf("all running = %v, %v", claimedIDs(all), err)
	}
	expired, err := d.ListRunning(ctx, t0.Add(time.Minute), 10)
	if err != nil || fmt.Sprint(claimedIDs(expired)) != "[early]" || expired[0].Scope.Name != "a" {
		t.Fatalf("expired = %v, %v", claimedIDs(expired), err)
	}
	if one, _ := d.ListRunning(ctx, time.Time{}, 1); len(one) != 1 {
		t.Fatalf("limit 1 gave %d", len(one))
	}
}

func TestNextWake(t *testing.T) {
	ctx := context.Background()
	d, path := newTestDB(t)
	raw := rawDB(t, path)
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
	putScope(t, d, "a", scopeOpts{MaxConcurrent: 1})
	putScope(t, d, "b", scopeOpts{})
	enqueue(t, d, t0, newOp("a-1", "a", t0.Add(10*time.Minute)), newOp("a-2", "a", t0.Add(20*time.Minute)))
	enqueue(t, d, t0, newOp("b-1", "b", t0.Add(5*time.Minute)))

	if at, ok := wake(); !ok || !at.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("wake = %v, want the earliest due", at)
	}
	if _, err := raw.Exec(`UPDATE scopes SET paused_until = ? WHERE name = 'b'`, t0.Add(30*time.Minute).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if at, _ := wake(); !at.Equal(t0.Add(10 * time.Minute)) {
		t.Fatalf("wake = %v, want a's due time while b is paused until later", at)
	}
	if _, err := raw.Exec(`UPDATE scopes SET hold_reason = 'authRevoked' WHERE name = 'a'`); err != nil {
		t.Fatal(err)
	}
	if at, _ := wake(); !at.Equal(t0.Add(30 * time.Minute)) {
		t.Fatalf("wake = %v, want b's pause end with a held", at)
	}
	if _, err := raw.Exec(`UPDATE scopes SET hold_reason = NULL`); err != nil {
		t.Fatal(err)
	}
	// a runs a-1 (its only slot): a's backlog no longer counts, its lease does.
	if got := claimedIDs(claim(t, d, t0.Add(10*time.Minute), 1)); fmt.Sprint(got) != "[a-1]" {
		t.Fatalf("claimed %v", got)
	}
	if at, _ := wake(); !at.Equal(t0.Add(11 * time.Minute)) {
		t.Fatalf("wake = %v, want the lease expiry of a-1", at)
	}
}
