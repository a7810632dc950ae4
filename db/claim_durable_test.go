package db_test

import (
	"context"
	"testing"
	"time"

	"pacer/scheduler"
)

// §11 "Durable before it leaves": a claim transaction that takes a claim
// for which ClaimParams.Durable holds commits with synchronous=FULL (SQLite
// syncs the WAL at that commit), once for the whole batch; one without
// such a claim commits with synchronous=NORMAL, and the writer goes back
// to NORMAL after a durable claim.
func TestClaimDurableCommit(t *testing.T) {
	const normal, full = 1, 2
	d, _ := newTestDB(t)
	putScope(t, d, "a", scopeOpts{MaxConcurrent: 100})
	type commit struct {
		ids  []string
		sync int
	}
	var commits []commit
	d.OnClaimCommit(func(claims []scheduler.Claim, sync int) {
		c := commit{sync: sync}
		for _, cl := range claims {
			c.ids = append(c.ids, cl.Operation.ID)
		}
		commits = append(commits, c)
	})
	ctx := context.Background()
	claim := func(durable func(scheduler.Claim) bool) []scheduler.Claim {
		t.Helper()
		commits = nil
		claims, err := d.ClaimDue(ctx, scheduler.ClaimParams{Now: t0, Limit: 10, LeaseFor: time.Minute, Durable: durable})
		if err != nil {
			t.Fatal(err)
		}
		return claims
	}
	only := func(id string) func(scheduler.Claim) bool {
		return func(c scheduler.Claim) bool { return c.Operation.ID == id }
	}
	want := func(n, sync int) {
		t.Helper()
		if len(commits) != 1 || len(commits[0].ids) != n || commits[0].sync != sync {
			t.Fatalf("claim commits = %+v, want one of %d claims with synchronous %d", commits, n, sync)
		}
	}

	enqueue(t, d, t0, newOp("a1", "a", t0), newOp("a2", "a", t0))
	claim(nil)
	want(2, normal)

	enqueue(t, d, t0, newOp("b1", "a", t0), newOp("b2", "a", t0))
	claim(func(scheduler.Claim) bool { return false })
	want(2, normal)

	enqueue(t, d, t0, newOp("c1", "a", t0), newOp("c2", "a", t0), newOp("c3", "a", t0))
	if got := claim(only("c2")); len(got) != 3 {
		t.Fatalf("durable claim took %d, want 3", len(got))
	}
	want(3, full) // one durable commit for the batch, the undone try never commits

	enqueue(t, d, t0, newOp("d1", "a", t0))
	claim(only("c2")) // no such claim in this batch
	want(1, normal)
}
