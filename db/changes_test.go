package db_test

import (
	"context"
	"testing"
	"time"

	"pacer/internal/pacertest"
	"pacer/providers"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// The feed's numbers survive what only SQL can do to the table (the
// contract's feed tests are in storetest): the newest changes deleted,
// the oldest ones deleted out of order with retention.
func TestListChanges(t *testing.T) {
	ctx := context.Background()
	d, path := newTestDB(t)
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{})
	storetest.PutScope(t, d, "b", storetest.ScopeOpts{})
	storetest.Enqueue(t, d, t0, storetest.NewOp("a-1", "a", t0))
	storetest.Enqueue(t, d, t0.Add(time.Second), storetest.NewOp("b-1", "b", t0))
	c := storetest.Claim(t, d, t0.Add(2*time.Second), 1)[0] // a-1, the oldest due
	storetest.Complete(t, d, c, t0.Add(3*time.Second), scheduler.Decision{State: scheduler.StateSucceeded}, providers.Outcome{Class: providers.ClassSuccess, Status: 200})
	if _, err := d.CancelOperation(ctx, "b-1", scheduler.Action{Actor: "x", At: t0.Add(4 * time.Second), Reason: "r"}); err != nil {
		t.Fatal(err)
	}

	t.Run("SeqNeverReused", func(t *testing.T) {
		// Deleting the newest changes (as pruning might) must not hand
		// their numbers out again: a follower past them would miss the
		// new changes.
		if _, err := rawDB(t, path).Exec(`DELETE FROM changes WHERE seq >= 4`); err != nil {
			t.Fatal(err)
		}
		d.Close()
		d = pacertest.OpenStoreAt(t, path)
		storetest.Enqueue(t, d, t0.Add(5*time.Second), storetest.NewOp("a-2", "a", t0))
		if got, want := storetest.Feed(t, d, scheduler.ChangeFilter{After: 3, Limit: 10}), "6:a-2:a:scheduled"; got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	})

	// (SeqNeverReused's store closed with its subtest.)
	d = pacertest.OpenStoreAt(t, path)
	t.Run("ErrPruned", func(t *testing.T) {
		if _, err := rawDB(t, path).Exec(`DELETE FROM changes WHERE seq <= 2`); err != nil {
			t.Fatal(err)
		}
		storetest.FeedGap(t, d, 1, scheduler.ErrFeedPruned, 2)
		if got, want := storetest.Feed(t, d, scheduler.ChangeFilter{After: 2, Limit: 10}), "3:a-1:a:running 6:a-2:a:scheduled"; got != want {
			t.Fatalf("after 2: got %s, want %s", got, want)
		}
		if got, want := storetest.Feed(t, d, scheduler.ChangeFilter{Limit: 1}), "3:a-1:a:running"; got != want {
			t.Fatalf("after 0 (the oldest held): got %s, want %s", got, want)
		}
		if _, err := rawDB(t, path).Exec(`DELETE FROM changes`); err != nil {
			t.Fatal(err)
		}
		storetest.FeedGap(t, d, 3, scheduler.ErrFeedPruned, 6)
		if got := storetest.Feed(t, d, scheduler.ChangeFilter{After: 6, Limit: 10}) + storetest.Feed(t, d, scheduler.ChangeFilter{Limit: 10}); got != "" {
			t.Fatalf("caught up, nothing held: got %s", got)
		}
	})
}
