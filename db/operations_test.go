package db_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"pacer/scheduler"
)

func TestEnqueue(t *testing.T) {
	ctx := context.Background()
	d, path := newTestDB(t)
	putScope(t, d, "a", scopeOpts{})
	in := newOp("op-1", "a", t0.Add(time.Minute))

	res, err := d.Enqueue(ctx, []scheduler.NewOperation{in}, t0)
	if err != nil || res[0].Err != nil || !res[0].Created {
		t.Fatalf("enqueue = %v, %+v", err, res)
	}
	op := res[0].Operation
	want := scheduler.Operation{
		ID: "op-1", Scope: "a", Provider: "generic", Kind: scheduler.KindMutation, Request: in.Request,
		RequestIdentity: "op-1", State: scheduler.StateScheduled, NextAttemptAt: t0.Add(time.Minute),
		CreatedAt: t0, UpdatedAt: t0, Deadline: t0.Add(time.Minute + time.Hour), Retry: in.Retry, ContentHash: in.ContentHash,
	}
	if !reflect.DeepEqual(op, want) {
		t.Fatalf("operation\n got %+v\nwant %+v", op, want)
	}

	t.Run("SameContentIsExisting", func(t *testing.T) {
		res, err := d.Enqueue(ctx, []scheduler.NewOperation{in}, t0.Add(time.Hour))
		if err != nil || res[0].Err != nil || res[0].Created {
			t.Fatalf("again = %v, %+v", err, res)
		}
		if !reflect.DeepEqual(res[0].Operation, op) {
			t.Fatal("existing operation differs")
		}
	})

	t.Run("ErrConflict", func(t *testing.T) {
		other := in
		other.ContentHash = "other"
		res, err := d.Enqueue(ctx, []scheduler.NewOperation{other}, t0)
		if err != nil || !errors.Is(res[0].Err, scheduler.ErrConflict) {
			t.Fatalf("conflict = %v, %+v", err, res)
		}
	})

	t.Run("BatchRejectsOnlyBadItems", func(t *testing.T) {
		res, err := d.Enqueue(ctx, []scheduler.NewOperation{
			newOp("op-2", "a", t0), newOp("op-3", "missing", t0), newOp("op-2", "a", t0),
		}, t0)
		if err != nil {
			t.Fatal(err)
		}
		if !res[0].Created || !errors.Is(res[1].Err, scheduler.ErrUnknownScope) || !strings.Contains(res[1].Err.Error(), "missing") ||
			res[2].Created || res[2].Err != nil {
			t.Fatalf("results %+v", res)
		}
		if _, err := d.GetOperation(ctx, "op-3"); !errors.Is(err, scheduler.ErrNotFound) {
			t.Fatalf("rejected item stored: %v", err)
		}
	})

	t.Run("NothingWrittenForExisting", func(t *testing.T) {
		var n int
		if err := rawDB(t, path).QueryRow(`SELECT COUNT(*) FROM changes WHERE operation_id = 'op-1'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("changes rows for op-1 = %d, want 1", n)
		}
	})
}

func TestListOperations(t *testing.T) {
	ctx := context.Background()
	d, _ := newTestDB(t)
	putScope(t, d, "a", scopeOpts{})
	putScope(t, d, "b", scopeOpts{})
	// Five operations, one per minute, alternating scopes; op-3 is canceled.
	for i := range 5 {
		scope := "a"
		if i%2 == 1 {
			scope = "b"
		}
		enqueue(t, d, t0.Add(time.Duration(i)*time.Minute), newOp("op-"+string(rune('0'+i)), scope, t0))
	}
	if _, err := d.CancelOperation(ctx, "op-3", scheduler.Action{Actor: "x", At: t0, Reason: "r"}); err != nil {
		t.Fatal(err)
	}

	ids := func(p scheduler.OperationPage) string {
		var s []string
		for _, o := range p.Operations {
			s = append(s, o.ID)
		}
		return strings.Join(s, ",")
	}
	t.Run("PagesNewestFirst", func(t *testing.T) {
		var got []string
		f := scheduler.OperationFilter{Limit: 2}
		for {
			p, err := d.ListOperations(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ids(p))
			if p.Next == "" {
				break
			}
			f.Cursor = p.Next
		}
		if g, w := strings.Join(got, "|"), "op-4,op-3|op-2,op-1|op-0"; g != w {
			t.Fatalf("pages %s, want %s", g, w)
		}
	})
	t.Run("Filters", func(t *testing.T) {
		for _, tc := range []struct {
			f    scheduler.OperationFilter
			want string
		}{
			{scheduler.OperationFilter{Scope: "a"}, "op-4,op-2,op-0"},
			{scheduler.OperationFilter{Scope: "b", State: scheduler.StateScheduled}, "op-1"},
			{scheduler.OperationFilter{State: scheduler.StateCanceled}, "op-3"},
			{scheduler.OperationFilter{Scope: "none"}, ""},
		} {
			p, err := d.ListOperations(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(p); got != tc.want || p.Next != "" {
				t.Fatalf("%+v: got %q next %q, want %q", tc.f, got, p.Next, tc.want)
			}
		}
	})
	t.Run("ErrBadCursor", func(t *testing.T) {
		_, err := d.ListOperations(ctx, scheduler.OperationFilter{Cursor: "garbage!"})
		var v *scheduler.ValidationError
		if !errors.As(err, &v) || v.Fields[0].Field != "cursor" {
			t.Fatalf("bad cursor = %v", err)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		if _, err := d.GetOperation(ctx, "nope"); !errors.Is(err, scheduler.ErrNotFound) {
			t.Fatalf("get unknown = %v", err)
		}
		if _, err := d.ListAttempts(ctx, "nope"); !errors.Is(err, scheduler.ErrNotFound) {
			t.Fatalf("attempts of unknown = %v", err)
		}
	})
}

// The operation Enqueue returns is built from what it wrote, not read
// back: it must equal what a read returns, to the millisecond stored, for
// every shape of request (headers or none, body or none, sub-millisecond
// times and retry bounds, a notBefore or none).
func TestEnqueueReturnsWhatIsStored(t *testing.T) {
	ctx := context.Background()
	d, _ := newTestDB(t)
	putScope(t, d, "a", scopeOpts{})
	now := t0.Add(1234567 * time.Nanosecond)
	full := newOp("full", "a", now.Add(1500*time.Microsecond))
	full.Retry.MaxElapsed = time.Hour + 999*time.Microsecond
	bare := newOp("bare", "a", time.Time{})
	bare.Request = scheduler.Request{Method: "GET", Path: "/x", Headers: map[string]string{}, Body: []byte{}}
	bare.Kind = scheduler.KindRead
	res, err := d.Enqueue(ctx, []scheduler.NewOperation{full, bare}, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil || !r.Created {
			t.Fatalf("enqueue: %+v", r)
		}
		read := getOp(t, d, r.Operation.ID)
		if !reflect.DeepEqual(r.Operation, read) {
			t.Fatalf("enqueue returned\n%+v\nread back\n%+v", r.Operation, read)
		}
	}
}

func TestQueryPlans_RequestIdentity(t *testing.T) {
	// The enqueue's look-up of another operation sending the same request
	// identity reads by index, whatever the backlog.
	_, path := newTestDB(t)
	got := queryPlan(t, rawDB(t, path), `SELECT operation_id FROM operations
		WHERE scope_id = ? AND request_identity = ? AND operation_id <> ?
		  AND (updated_at > ? OR state NOT IN ('succeeded', 'failed', 'canceled')) LIMIT 1`, 1, "x", "y", 0)
	if !strings.Contains(got, "operations_identity") {
		t.Fatalf("plan %q, want index operations_identity", got)
	}
}
