package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"pacer/scheduler"
)

func testPruneFinished(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	PutScope(t, d, "a", ScopeOpts{})
	var ops []scheduler.NewOperation
	for _, id := range []string{"ok-1", "ok-2", "held", "failed", "canceled", "later"} {
		ops = append(ops, NewOp(id, "a", T0))
	}
	ops[5].NotBefore = T0.Add(48 * time.Hour) // stays scheduled
	Enqueue(t, d, T0, ops...)
	if _, err := d.CancelOperation(ctx, "canceled", scheduler.Action{Actor: "test", At: T0, Reason: "not needed"}); err != nil {
		t.Fatal(err)
	}
	settle(t, d, T0, func(id string) scheduler.Decision {
		switch id {
		case "held":
			return scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldUnknownOutcome}
		case "failed":
			return scheduler.Decision{State: scheduler.StateFailed, FailureReason: scheduler.FailurePermanent}
		}
		return scheduler.Decision{State: scheduler.StateSucceeded}
	})
	// A recent success that must stay.
	Enqueue(t, d, T0.Add(time.Hour), NewOp("recent", "a", T0.Add(time.Hour)))
	settle(t, d, T0.Add(time.Hour), func(string) scheduler.Decision { return scheduler.Decision{State: scheduler.StateSucceeded} })
	changes := len(AllChanges(t, d))

	t.Run("NothingBeforeTheCutoff", func(t *testing.T) {
		res, err := d.PruneFinished(ctx, scheduler.PruneParams{Before: T0, Limit: 10})
		if err != nil || res != (scheduler.PruneResult{}) {
			t.Fatalf("PruneFinished(before T0) = %+v, %v; want nothing", res, err)
		}
	})
	t.Run("InBatches", func(t *testing.T) {
		before := T0.Add(time.Minute)
		res, err := d.PruneFinished(ctx, scheduler.PruneParams{Before: before, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if res.Operations != 2 || res.Changes != 2 || !res.More {
			t.Fatalf("first batch %+v, want 2 operations, 2 changes, More", res)
		}
		total := res
		for i := 0; res.More; i++ {
			if i == 20 {
				t.Fatal("batches never ran out")
			}
			if res, err = d.PruneFinished(ctx, scheduler.PruneParams{Before: before, Limit: 2}); err != nil {
				t.Fatal(err)
			}
			total = total.Add(res)
		}
		// ok-1, ok-2, canceled; their attempts (2) and the cancel's audit.
		if total.Operations != 3 || total.Attempts != 2 || total.Audit != 1 {
			t.Errorf("removed %+v, want 3 operations, 2 attempts, 1 audit entry", total)
		}
		for _, id := range []string{"ok-1", "ok-2", "canceled"} {
			if _, err := d.GetOperation(ctx, id); !errors.Is(err, scheduler.ErrNotFound) {
				t.Errorf("%s still there (err %v)", id, err)
			}
		}
		for id, st := range map[string]scheduler.State{"held": scheduler.StateHeld, "failed": scheduler.StateFailed, "later": scheduler.StateScheduled, "recent": scheduler.StateSucceeded} {
			if got := GetOp(t, d, id).State; got != st {
				t.Errorf("%s: %s, want %s kept", id, got, st)
			}
		}
		if a, err := d.ListAttempts(ctx, "held"); err != nil || len(a) != 1 {
			t.Errorf("held operation's attempts: %d, %v; want 1 kept", len(a), err)
		}
		// Every change recorded at T0 went; the three of "recent" stay.
		left := AllChanges(t, d)
		if got := len(left); got != 3 || total.Changes != changes-3 {
			t.Fatalf("changes left %d (removed %d of %d), want 3", got, total.Changes, changes)
		}
		if minSeq := left[0].Seq; minSeq != int64(changes-2) {
			t.Errorf("oldest change left has seq %d, want %d: only the head of the feed goes", minSeq, changes-2)
		}
	})
	t.Run("SeqNotReused", func(t *testing.T) {
		Enqueue(t, d, T0.Add(2*time.Hour), NewOp("after", "a", T0.Add(2*time.Hour)))
		all := AllChanges(t, d)
		if maxSeq := all[len(all)-1].Seq; maxSeq != int64(changes+1) {
			t.Errorf("new change has seq %d, want %d", maxSeq, changes+1)
		}
	})
	t.Run("BadLimit", func(t *testing.T) {
		if _, err := d.PruneFinished(ctx, scheduler.PruneParams{Before: T0, Limit: 0}); err == nil {
			t.Error("limit 0 accepted")
		}
	})
}
