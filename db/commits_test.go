package db_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// OnCommit: every function added is called after each committed write,
// where a read already sees the commit; a write that rolls back calls
// none.
func TestOnCommit(t *testing.T) {
	d, _ := newTestDB(t)
	ctx := context.Background()
	var (
		mu     sync.Mutex
		calls  [2]int
		states []scheduler.State // what a read in the hook saw of op-1
	)
	d.OnCommit(func() {
		mu.Lock()
		defer mu.Unlock()
		calls[0]++
		if op, err := d.GetOperation(ctx, "op-1"); err == nil {
			states = append(states, op.State)
		}
	})
	d.OnCommit(func() { mu.Lock(); calls[1]++; mu.Unlock() })
	count := func() [2]int { mu.Lock(); defer mu.Unlock(); return calls }

	storetest.PutScope(t, d, "a", storetest.ScopeOpts{})
	if got := count(); got != [2]int{1, 1} {
		t.Fatalf("after a scope write: calls %v, want one to each hook", got)
	}
	storetest.Enqueue(t, d, t0, storetest.NewOp("op-1", "a", t0))
	storetest.Claim(t, d, t0, 1)
	mu.Lock()
	if len(states) != 2 || states[0] != scheduler.StateScheduled || states[1] != scheduler.StateRunning {
		t.Errorf("the hook read op-1 as %v, want [scheduled running]: each commit visible when its hook runs", states)
	}
	mu.Unlock()

	before := count()
	_, err := d.CancelOperation(ctx, "no-such-op", scheduler.Action{Actor: "test", At: t0, Reason: "r"})
	if !errors.Is(err, scheduler.ErrNotFound) {
		t.Fatalf("cancel an unknown operation: %v, want ErrNotFound", err)
	}
	if got := count(); got != before {
		t.Errorf("a write that rolled back called the hooks: %v, then %v", before, got)
	}
}
