package db_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// §11 "Durable before it leaves": a claim transaction commits with
// synchronous=NORMAL; when it took a claim for which ClaimParams.Durable
// holds, a commit with synchronous=FULL follows before ClaimDue returns
// (in WAL mode that commit syncs the WAL, which holds the claim's frames),
// once for the whole batch; a batch without such a claim is not followed
// by one, and the writer is back on NORMAL afterwards.
func TestClaimDurableCommit(t *testing.T) {
	const normal, full = 1, 2
	d, _ := newTestDB(t)
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{MaxConcurrent: 100})
	type commit struct {
		ids  []string // nil for the sync's commit
		sync bool     // the sync's commit, not a claim
		mode int      // PRAGMA synchronous at the commit
	}
	var commits []commit
	d.OnClaimCommit(func(claims []scheduler.Claim, mode int) {
		c := commit{mode: mode}
		for _, cl := range claims {
			c.ids = append(c.ids, cl.Operation.ID)
		}
		commits = append(commits, c)
	})
	d.OnWALSync(func(mode int) error {
		commits = append(commits, commit{sync: true, mode: mode})
		return nil
	})
	ctx := context.Background()
	claim := func(durable func(scheduler.Claim) bool) []scheduler.Claim {
		t.Helper()
		commits = nil
		claims, err := d.ClaimDue(ctx, scheduler.ClaimParams{Now: t0, Limit: 10, LeaseFor: time.Minute, Durable: durable})
		if err != nil {
			t.Fatal(err)
		}
		if mode, err := d.WriterSynchronous(); err != nil || mode != normal {
			t.Fatalf("writer synchronous after the claim = %d (%v), want %d", mode, err, normal)
		}
		return claims
	}
	only := func(id string) func(scheduler.Claim) bool {
		return func(c scheduler.Claim) bool { return c.Operation.ID == id }
	}
	want := func(n int, synced bool) {
		t.Helper()
		ok := len(commits) >= 1 && len(commits[0].ids) == n && !commits[0].sync && commits[0].mode == normal
		if synced {
			ok = ok && len(commits) == 2 && commits[1].sync && commits[1].mode == full
		} else {
			ok = ok && len(commits) == 1
		}
		if !ok {
			t.Fatalf("commits = %+v, want a claim of %d under NORMAL, followed by a FULL sync: %v", commits, n, synced)
		}
	}

	storetest.Enqueue(t, d, t0, storetest.NewOp("a1", "a", t0), storetest.NewOp("a2", "a", t0))
	claim(nil)
	want(2, false)

	storetest.Enqueue(t, d, t0, storetest.NewOp("b1", "a", t0), storetest.NewOp("b2", "a", t0))
	claim(func(scheduler.Claim) bool { return false })
	want(2, false)

	storetest.Enqueue(t, d, t0, storetest.NewOp("c1", "a", t0), storetest.NewOp("c2", "a", t0), storetest.NewOp("c3", "a", t0))
	if got := claim(only("c2")); len(got) != 3 {
		t.Fatalf("durable claim took %d, want 3", len(got))
	}
	want(3, true) // one sync for the batch

	storetest.Enqueue(t, d, t0, storetest.NewOp("d1", "a", t0))
	claim(only("c2")) // no such claim in this batch
	want(1, false)
}

// A durable claim whose sync fails is not handed out: ClaimDue fails and
// returns no claim (so no request leaves), though the claim stays
// committed (its leases expire and are recovered as any other), and the
// writer is back on NORMAL.
func TestClaimDurableSyncFails(t *testing.T) {
	d, _ := newTestDB(t)
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{MaxConcurrent: 100})
	broken := errors.New("sync refused")
	d.OnWALSync(func(int) error { return broken })
	storetest.Enqueue(t, d, t0, storetest.NewOp("a1", "a", t0), storetest.NewOp("a2", "a", t0))
	ctx := context.Background()
	claims, err := d.ClaimDue(ctx, scheduler.ClaimParams{Now: t0, Limit: 10, LeaseFor: time.Minute,
		Durable: func(c scheduler.Claim) bool { return c.Operation.ID == "a2" }})
	if !errors.Is(err, broken) || claims != nil {
		t.Fatalf("ClaimDue = %d claims, %v; want none and the sync's error", len(claims), err)
	}
	running, err := d.ListRunning(ctx, time.Time{}, 0)
	if err != nil || len(running) != 2 {
		t.Fatalf("running after the failed sync = %d (%v), want the 2 committed claims", len(running), err)
	}
	if mode, err := d.WriterSynchronous(); err != nil || mode != 1 {
		t.Fatalf("writer synchronous = %d (%v), want 1 (NORMAL)", mode, err)
	}
	// Plain claims need no sync and are handed out.
	storetest.Enqueue(t, d, t0, storetest.NewOp("b1", "a", t0))
	if claims, err := d.ClaimDue(ctx, scheduler.ClaimParams{Now: t0, Limit: 10, LeaseFor: time.Minute}); err != nil || len(claims) != 1 {
		t.Fatalf("plain claim = %d, %v; want 1", len(claims), err)
	}
}
