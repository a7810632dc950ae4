package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// Design §14 "Act on many": every operation matching a filter is released
// or canceled, across more than one bounded transaction, each audited as
// the single action; what does not match is untouched, what matches but
// cannot take the action is skipped, and a call without a filter is
// refused.
func TestBulkActsOnWhatMatches(t *testing.T) {
	ctx := context.Background()
	h := setup(t, scheduler.EngineConfig{})
	h.scope("a", "https://a.example", "", 500)
	h.scope("b", "https://b.example", "", 10)
	n := scheduler.BulkBatch + scheduler.BulkBatch/2
	for i := range n {
		h.enqueue(scheduler.OperationInput{ID: fmt.Sprintf("a-%03d", i), Scope: "a", Method: "POST", Path: "/x"})
	}
	for i := range 3 {
		h.enqueue(scheduler.OperationInput{ID: fmt.Sprintf("b-%d", i), Scope: "b", Method: "POST", Path: "/x"})
	}
	later := t0.Add(24 * time.Hour)
	h.enqueue(scheduler.OperationInput{ID: "a-waiting", Scope: "a", Method: "POST", Path: "/x", NotBefore: &later})
	fail := scheduler.Decision{State: scheduler.StateFailed, FailureReason: scheduler.FailurePermanent, Reason: "422"}
	for _, c := range storetest.Claim(t, h.store, t0, 1000) {
		storetest.Complete(t, h.store, c, t0, fail, providers.Outcome{Class: providers.ClassPermanent, Status: 422})
	}

	for _, in := range []scheduler.BulkInput{
		{Action: scheduler.ActRelease, Reason: "x"},
		{Action: scheduler.ActResolve, Filter: scheduler.OperationFilter{Scope: "a"}, Reason: "x"},
		{Action: scheduler.ActCancel, Filter: scheduler.OperationFilter{Scope: "a"}},
	} {
		var ve *scheduler.ValidationError
		if _, err := h.svc.Bulk(ctx, in, "carol"); !errors.As(err, &ve) {
			t.Fatalf("bulk %+v: %v, want a ValidationError", in, err)
		}
	}

	res, err := h.svc.Bulk(ctx, scheduler.BulkInput{Action: scheduler.ActRelease, Filter: scheduler.OperationFilter{State: scheduler.StateFailed, Scope: "a"}, Reason: "provider fixed the validation"}, "carol")
	if err != nil {
		t.Fatal(err)
	}
	if res.Changed != n || res.Skipped != 0 || res.More {
		t.Fatalf("bulk release: %+v, want %d changed", res, n)
	}
	for _, id := range []string{"a-000", fmt.Sprintf("a-%03d", n-1)} {
		h.wantState(id, scheduler.StateScheduled)
		entries, err := h.svc.ListAudit(ctx, id)
		if err != nil || len(entries) != 1 || entries[0].Action != "release" || entries[0].Actor != "carol" || entries[0].Reason != "provider fixed the validation" {
			t.Fatalf("audit of %s: %+v, %v", id, entries, err)
		}
	}
	h.wantState("b-0", scheduler.StateFailed)
	h.wantState("a-waiting", scheduler.StateScheduled)

	// Cancel everything of a: the released ones and the waiting one; none
	// is running, so none is skipped.
	res, err = h.svc.Bulk(ctx, scheduler.BulkInput{Action: scheduler.ActCancel, Filter: scheduler.OperationFilter{Scope: "a"}, Reason: "customer left"}, "carol")
	if err != nil {
		t.Fatal(err)
	}
	if res.Changed != n+1 {
		t.Fatalf("bulk cancel: %+v, want %d changed", res, n+1)
	}
	// Again: all canceled already, each skipped, nothing changed.
	res, err = h.svc.Bulk(ctx, scheduler.BulkInput{Action: scheduler.ActCancel, Filter: scheduler.OperationFilter{Scope: "a"}, Reason: "again"}, "carol")
	if err != nil || res.Changed != 0 || res.Skipped != n+1 {
		t.Fatalf("bulk cancel again: %+v, %v", res, err)
	}
	if entries, _ := h.svc.ListAudit(ctx, "a-waiting"); len(entries) != 1 || !strings.Contains(entries[0].Detail, "canceled") {
		t.Fatalf("audit of a-waiting: %+v", entries)
	}
	h.wantState("b-1", scheduler.StateFailed)
}

// Messages name the problem there is (issue 14): a reason too long is not
// "required", an operation ID that does not fit the rule is not missing.
func TestMessagesNameTheRightProblem(t *testing.T) {
	ctx := context.Background()
	h := setup(t, scheduler.EngineConfig{})
	h.scope("acct", "https://provider.example", "", 1)
	field := func(err error, name string) string {
		t.Helper()
		var ve *scheduler.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("%v: not a ValidationError", err)
		}
		for _, f := range ve.Fields {
			if f.Field == name {
				return f.Message
			}
		}
		t.Fatalf("%v names no %s", err, name)
		return ""
	}
	_, err := h.svc.Cancel(ctx, "x", strings.Repeat("r", 5000), "carol")
	if msg := field(err, "reason"); !strings.Contains(msg, "at most 1000") || strings.Contains(msg, "required") {
		t.Errorf("a 5,000-character reason: %q", msg)
	}
	_, err = h.svc.Enqueue(ctx, []scheduler.OperationInput{{ID: "bad id!", Scope: "bad scope!", Method: "GET", Path: "/x"}}, func(int) string { return "" })
	if msg := field(err, "operationId"); strings.Contains(msg, "required") || !strings.HasPrefix(msg, "must be") {
		t.Errorf("an invalid operationId: %q", msg)
	}
	if msg := field(err, "providerScope"); strings.Contains(msg, "required") {
		t.Errorf("an invalid providerScope: %q", msg)
	}
	_, err = h.svc.Enqueue(ctx, []scheduler.OperationInput{{Scope: "acct", Method: "GET", Path: "/x"}}, func(int) string { return "" })
	if msg := field(err, "operationId"); !strings.Contains(msg, "required") {
		t.Errorf("a missing operationId: %q", msg)
	}
}
