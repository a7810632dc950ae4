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

// Retention bounds the change feed also when no one reads it: the changes
// are numbered by the feed's readers, and pruning numbers them first.
func TestRetentionPrunesChangesNoOneRead(t *testing.T) {
	ctx := context.Background()
	s := openNode(t, pgtest.URLFrom(t, migrated), pgstore.Options{})
	now := time.Now()
	storetest.PutScope(t, s, "a", storetest.ScopeOpts{})
	storetest.Enqueue(t, s, now.Add(-time.Hour), storetest.NewRequest("op", "a", "GET", "/op"))
	c := claimOne(t, s, now)
	storetest.Complete(t, s, c, now, scheduler.Decision{State: scheduler.StateSucceeded, Reason: "ok"}, providers.Outcome{Class: providers.ClassSuccess, Status: 200})
	res, err := s.PruneFinished(ctx, scheduler.PruneParams{Before: now.Add(time.Minute), Limit: 100})
	if err != nil || res.Operations != 1 || res.Changes != 3 {
		t.Fatalf("pruned %+v, %v; want the operation and its 3 changes (scheduled, running, succeeded)", res, err)
	}
	if n, err := s.FeedBacklog(ctx); err != nil || n != 0 {
		t.Errorf("feed backlog after pruning: %d, %v; want 0", n, err)
	}
}
