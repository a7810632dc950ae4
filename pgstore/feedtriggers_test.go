package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"pacer/internal/pgtest"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// The feed's statement triggers write one change per inserted operation
// and one per operation whose state an UPDATE changed, none for an UPDATE
// that leaves the state; an INSERT's in the order it wrote them.
func TestFeedTriggersWriteOneChangePerStateChangeInOrder(t *testing.T) {
	ctx := context.Background()
	d := openStoreAt(t, pgtest.URLFrom(t, migrated))
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{MaxConcurrent: 100})
	ids := []string{"op-c", "op-a", "op-b"}
	for _, id := range ids {
		storetest.Enqueue(t, d, storetest.T0, storetest.NewOp(id, "a", storetest.T0))
	}
	pool := d.Pool()
	// An UPDATE of every operation that changes no state: no change.
	if _, err := pool.Exec(ctx, `UPDATE operations SET updated_at = updated_at + 1`); err != nil {
		t.Fatal(err)
	}
	// One UPDATE that changes two states and leaves the third's.
	if _, err := pool.Exec(ctx, `
		UPDATE operations o SET state = 'canceled', next_attempt_at = NULL, updated_at = o.updated_at + 1
		FROM unnest($1::text[]) WITH ORDINALITY AS w(id, k)
		WHERE o.operation_id = w.id AND w.id <> 'op-a'`, []string{"op-b", "op-a", "op-c"}); err != nil {
		t.Fatal(err)
	}
	b, err := d.ListChanges(ctx, scheduler.ChangeFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range b.Changes {
		got = append(got, fmt.Sprintf("%s:%s", c.OperationID, c.State))
	}
	inserted := []string{"op-c:scheduled", "op-a:scheduled", "op-b:scheduled"}
	if !slices.Equal(got[:min(3, len(got))], inserted) || len(got) != 5 {
		t.Fatalf("changes %v; want %v then op-b and op-c canceled", got, inserted)
	}
	// The order in which one UPDATE visits its rows is the plan's: check
	// the set.
	if rest := got[3:]; !slices.Contains(rest, "op-b:canceled") || !slices.Contains(rest, "op-c:canceled") {
		t.Fatalf("changes after the inserts %v; want op-b and op-c canceled", rest)
	}
}
