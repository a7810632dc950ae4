package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"pacer/internal/pgtest"
	"pacer/pgstore"
	"pacer/providers"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// nodeTrace is what registering a node leaves in the database, even after
// the node closed: the last id drawn from the nodes' identity, the node rows,
// and the advisory locks held.
func nodeTrace(t *testing.T, url string) (ids, rows, locks int64) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	err = conn.QueryRow(ctx, `SELECT
		COALESCE(pg_sequence_last_value(pg_get_serial_sequence('nodes', 'id')), 0),
		(SELECT count(*) FROM nodes),
		(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))`).Scan(&ids, &rows, &locks)
	if err != nil {
		t.Fatal(err)
	}
	return ids, rows, locks
}

// A store opened with NoNode (pacer users) is no node: it draws no node
// id, leaves no row and holds no lock, while it is open or after; it
// claims nothing and wins no election, so it prunes nothing, which a node
// then does.
func TestNoNodeStoreIsNoNode(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URLFrom(t, migrated)
	drawn, _, _ := nodeTrace(t, url) // by the template's making
	tool := openNode(t, url, pgstore.Options{NoNode: true})
	if ids, rows, locks := nodeTrace(t, url); ids != drawn || rows != 0 || locks != 0 {
		t.Fatalf("with a NoNode store open: %d node ids drawn (%d before), %d node rows, %d advisory locks; want none", ids, drawn, rows, locks)
	}
	now := time.Now()
	storetest.PutScope(t, tool, "a", storetest.ScopeOpts{})
	storetest.Enqueue(t, tool, now.Add(-time.Hour), storetest.NewRequest("op", "a", "GET", "/op"))
	if cs, err := tool.ClaimDue(ctx, scheduler.ClaimParams{Now: now, Limit: 10, LeaseFor: time.Minute}); err != nil || len(cs) != 0 {
		t.Fatalf("a NoNode store claimed %d, %v; want nothing", len(cs), err)
	}
	tool.Close()
	if ids, rows, locks := nodeTrace(t, url); ids != drawn || rows != 0 || locks != 0 {
		t.Fatalf("after a NoNode store closed: %d node ids drawn (%d before), %d node rows, %d advisory locks; want none", ids, drawn, rows, locks)
	}

	// A node sends op; retention is for nodes only.
	node := openNode(t, url, pgstore.Options{})
	c := claimOne(t, node, now)
	storetest.Complete(t, node, c, now, scheduler.Decision{State: scheduler.StateSucceeded, Reason: "ok"}, providers.Outcome{Class: providers.ClassSuccess, Status: 200})
	tool = openNode(t, url, pgstore.Options{NoNode: true})
	prune := scheduler.PruneParams{Before: now.Add(time.Minute), Limit: 100}
	if res, err := tool.PruneFinished(ctx, prune); err != nil || res.Operations != 0 {
		t.Fatalf("a NoNode store pruned %+v, %v; want nothing", res, err)
	}
	if res, err := node.PruneFinished(ctx, prune); err != nil || res.Operations != 1 {
		t.Fatalf("the node pruned %+v, %v; want the finished operation", res, err)
	}
}
