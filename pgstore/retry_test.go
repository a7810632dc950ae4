package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"pacer/internal/pgtest"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// A transaction PostgreSQL aborts for a deadlock is run again: the store's
// caller sees it succeed. Another session (deadlock detection off for
// it, so the store's transaction is the one aborted) holds b and then
// asks for a while a cancel of a and b holds a and waits for b.
func TestDeadlockedWriteRunsAgain(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URLFrom(t, migrated)
	d := openStoreAt(t, url)
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{})
	storetest.Enqueue(t, d, storetest.T0, storetest.NewOp("a", "a", storetest.T0), storetest.NewOp("b", "a", storetest.T0))

	other, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, err := other.Exec(ctx, `SET deadlock_timeout = '1h'`); err != nil {
		t.Fatal(err)
	}
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM operations WHERE operation_id = 'b' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := d.ActOnOperations(ctx, scheduler.ActCancel, []string{"a", "b"}, storetest.T0, scheduler.Action{Actor: "x", At: storetest.T0, Reason: "r"})
		done <- result{n, err}
	}()
	waitForLockWait(t, other)
	// Now a cycle: the store holds a and waits for b; this asks for a.
	if _, err := tx.Exec(ctx, `SELECT 1 FROM operations WHERE operation_id = 'a' FOR UPDATE`); err != nil {
		t.Fatalf("the other session was aborted, not the store's transaction: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.n != 2 {
		t.Fatalf("cancel a and b after a deadlock: %d, %v; want 2 canceled", r.n, r.err)
	}
}

// waitForLockWait waits until a session of conn's database waits for a
// lock.
func waitForLockWait(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var n int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
	t.Fatal("no session waits for a lock")
}
