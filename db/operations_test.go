package db_test

import (
	"strings"
	"testing"
)

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
