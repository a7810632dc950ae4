package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

func testChangesFeed(t *testing.T, open Opener) {
	ctx := context.Background()
	d := openWithOps(t, open, NewOp("op", "a", T0))
	c := Claim(t, d, T0.Add(time.Second), 1)[0]
	Complete(t, d, c, T0.Add(2*time.Second), scheduler.Decision{State: scheduler.StateSucceeded}, providers.Outcome{Class: providers.ClassSuccess, Status: 200})
	Enqueue(t, d, T0.Add(3*time.Second), NewOp("op-2", "a", T0))
	if _, err := d.CancelOperation(ctx, "op-2", scheduler.Action{Actor: "x", At: T0.Add(4 * time.Second), Reason: "r"}); err != nil {
		t.Fatal(err)
	}

	var got []string
	last := int64(0)
	for _, c := range AllChanges(t, d) {
		if c.Seq <= last {
			t.Fatalf("seq %d after %d", c.Seq, last)
		}
		last = c.Seq
		got = append(got, fmt.Sprintf("%s:%s:%s:+%ds", c.OperationID, c.Scope, c.State, c.At.Sub(T0)/time.Second))
	}
	want := "op:a:scheduled:+0s op:a:running:+1s op:a:succeeded:+2s op-2:a:scheduled:+3s op-2:a:canceled:+4s"
	if g := strings.Join(got, " "); g != want {
		t.Fatalf("changes\n got %s\nwant %s", g, want)
	}
}

func testListChanges(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	PutScope(t, d, "a", ScopeOpts{})
	PutScope(t, d, "b", ScopeOpts{})
	Enqueue(t, d, T0, NewOp("a-1", "a", T0))
	Enqueue(t, d, T0.Add(time.Second), NewOp("b-1", "b", T0))
	c := Claim(t, d, T0.Add(2*time.Second), 1)[0] // a-1, the oldest due
	Complete(t, d, c, T0.Add(3*time.Second), scheduler.Decision{State: scheduler.StateSucceeded}, providers.Outcome{Class: providers.ClassSuccess, Status: 200})
	if _, err := d.CancelOperation(ctx, "b-1", scheduler.Action{Actor: "x", At: T0.Add(4 * time.Second), Reason: "r"}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		f    scheduler.ChangeFilter
		want string
	}{
		{"All", scheduler.ChangeFilter{Limit: 10}, "1:a-1:a:scheduled 2:b-1:b:scheduled 3:a-1:a:running 4:a-1:a:succeeded 5:b-1:b:canceled"},
		{"After", scheduler.ChangeFilter{After: 3, Limit: 10}, "4:a-1:a:succeeded 5:b-1:b:canceled"},
		{"Limit", scheduler.ChangeFilter{After: 1, Limit: 2}, "2:b-1:b:scheduled 3:a-1:a:running"},
		{"Scope", scheduler.ChangeFilter{Scope: "b", Limit: 10}, "2:b-1:b:scheduled 5:b-1:b:canceled"},
		{"ScopeAfter", scheduler.ChangeFilter{Scope: "a", After: 3, Limit: 10}, "4:a-1:a:succeeded"},
		{"UnknownScope", scheduler.ChangeFilter{Scope: "none", Limit: 10}, ""},
		{"AtTheEnd", scheduler.ChangeFilter{After: 5, Limit: 10}, ""},
		{"LimitClamped", scheduler.ChangeFilter{Limit: 0}, "1:a-1:a:scheduled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Feed(t, d, tc.f); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}

	t.Run("TimesAreTheUpdateTimes", func(t *testing.T) {
		cs, err := d.ListChanges(ctx, scheduler.ChangeFilter{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second} {
			if got := cs[i].At; !got.Equal(T0.Add(want)) || got.Location() != time.UTC {
				t.Fatalf("change %d at %v, want %v UTC", cs[i].Seq, got, T0.Add(want))
			}
		}
	})

	// One more change: the newest seq ever assigned is 6.
	Enqueue(t, d, T0.Add(5*time.Second), NewOp("a-2", "a", T0))
	t.Run("ErrAhead", func(t *testing.T) {
		// A cursor past the newest seq ever assigned: a restored backup.
		FeedGap(t, d, 99, scheduler.ErrFeedAhead, 6)
		FeedGap(t, d, 7, scheduler.ErrFeedAhead, 6)
	})
	t.Run("ErrPrunedByRetention", func(t *testing.T) {
		// Retention removes the changes recorded before its cut-off
		// (seq 1 and 2): a cursor before them cannot continue.
		if _, err := d.PruneFinished(ctx, scheduler.PruneParams{Before: T0.Add(2 * time.Second), Limit: 10}); err != nil {
			t.Fatal(err)
		}
		FeedGap(t, d, 1, scheduler.ErrFeedPruned, 2)
		if got, want := Feed(t, d, scheduler.ChangeFilter{After: 2, Limit: 10}), "3:a-1:a:running 4:a-1:a:succeeded 5:b-1:b:canceled 6:a-2:a:scheduled"; got != want {
			t.Fatalf("after 2: got %s, want %s", got, want)
		}
		if got, want := Feed(t, d, scheduler.ChangeFilter{Limit: 1}), "3:a-1:a:running"; got != want {
			t.Fatalf("after 0 (the oldest held): got %s, want %s", got, want)
		}
	})
}
