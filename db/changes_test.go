package db_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// feed lists changes with f and renders them as "seq:op:scope:state".
func feed(t *testing.T, d interface {
	ListChanges(context.Context, scheduler.ChangeFilter) ([]scheduler.Change, error)
}, f scheduler.ChangeFilter) string {
	t.Helper()
	cs, err := d.ListChanges(context.Background(), f)
	if err != nil {
		t.Fatalf("list changes %+v: %v", f, err)
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%d:%s:%s:%s", c.Seq, c.OperationID, c.Scope, c.State)
	}
	return strings.Join(parts, " ")
}

func TestListChanges(t *testing.T) {
	ctx := context.Background()
	d, path := newTestDB(t)
	putScope(t, d, "a", scopeOpts{})
	putScope(t, d, "b", scopeOpts{})
	enqueue(t, d, t0, newOp("a-1", "a", t0))
	enqueue(t, d, t0.Add(time.Second), newOp("b-1", "b", t0))
	c := claim(t, d, t0.Add(2*time.Second), 1)[0] // a-1, the oldest due
	complete(t, d, c, t0.Add(3*time.Second), scheduler.Decision{State: scheduler.StateSucceeded}, providers.Outcome{Class: providers.ClassSuccess, Status: 200})
	if _, err := d.CancelOperation(ctx, "b-1", scheduler.Action{Actor: "x", At: t0.Add(4 * time.Second), Reason: "r"}); err != nil {
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
			if got := feed(t, d, tc.f); got != tc.want {
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
			if got := cs[i].At; !got.Equal(t0.Add(want)) || got.Location() != time.UTC {
				t.Fatalf("change %d at %v, want %v UTC", cs[i].Seq, got, t0.Add(want))
			}
		}
	})

	t.Run("SeqNeverReused", func(t *testing.T) {
		// Deleting the newest changes (as pruning might) must not hand
		// their numbers out again: a follower past them would miss the
		// new changes.
		if _, err := rawDB(t, path).Exec(`DELETE FROM changes WHERE seq >= 4`); err != nil {
			t.Fatal(err)
		}
		d.Close()
		d = openTestDB(t, path)
		enqueue(t, d, t0.Add(5*time.Second), newOp("a-2", "a", t0))
		if got, want := feed(t, d, scheduler.ChangeFilter{After: 3, Limit: 10}), "6:a-2:a:scheduled"; got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	})

	// (SeqNeverReused's store closed with its subtest.)
	d = openTestDB(t, path)
	// gap lists after `after` and wants the *FeedGapError wrapping want,
	// resuming at resume.
	gap := func(t *testing.T, after int64, want error, resume int64) {
		t.Helper()
		_, err := d.ListChanges(ctx, scheduler.ChangeFilter{After: after, Limit: 10})
		var ge *scheduler.FeedGapError
		if !errors.As(err, &ge) || !errors.Is(err, want) || ge.Resume != resume {
			t.Fatalf("after %d: got %v, want %v resuming at %d", after, err, want, resume)
		}
	}
	t.Run("ErrAhead", func(t *testing.T) {
		// A cursor past the newest seq ever assigned: a restored backup.
		gap(t, 99, scheduler.ErrFeedAhead, 6)
		gap(t, 7, scheduler.ErrFeedAhead, 6)
	})
	t.Run("ErrPruned", func(t *testing.T) {
		if _, err := rawDB(t, path).Exec(`DELETE FROM changes WHERE seq <= 2`); err != nil {
			t.Fatal(err)
		}
		gap(t, 1, scheduler.ErrFeedPruned, 2)
		if got, want := feed(t, d, scheduler.ChangeFilter{After: 2, Limit: 10}), "3:a-1:a:running 6:a-2:a:scheduled"; got != want {
			t.Fatalf("after 2: got %s, want %s", got, want)
		}
		if got, want := feed(t, d, scheduler.ChangeFilter{Limit: 1}), "3:a-1:a:running"; got != want {
			t.Fatalf("after 0 (the oldest held): got %s, want %s", got, want)
		}
		if _, err := rawDB(t, path).Exec(`DELETE FROM changes`); err != nil {
			t.Fatal(err)
		}
		gap(t, 3, scheduler.ErrFeedPruned, 6)
		if got := feed(t, d, scheduler.ChangeFilter{After: 6, Limit: 10}) + feed(t, d, scheduler.ChangeFilter{Limit: 10}); got != "" {
			t.Fatalf("caught up, nothing held: got %s", got)
		}
	})
}
