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
		next int64
		more bool
	}{
		{"All", scheduler.ChangeFilter{Limit: 10}, "1:a-1:a:scheduled 2:b-1:b:scheduled 3:a-1:a:running 4:a-1:a:succeeded 5:b-1:b:canceled", 5, false},
		{"After", scheduler.ChangeFilter{After: 3, Limit: 10}, "4:a-1:a:succeeded 5:b-1:b:canceled", 5, false},
		{"Limit", scheduler.ChangeFilter{After: 1, Limit: 2}, "2:b-1:b:scheduled 3:a-1:a:running", 3, true},
		// A read of one scope moves Next past the other scopes' changes it
		// examined, to the end of the feed here.
		{"Scope", scheduler.ChangeFilter{Scope: "b", Limit: 10}, "2:b-1:b:scheduled 5:b-1:b:canceled", 5, false},
		{"ScopeAfter", scheduler.ChangeFilter{Scope: "a", After: 3, Limit: 10}, "4:a-1:a:succeeded", 5, false},
		{"ScopeNoneLeft", scheduler.ChangeFilter{Scope: "a", After: 4, Limit: 10}, "", 5, false},
		// Stopped at Limit: Next is the last change returned, not past the
		// scope's next change.
		{"ScopeLimit", scheduler.ChangeFilter{Scope: "a", Limit: 1}, "1:a-1:a:scheduled", 1, true},
		{"UnknownScope", scheduler.ChangeFilter{Scope: "none", Limit: 10}, "", 5, false},
		{"AtTheEnd", scheduler.ChangeFilter{After: 5, Limit: 10}, "", 5, false},
		{"ScopeAtTheEnd", scheduler.ChangeFilter{Scope: "a", After: 5, Limit: 10}, "", 5, false},
		{"LimitClamped", scheduler.ChangeFilter{Limit: 0}, "1:a-1:a:scheduled", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Feed(t, d, tc.f); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			b, err := d.ListChanges(ctx, tc.f)
			if err != nil || b.Next != tc.next || b.More != tc.more {
				t.Fatalf("next %d, more %v, %v; want next %d, more %v", b.Next, b.More, err, tc.next, tc.more)
			}
		})
	}

	t.Run("TimesAreTheUpdateTimes", func(t *testing.T) {
		b, err := d.ListChanges(ctx, scheduler.ChangeFilter{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		cs := b.Changes
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

// A read of one scope examines at most MaxChangeScan changes: behind many
// changes of another scope it answers with none, Next at the last change
// it examined and More, so that its reader advances to the scope's change
// in bounded steps and never reads the same changes again.
func testScopeFeedScanIsBounded(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	PutScope(t, d, "busy", ScopeOpts{})
	PutScope(t, d, "quiet", ScopeOpts{})
	busy := scheduler.MaxChangeScan + scheduler.MaxChangeScan/2
	for n := 0; n < busy; {
		var ops []scheduler.NewOperation
		for ; n < busy && len(ops) < scheduler.MaxBatch; n++ {
			ops = append(ops, NewOp(fmt.Sprintf("busy-%d", n), "busy", T0))
		}
		Enqueue(t, d, T0, ops...)
	}
	Enqueue(t, d, T0, NewOp("quiet-1", "quiet", T0))
	last := int64(busy + 1) // quiet-1's change

	var pages []string
	f := scheduler.ChangeFilter{Scope: "quiet", Limit: 10}
	for range 4 {
		b, err := d.ListChanges(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		page := fmt.Sprintf("%d", b.Next)
		for _, c := range b.Changes {
			page += " " + c.OperationID
		}
		if b.More {
			page += " more"
		}
		pages = append(pages, page)
		if b.Next < f.After {
			t.Fatalf("next %d went back from %d", b.Next, f.After)
		}
		f.After = b.Next
	}
	want := []string{
		fmt.Sprint(scheduler.MaxChangeScan, " more"), // examined the first MaxChangeScan: none of quiet's
		fmt.Sprint(last, " quiet-1"),                 // the rest of busy's, then quiet's
		fmt.Sprint(last), fmt.Sprint(last),           // caught up: nothing more, Next stays
	}
	if got := strings.Join(pages, " | "); got != strings.Join(want, " | ") {
		t.Fatalf("pages\n got %s\nwant %s", got, strings.Join(want, " | "))
	}
	// Another scope's change after the end moves the quiet reader's Next.
	Enqueue(t, d, T0, NewOp("busy-last", "busy", T0))
	if b, err := d.ListChanges(ctx, f); err != nil || len(b.Changes) != 0 || b.Next != last+1 || b.More {
		t.Fatalf("after another scope's change: %+v, %v; want none, next %d", b, err, last+1)
	}
}
