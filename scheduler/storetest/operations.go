package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

func testEnqueue(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	PutScope(t, d, "a", ScopeOpts{})
	in := NewOp("op-1", "a", T0.Add(time.Minute))

	res, err := d.Enqueue(ctx, []scheduler.NewOperation{in}, T0)
	if err != nil || res[0].Err != nil || !res[0].Created {
		t.Fatalf("enqueue = %v, %+v", err, res)
	}
	op := res[0].Operation
	want := scheduler.Operation{
		ID: "op-1", Scope: "a", Provider: "generic", Kind: scheduler.KindMutation, Request: in.Request,
		RequestIdentity: "op-1", State: scheduler.StateScheduled, NextAttemptAt: T0.Add(time.Minute),
		CreatedAt: T0, UpdatedAt: T0, Deadline: T0.Add(time.Minute + time.Hour), Retry: in.Retry, ContentHash: in.ContentHash,
	}
	if !reflect.DeepEqual(op, want) {
		t.Fatalf("operation\n got %+v\nwant %+v", op, want)
	}

	t.Run("SameContentIsExisting", func(t *testing.T) {
		res, err := d.Enqueue(ctx, []scheduler.NewOperation{in}, T0.Add(time.Hour))
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
		res, err := d.Enqueue(ctx, []scheduler.NewOperation{other}, T0)
		if err != nil || !errors.Is(res[0].Err, scheduler.ErrConflict) {
			t.Fatalf("conflict = %v, %+v", err, res)
		}
	})

	t.Run("BatchRejectsOnlyBadItems", func(t *testing.T) {
		res, err := d.Enqueue(ctx, []scheduler.NewOperation{
			NewOp("op-2", "a", T0), NewOp("op-3", "missing", T0), NewOp("op-2", "a", T0),
		}, T0)
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
		n := 0
		for _, c := range AllChanges(t, d) {
			if c.OperationID == "op-1" {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("changes rows for op-1 = %d, want 1", n)
		}
	})
}

func testListOperations(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	PutScope(t, d, "a", ScopeOpts{})
	PutScope(t, d, "b", ScopeOpts{})
	// Five operations, one per minute, alternating scopes; op-3 is canceled.
	for i := range 5 {
		scope := "a"
		if i%2 == 1 {
			scope = "b"
		}
		Enqueue(t, d, T0.Add(time.Duration(i)*time.Minute), NewOp("op-"+string(rune('0'+i)), scope, T0))
	}
	if _, err := d.CancelOperation(ctx, "op-3", scheduler.Action{Actor: "x", At: T0, Reason: "r"}); err != nil {
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
func testEnqueueReturnsWhatIsStored(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	PutScope(t, d, "a", ScopeOpts{})
	now := T0.Add(1234567 * time.Nanosecond)
	full := NewOp("full", "a", now.Add(1500*time.Microsecond))
	full.Retry.MaxElapsed = time.Hour + 999*time.Microsecond
	bare := NewOp("bare", "a", time.Time{})
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
		read := GetOp(t, d, r.Operation.ID)
		if !reflect.DeepEqual(r.Operation, read) {
			t.Fatalf("enqueue returned\n%+v\nread back\n%+v", r.Operation, read)
		}
	}
}

func testListOperationsFilters(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	PutScope(t, d, "a", ScopeOpts{MaxConcurrent: 10})
	PutScope(t, d, "b", ScopeOpts{MaxConcurrent: 10})
	// Six operations created a minute apart: a-0 held (unknownOutcome),
	// b-1 failed (permanent), a-2 failed (retryBudgetExhausted), b-3
	// held (authRevoked), a-4 and b-5 scheduled.
	ids := []string{"a-0", "b-1", "a-2", "b-3", "a-4", "b-5"}
	for i, id := range ids {
		Enqueue(t, d, T0.Add(time.Duration(i)*time.Minute), NewOp(id, id[:1], T0))
	}
	ends := map[string]scheduler.Decision{
		"a-0": {State: scheduler.StateHeld, HoldReason: scheduler.HoldUnknownOutcome},
		"b-1": {State: scheduler.StateFailed, FailureReason: scheduler.FailurePermanent},
		"a-2": {State: scheduler.StateFailed, FailureReason: scheduler.FailureRetryBudgetExhausted},
		"b-3": {State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked},
	}
	claims := Claim(t, d, T0.Add(10*time.Minute), 10)
	for i, c := range claims {
		dec, ok := ends[c.Operation.ID]
		if !ok {
			dec = scheduler.Decision{State: scheduler.StateScheduled, NextAttemptAt: T0.Add(time.Hour)}
		}
		// Updated at +20m, +21m, … in claim order.
		Complete(t, d, c, T0.Add(time.Duration(20+i)*time.Minute), dec, providers.Outcome{Class: providers.ClassTransient})
	}
	updated := map[string]time.Time{}
	for _, id := range ids {
		updated[id] = GetOp(t, d, id).UpdatedAt
	}

	list := func(t *testing.T, f scheduler.OperationFilter) string {
		t.Helper()
		var got []string
		for range 10 {
			p, err := d.ListOperations(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range p.Operations {
				got = append(got, o.ID)
			}
			if p.Next == "" {
				return strings.Join(got, ",")
			}
			f.Cursor = p.Next
		}
		t.Fatal("more than 10 pages")
		return ""
	}
	for _, tc := range []struct {
		name string
		f    scheduler.OperationFilter
		want string
	}{
		{"HoldReason", scheduler.OperationFilter{Reason: "unknownOutcome"}, "a-0"},
		{"FailureReason", scheduler.OperationFilter{Reason: "permanent"}, "b-1"},
		{"ReasonAndState", scheduler.OperationFilter{Reason: "authRevoked", State: scheduler.StateHeld}, "b-3"},
		{"ReasonOtherState", scheduler.OperationFilter{Reason: "authRevoked", State: scheduler.StateFailed}, ""},
		{"ReasonAndScope", scheduler.OperationFilter{Reason: "retryBudgetExhausted", Scope: "a"}, "a-2"},
		{"UnknownReason", scheduler.OperationFilter{Reason: "nope"}, ""},
		{"CreatedAfterInclusive", scheduler.OperationFilter{CreatedAfter: T0.Add(4 * time.Minute)}, "b-5,a-4"},
		{"CreatedBeforeExclusive", scheduler.OperationFilter{CreatedBefore: T0.Add(2 * time.Minute)}, "b-1,a-0"},
		{"CreatedRangeTiles", scheduler.OperationFilter{CreatedAfter: T0.Add(2 * time.Minute), CreatedBefore: T0.Add(4 * time.Minute)}, "b-3,a-2"},
		{"CreatedRangeAndScope", scheduler.OperationFilter{Scope: "b", CreatedAfter: T0.Add(time.Minute), CreatedBefore: T0.Add(5 * time.Minute)}, "b-3,b-1"},
		{"UpdatedAfter", scheduler.OperationFilter{UpdatedAfter: updated["b-3"]}, idsUpdatedFrom(updated, updated["b-3"], time.Time{})},
		{"UpdatedBefore", scheduler.OperationFilter{UpdatedBefore: updated["b-3"]}, idsUpdatedFrom(updated, time.Time{}, updated["b-3"])},
		{"PagesKeepFilters", scheduler.OperationFilter{State: scheduler.StateFailed, Limit: 1}, "a-2,b-1"},
		{"PagedRange", scheduler.OperationFilter{CreatedAfter: T0.Add(time.Minute), Limit: 2}, "b-5,a-4,b-3,a-2,b-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := list(t, tc.f); got != tc.want {
				t.Fatalf("%+v:\n got %s\nwant %s", tc.f, got, tc.want)
			}
		})
	}

}

// idsUpdatedFrom lists, newest created first, the operations updated in
// [from, to) (zero bounds are open).
func idsUpdatedFrom(updated map[string]time.Time, from, to time.Time) string {
	var out []string
	for _, id := range []string{"b-5", "a-4", "b-3", "a-2", "b-1", "a-0"} {
		u := updated[id]
		if (!from.IsZero() && u.Before(from)) || (!to.IsZero() && !u.Before(to)) {
			continue
		}
		out = append(out, id)
	}
	return strings.Join(out, ",")
}

// attention is the support page's default filter: held or failed.
func attention() []scheduler.State {
	return []scheduler.State{scheduler.StateHeld, scheduler.StateFailed}
}

// decisions by operation ID prefix.
func decideByPrefix(id string) scheduler.Decision {
	switch {
	case strings.HasPrefix(id, "unknown"):
		return scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldUnknownOutcome, Reason: "timeout after write"}
	case strings.HasPrefix(id, "auth"):
		return scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked, Reason: "401"}
	case strings.HasPrefix(id, "bad"):
		return scheduler.Decision{State: scheduler.StateFailed, FailureReason: scheduler.FailurePermanent, Reason: "422"}
	}
	return scheduler.Decision{State: scheduler.StateSucceeded, Reason: "ok"}
}

func testListOperationsAttention(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	PutScope(t, d, "a", ScopeOpts{MaxConcurrent: 100})
	PutScope(t, d, "b", ScopeOpts{MaxConcurrent: 100})
	// Created one second apart so "newest first" is well defined.
	var want []string // attention rows, newest first
	for i := range 30 {
		var prefix string
		switch i % 5 {
		case 0:
			prefix = "unknown"
		case 1:
			prefix = "auth"
		case 2:
			prefix = "bad"
		default:
			prefix = "ok"
		}
		scope := "a"
		if i%2 == 1 {
			scope = "b"
		}
		id := fmt.Sprintf("%s-%02d", prefix, i)
		Enqueue(t, d, T0.Add(time.Duration(i)*time.Second), NewOp(id, scope, T0))
		if prefix != "ok" {
			want = append([]string{id}, want...)
		}
	}
	Enqueue(t, d, T0.Add(time.Minute), NewOp("waiting", "a", T0.Add(time.Hour)))
	settle(t, d, T0.Add(time.Minute), decideByPrefix)

	t.Run("NewestFirstAcrossPages", func(t *testing.T) {
		var got []string
		f := scheduler.OperationFilter{States: attention(), Limit: 7}
		for pages := 0; ; pages++ {
			if pages == 10 {
				t.Fatal("paging does not end")
			}
			page, err := d.ListOperations(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range page.Operations {
				got = append(got, op.ID)
			}
			if page.Next == "" {
				break
			}
			f.Cursor = page.Next
		}
		if g, w := strings.Join(got, ","), strings.Join(want, ","); g != w {
			t.Fatalf("attention list\n got %s\nwant %s", g, w)
		}
		n, err := d.CountOperations(ctx, scheduler.OperationFilter{States: attention(), Cursor: "ignored", Limit: 1})
		if err != nil || n != len(want) {
			t.Fatalf("count = %d, %v; want %d", n, err, len(want))
		}
	})

	t.Run("ByScopeAndReason", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			f    scheduler.OperationFilter
			want int
		}{
			{"ScopeA", scheduler.OperationFilter{States: attention(), Scope: "a"}, 9},
			{"ScopeB", scheduler.OperationFilter{States: attention(), Scope: "b"}, 9},
			{"Unknown", scheduler.OperationFilter{States: attention(), Reason: "unknownOutcome"}, 6},
			{"UnknownInA", scheduler.OperationFilter{States: attention(), Reason: "unknownOutcome", Scope: "a"}, 3},
			{"FailedInB", scheduler.OperationFilter{State: scheduler.StateFailed, Scope: "b"}, 3},
			{"Waiting", scheduler.OperationFilter{States: []scheduler.State{scheduler.StateScheduled, scheduler.StateWaitingForBudget}}, 1},
			{"NoSuchScope", scheduler.OperationFilter{States: attention(), Scope: "nope"}, 0},
		} {
			t.Run(tc.name, func(t *testing.T) {
				n, err := d.CountOperations(ctx, tc.f)
				if err != nil || n != tc.want {
					t.Fatalf("count = %d, %v; want %d", n, err, tc.want)
				}
				tc.f.Limit = 100
				page, err := d.ListOperations(ctx, tc.f)
				if err != nil || len(page.Operations) != tc.want {
					t.Fatalf("list = %d, %v; want %d", len(page.Operations), err, tc.want)
				}
				for _, op := range page.Operations {
					if (tc.f.Scope != "" && op.Scope != tc.f.Scope) || (tc.f.Reason != "" && string(op.HoldReason) != tc.f.Reason) {
						t.Fatalf("%s does not match the filter", op.ID)
					}
				}
			})
		}
	})

	t.Run("ErrInvalidState", func(t *testing.T) {
		_, err := d.ListOperations(ctx, scheduler.OperationFilter{States: []scheduler.State{"held'; DROP TABLE operations; --"}})
		var ve *scheduler.ValidationError
		if !errors.As(err, &ve) || ve.Fields[0].Field != "state" {
			t.Fatalf("err = %v, want a validation error on state", err)
		}
		if _, err := d.CountOperations(ctx, scheduler.OperationFilter{States: []scheduler.State{"nope"}}); !errors.As(err, &ve) {
			t.Fatalf("count err = %v, want a validation error", err)
		}
	})
}

// FindOperations lists the operations whose ID starts with the prefix, in
// ID order, bounded, and nothing else (design §14: find by ID).
func testFindOperations(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	PutScope(t, d, "a", ScopeOpts{})
	Enqueue(t, d, T0, NewOp("sync-2", "a", T0), NewOp("sync-10", "a", T0), NewOp("sync-1", "a", T0), NewOp("synd-1", "a", T0), NewOp("sync", "a", T0))
	ids := func(ops []scheduler.Operation) []string {
		var out []string
		for _, op := range ops {
			out = append(out, op.ID)
		}
		return out
	}
	for _, tc := range []struct {
		prefix string
		limit  int
		want   []string
	}{
		{"sync-", 10, []string{"sync-1", "sync-10", "sync-2"}},
		{"sync", 10, []string{"sync", "sync-1", "sync-10", "sync-2"}},
		{"sync-", 2, []string{"sync-1", "sync-10"}},
		{"syn", 10, []string{"sync", "sync-1", "sync-10", "sync-2", "synd-1"}},
		{"x", 10, nil},
	} {
		got, err := d.FindOperations(ctx, tc.prefix, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(got), tc.want) {
			t.Errorf("FindOperations(%q, %d) = %v, want %v", tc.prefix, tc.limit, ids(got), tc.want)
		}
		for _, op := range got {
			if op.Scope != "a" || op.State != scheduler.StateScheduled {
				t.Errorf("found %s as %+v, want it whole", op.ID, op)
			}
		}
	}
}

// testEnqueueIdentityInUse: when the scope's provider is sent the request
// identity as an idempotency key, another operation of the scope with the
// same identity that is unfinished, or was last updated less than the
// key's retention (24h for a generic scope's header) before now, holds
// it: the newcomer is rejected with ErrIdentityInUse naming the holder,
// and writes nothing while the rest of its batch commits. A scope sent no
// key, or another scope, is not concerned. The scope's configuration at
// the enqueue decides (a header given or removed since counts).
// testEnqueueManyInOneCall: one call of more operations than a store may
// write in one statement, where later items meet earlier ones: each is
// judged as if enqueued alone, in order.
func testEnqueueManyInOneCall(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	if _, _, err := d.PutScope(ctx, scheduler.ScopeConfig{Name: "pay", Provider: "generic", BaseURL: "https://pay.example",
		MaxConcurrent: 4, IdempotencyHeader: "X-Request-Key"}, scheduler.Action{Actor: "test", At: T0, Reason: "setup"}); err != nil {
		t.Fatal(err)
	}
	PutScope(t, d, "a", ScopeOpts{})
	before := Enqueue(t, d, T0, NewOp("old-same", "a", T0), NewOp("old-other", "a", T0))[0]

	type item struct {
		op   scheduler.NewOperation
		want string // "created", "existing" (same as the item or operation named by same), or the error
		same string
	}
	var items []item
	add := func(op scheduler.NewOperation, want, same string) { items = append(items, item{op, want, same}) }
	for i := range 70 {
		op := NewOp(fmt.Sprintf("new-%02d", i), "a", T0.Add(time.Duration(i)*time.Millisecond))
		if i%2 == 1 {
			op.Scope, op.RequestIdentity = "pay", fmt.Sprintf("key-%02d", i)
		}
		add(op, "created", "")
		switch i {
		case 3: // the same operation again in the same call
			add(op, "existing", op.ID)
		case 9: // the same ID, other content
			other := op
			other.ContentHash = "other"
			add(other, scheduler.ErrConflict.Error(), "")
		case 11: // the same request identity, another ID, in a scope that keeps keys
			taken := NewOp("takes-key-11", "pay", T0)
			taken.RequestIdentity = op.RequestIdentity
			add(taken, scheduler.ErrIdentityInUse.Error(), "")
		case 20:
			add(NewOp("old-same", "a", T0), "existing", "old-same")
			other := NewOp("old-other", "a", T0)
			other.ContentHash = "changed"
			add(other, scheduler.ErrConflict.Error(), "")
			add(NewOp("nowhere-1", "missing", T0), scheduler.ErrUnknownScope.Error(), "")
		}
	}
	ops := make([]scheduler.NewOperation, len(items))
	for i, it := range items {
		ops[i] = it.op
	}
	res, err := d.Enqueue(ctx, ops, T0.Add(time.Second))
	if err != nil || len(res) != len(items) {
		t.Fatalf("enqueue: %d results, %v", len(res), err)
	}
	var created []string
	for i, it := range items {
		r := res[i]
		switch it.want {
		case "created":
			if r.Err != nil || !r.Created {
				t.Errorf("item %d (%s): %+v, want created", i, it.op.ID, r)
				continue
			}
			created = append(created, it.op.ID)
			if got := GetOp(t, d, it.op.ID); !reflect.DeepEqual(got, r.Operation) {
				t.Errorf("item %d: stored\n %+v\nreported\n %+v", i, got, r.Operation)
			}
		case "existing":
			if r.Err != nil || r.Created || !reflect.DeepEqual(r.Operation, GetOp(t, d, it.same)) {
				t.Errorf("item %d (%s): %+v, want the existing %s", i, it.op.ID, r, it.same)
			}
		default:
			if r.Err == nil || !strings.Contains(r.Err.Error(), it.want) {
				t.Errorf("item %d (%s): %+v, want %q", i, it.op.ID, r, it.want)
			}
		}
	}
	if got := GetOp(t, d, "old-same"); !reflect.DeepEqual(got, before) {
		t.Errorf("old-same changed: %+v", got)
	}
	if _, err := d.GetOperation(ctx, "takes-key-11"); !errors.Is(err, scheduler.ErrNotFound) {
		t.Errorf("the operation refused the key was stored: %v", err)
	}
	// The feed has each new operation once, in the call's order.
	var fed []string
	for _, c := range AllChanges(t, d) {
		if strings.HasPrefix(c.OperationID, "new-") {
			fed = append(fed, c.OperationID)
		}
	}
	if !reflect.DeepEqual(fed, created) {
		t.Errorf("feed %v\nwant %v", fed, created)
	}
}

func testEnqueueIdentityInUse(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	for _, name := range []string{"pay", "pay-2"} {
		if _, _, err := d.PutScope(ctx, scheduler.ScopeConfig{Name: name, Provider: "generic", BaseURL: "https://pay.example",
			MaxConcurrent: 4, IdempotencyHeader: "X-Request-Key"}, scheduler.Action{Actor: "test", At: T0, Reason: "setup"}); err != nil {
			t.Fatal(err)
		}
	}
	PutScope(t, d, "plain", ScopeOpts{})
	withIdentity := func(id, scope, identity string) scheduler.NewOperation {
		op := NewOp(id, scope, T0)
		op.RequestIdentity = identity
		return op
	}
	// inUse enqueues op at now and wants it rejected for holder.
	inUse := func(op scheduler.NewOperation, now time.Time, holder string) {
		t.Helper()
		res, err := d.Enqueue(ctx, []scheduler.NewOperation{op}, now)
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(res[0].Err, scheduler.ErrIdentityInUse) || !strings.Contains(res[0].Err.Error(), holder) {
			t.Fatalf("enqueue %s at %s: %v, want ErrIdentityInUse naming %s", op.ID, now, res[0].Err, holder)
		}
		if _, err := d.GetOperation(ctx, op.ID); !errors.Is(err, scheduler.ErrNotFound) {
			t.Fatalf("rejected %s stored: %v", op.ID, err)
		}
	}

	Enqueue(t, d, T0, withIdentity("op-1", "pay", "k1"))
	inUse(withIdentity("op-2", "pay", "k1"), T0, "op-1")
	// In a batch only the item at fault is rejected.
	res, err := d.Enqueue(ctx, []scheduler.NewOperation{withIdentity("op-3", "pay", "k2"), withIdentity("op-4", "pay", "k1")}, T0)
	if err != nil || res[0].Err != nil || !res[0].Created || !errors.Is(res[1].Err, scheduler.ErrIdentityInUse) {
		t.Fatalf("batch = %+v, %v; want op-3 created, op-4 rejected", res, err)
	}
	// Another scope, or a scope sent no key, is free to use it.
	Enqueue(t, d, T0, withIdentity("other-scope", "pay-2", "k1"), withIdentity("plain-1", "plain", "k1"), withIdentity("plain-2", "plain", "k1"))

	// op-1 succeeds at T0+1m: it holds the key for the retention after.
	var c1 scheduler.Claim
	for _, c := range Claim(t, d, T0.Add(time.Minute), 10) {
		if c.Operation.ID == "op-1" {
			c1 = c
		}
	}
	if c1.Operation.ID == "" {
		t.Fatal("op-1 not claimed")
	}
	done := T0.Add(time.Minute)
	Complete(t, d, c1, done, scheduler.Decision{State: scheduler.StateSucceeded}, providers.Outcome{Class: providers.ClassSuccess, Status: 200})
	inUse(withIdentity("op-5", "pay", "k1"), done.Add(24*time.Hour-time.Millisecond), "op-1")
	Enqueue(t, d, done.Add(24*time.Hour), withIdentity("op-5", "pay", "k1"))
	// An unfinished holder keeps it however long it waits.
	if op := GetOp(t, d, "op-3"); op.State.Terminal() {
		t.Fatalf("op-3 is %s, want it unfinished", op.State)
	}
	inUse(withIdentity("op-6", "pay", "k2"), T0.Add(30*24*time.Hour), "op-3")

	// The scope as it is now decides: one given a key header since holds
	// its identities, one whose header is gone no longer does.
	if _, _, err := d.PutScope(ctx, scheduler.ScopeConfig{Name: "plain", Provider: "generic", BaseURL: "https://pay.example",
		MaxConcurrent: 4, IdempotencyHeader: "X-Request-Key"}, scheduler.Action{Actor: "test", At: T0, Reason: "key header"}); err != nil {
		t.Fatal(err)
	}
	inUse(withIdentity("plain-3", "plain", "k1"), T0, "plain-")
	PutScope(t, d, "pay-2", ScopeOpts{})
	Enqueue(t, d, T0, withIdentity("other-scope-2", "pay-2", "k1"))
}

func testCountByState(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	PutScope(t, d, "open", ScopeOpts{})
	PutScope(t, d, "paused", ScopeOpts{})
	PutScope(t, d, "held", ScopeOpts{})
	Enqueue(t, d, T0, NewOp("p1", "paused", T0), NewOp("h1", "held", T0), NewOp("o1", "open", T0), NewOp("o2", "open", T0.Add(time.Hour)))
	for _, c := range Claim(t, d, T0, 10) {
		switch c.Scope.Name {
		case "paused":
			Complete(t, d, c, T0, scheduler.Decision{State: scheduler.StateWaitingForBudget, NextAttemptAt: T0.Add(time.Minute),
				Scope: scheduler.ScopeEffect{PauseUntil: T0.Add(time.Minute), PauseReason: "429"}}, providers.Outcome{Class: providers.ClassRateLimited, Status: 429})
		case "held":
			Complete(t, d, c, T0, scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked,
				Scope: scheduler.ScopeEffect{Hold: scheduler.HoldAuthRevoked}}, providers.Outcome{Class: providers.ClassAuthRevoked, Status: 401})
		}
	}
	c, err := d.CountByState(ctx, T0)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(c.Operations, c.Scopes)
	want := fmt.Sprint(map[scheduler.State]int{"waitingForBudget": 1, "held": 1, "running": 1, "scheduled": 1},
		map[scheduler.ScopeStatus]int{"open": 1, "paused": 1, "held": 1})
	if got != want {
		t.Errorf("counts at T0 = %s, want %s", got, want)
	}
	c, err = d.CountByState(ctx, T0.Add(time.Minute)) // the pause is over
	if err != nil {
		t.Fatal(err)
	}
	if c.Scopes[scheduler.ScopePaused] != 0 || c.Scopes[scheduler.ScopeOpen] != 2 {
		t.Errorf("scopes after the pause = %v, want 2 open, 1 held", c.Scopes)
	}
}

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
