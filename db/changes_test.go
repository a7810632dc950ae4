package db_test

import (
	"context"
	"strings"
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

// Migration 10 gives each change its scope's row instead of its name,
// with the seq values and the newest seq ever assigned kept; a change
// whose name matched no scope (a file edited by hand) keeps its name. The
// feed reads as before, by scope too, and the per-scope index is gone.
func TestMigrationSlimsTheFeed(t *testing.T) {
	ctx := context.Background()
	d, path := newTestDB(t)
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{})
	storetest.PutScope(t, d, "b", storetest.ScopeOpts{})
	storetest.Enqueue(t, d, t0, storetest.NewOp("a-1", "a", t0), storetest.NewOp("b-1", "b", t0))
	c := storetest.Claim(t, d, t0, 1)[0] // a-1
	storetest.Complete(t, d, c, t0.Add(time.Second), scheduler.Decision{State: scheduler.StateSucceeded}, providers.Outcome{Class: providers.ClassSuccess, Status: 200})
	d.Close()
	raw := rawDB(t, path)
	for _, q := range []string{undoSlimFeed,
		`INSERT INTO changes (operation_id, scope, state, at) VALUES ('gone-1', 'gone', 'scheduled', 0)`, // seq 5
		`INSERT INTO changes (operation_id, scope, state, at) VALUES ('gone-2', 'gone', 'scheduled', 0)`, // seq 6
		`DELETE FROM changes WHERE seq = 6`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()

	d = pacertest.OpenStoreAt(t, path)
	if got, want := storetest.Feed(t, d, scheduler.ChangeFilter{Limit: 10}), "1:a-1:a:scheduled 2:b-1:b:scheduled 3:a-1:a:running 4:a-1:a:succeeded 5:gone-1:gone:scheduled"; got != want {
		t.Fatalf("feed after migration\n got %s\nwant %s", got, want)
	}
	for scope, want := range map[string]string{"a": "1:a-1:a:scheduled 3:a-1:a:running 4:a-1:a:succeeded", "b": "2:b-1:b:scheduled", "gone": "5:gone-1:gone:scheduled"} {
		if got := storetest.Feed(t, d, scheduler.ChangeFilter{Scope: scope, Limit: 10}); got != want {
			t.Errorf("scope %s after migration: got %s, want %s", scope, got, want)
		}
	}
	// Seq 6 was assigned (and deleted): the next change is 7.
	storetest.Enqueue(t, d, t0, storetest.NewOp("b-2", "b", t0))
	if got, want := storetest.Feed(t, d, scheduler.ChangeFilter{After: 5, Limit: 10}), "7:b-2:b:scheduled"; got != want {
		t.Fatalf("after migration: got %s, want %s", got, want)
	}
	raw = rawDB(t, path)
	var orphans, indexes int
	if err := raw.QueryRow(`SELECT count(*) FROM changes WHERE scope_id IS NULL`).Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	if err := raw.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'changes'`).Scan(&indexes); err != nil {
		t.Fatal(err)
	}
	if orphans != 1 || indexes != 0 {
		t.Fatalf("%d changes without a scope row (want 1, gone-1), %d indexes on changes (want 0)", orphans, indexes)
	}
	// The scopes have distinct configuration versions, and claims work.
	var versions int
	if err := raw.QueryRow(`SELECT count(DISTINCT config_version) FROM scopes WHERE config_version > 0`).Scan(&versions); err != nil || versions != 2 {
		t.Fatalf("%d distinct configuration versions, %v; want 2", versions, err)
	}
	if got := storetest.ClaimedIDs(storetest.Claim(t, d, t0, 10)); len(got) != 2 {
		t.Fatalf("claimed %v after migration, want b-1 and b-2", got)
	}
	if err := d.Check(ctx); err != nil {
		t.Fatalf("check after migration: %v", err)
	}
}

// The feed joins scope names when read, so the schema refuses what would
// change the name of a change already read: renaming or deleting a scope.
func TestScopesAreNeverRenamedOrDeleted(t *testing.T) {
	d, path := newTestDB(t)
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{})
	storetest.PutScope(t, d, "unused", storetest.ScopeOpts{})
	storetest.Enqueue(t, d, t0, storetest.NewOp("a-1", "a", t0))
	raw := rawDB(t, path)
	for _, q := range []string{`UPDATE scopes SET name = 'z' WHERE name = 'a'`, `DELETE FROM scopes WHERE name = 'unused'`} {
		if _, err := raw.Exec(q); err == nil || !strings.Contains(err.Error(), "never") {
			t.Errorf("%s: %v, want it refused", q, err)
		}
	}
	if got, want := storetest.Feed(t, d, scheduler.ChangeFilter{Scope: "a", Limit: 10}), "1:a-1:a:scheduled"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
