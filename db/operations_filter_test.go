package db_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

func TestListOperationsFilters(t *testing.T) {
	ctx := context.Background()
	d, path := newTestDB(t)
	putScope(t, d, "a", scopeOpts{MaxConcurrent: 10})
	putScope(t, d, "b", scopeOpts{MaxConcurrent: 10})
	// Six operations created a minute apart: a-0 held (unknownOutcome),
	// b-1 failed (permanent), a-2 failed (retryBudgetExhausted), b-3
	// held (authRevoked), a-4 and b-5 scheduled.
	ids := []string{"a-0", "b-1", "a-2", "b-3", "a-4", "b-5"}
	for i, id := range ids {
		enqueue(t, d, t0.Add(time.Duration(i)*time.Minute), newOp(id, id[:1], t0))
	}
	ends := map[string]scheduler.Decision{
		"a-0": {State: scheduler.StateHeld, HoldReason: scheduler.HoldUnknownOutcome},
		"b-1": {State: scheduler.StateFailed, FailureReason: scheduler.FailurePermanent},
		"a-2": {State: scheduler.StateFailed, FailureReason: scheduler.FailureRetryBudgetExhausted},
		"b-3": {State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked},
	}
	claims := claim(t, d, t0.Add(10*time.Minute), 10)
	for i, c := range claims {
		dec, ok := ends[c.Operation.ID]
		if !ok {
			dec = scheduler.Decision{State: scheduler.StateScheduled, NextAttemptAt: t0.Add(time.Hour)}
		}
		// Updated at +20m, +21m, … in claim order.
		complete(t, d, c, t0.Add(time.Duration(20+i)*time.Minute), dec, providers.Outcome{Class: providers.ClassTransient})
	}
	updated := map[string]time.Time{}
	for _, id := range ids {
		updated[id] = getOp(t, d, id).UpdatedAt
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
		{"CreatedAfterInclusive", scheduler.OperationFilter{CreatedAfter: t0.Add(4 * time.Minute)}, "b-5,a-4"},
		{"CreatedBeforeExclusive", scheduler.OperationFilter{CreatedBefore: t0.Add(2 * time.Minute)}, "b-1,a-0"},
		{"CreatedRangeTiles", scheduler.OperationFilter{CreatedAfter: t0.Add(2 * time.Minute), CreatedBefore: t0.Add(4 * time.Minute)}, "b-3,a-2"},
		{"CreatedRangeAndScope", scheduler.OperationFilter{Scope: "b", CreatedAfter: t0.Add(time.Minute), CreatedBefore: t0.Add(5 * time.Minute)}, "b-3,b-1"},
		{"UpdatedAfter", scheduler.OperationFilter{UpdatedAfter: updated["b-3"]}, idsUpdatedFrom(updated, updated["b-3"], time.Time{})},
		{"UpdatedBefore", scheduler.OperationFilter{UpdatedBefore: updated["b-3"]}, idsUpdatedFrom(updated, time.Time{}, updated["b-3"])},
		{"PagesKeepFilters", scheduler.OperationFilter{State: scheduler.StateFailed, Limit: 1}, "a-2,b-1"},
		{"PagedRange", scheduler.OperationFilter{CreatedAfter: t0.Add(time.Minute), Limit: 2}, "b-5,a-4,b-3,a-2,b-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := list(t, tc.f); got != tc.want {
				t.Fatalf("%+v:\n got %s\nwant %s", tc.f, got, tc.want)
			}
		})
	}

	t.Run("ReasonUsesItsIndex", func(t *testing.T) {
		got := queryPlan(t, rawDB(t, path), `SELECT o.id FROM operations o JOIN scopes s ON s.id = o.scope_id
			WHERE coalesce(o.hold_reason, o.failure_reason) = 'permanent' AND (o.created_at, o.id) < (5, 6)
			ORDER BY o.created_at DESC, o.id DESC LIMIT 10`)
		if !strings.Contains(got, "operations_reason_created") || strings.Contains(got, "TEMP B-TREE") {
			t.Fatalf("plan %q, want index operations_reason_created and no sort", got)
		}
	})
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
