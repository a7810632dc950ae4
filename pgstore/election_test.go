package pgstore_test

import (
	"context"
	"testing"
	"time"

	"pacer/internal/pgtest"
	"pacer/pgstore"
	"pacer/providers"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// Retention runs on one node: another's PruneFinished removes nothing
// until the elected node is gone.
func TestRetentionRunsOnOneNode(t *testing.T) {
	url := pgtest.URLFrom(t, migrated)
	first, second := openNode(t, url, pgstore.Options{}), openNode(t, url, pgstore.Options{})
	second.SetRestartMargin(0)
	storetest.PutScope(t, first, "a", storetest.ScopeOpts{})
	ctx := context.Background()
	finish := func(id string) {
		t.Helper()
		storetest.Enqueue(t, first, storetest.T0, storetest.NewOp(id, "a", storetest.T0))
		c := storetest.Claim(t, first, storetest.T0, 1)[0]
		storetest.Complete(t, first, c, storetest.T0, scheduler.Decision{State: scheduler.StateSucceeded}, providers.Outcome{Class: providers.ClassSuccess, Status: 200})
	}
	prune := func(s *pgstore.Store) int {
		t.Helper()
		res, err := s.PruneFinished(ctx, scheduler.PruneParams{Before: storetest.T0.Add(time.Hour), Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return res.Operations
	}
	finish("one")
	if n := prune(first); n != 1 {
		t.Fatalf("the first node pruned %d, want 1", n)
	}
	finish("two")
	if n := prune(second); n != 0 {
		t.Fatalf("a second node pruned %d while the first is elected", n)
	}
	first.Kill()
	for deadline := time.Now().Add(5 * time.Second); prune(second) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second node never took over retention")
		}
	}
}

// The feed's backlog counts the changes the sequencer has not numbered.
func TestFeedBacklogCountsUnnumberedChanges(t *testing.T) {
	s := openStore(t)
	storetest.PutScope(t, s, "a", storetest.ScopeOpts{})
	storetest.Enqueue(t, s, storetest.T0, storetest.NewOp("x", "a", storetest.T0), storetest.NewOp("y", "a", storetest.T0))
	ctx := context.Background()
	if n, err := s.FeedBacklog(ctx); err != nil || n != 2 {
		t.Fatalf("backlog %d (%v), want 2", n, err)
	}
	storetest.AllChanges(t, s)
	if n, err := s.FeedBacklog(ctx); err != nil || n != 0 {
		t.Fatalf("backlog %d (%v) after a read, want 0", n, err)
	}
}
