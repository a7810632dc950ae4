package db_test

import (
	"strings"
	"testing"
)

// The reason filter reads operations_reason_created, in order (the
// filters' results are in storetest's ListOperationsFilters).
func TestQueryPlans_Reason(t *testing.T) {
	_, path := newTestDB(t)
	got := queryPlan(t, rawDB(t, path), `SELECT o.id FROM operations o JOIN scopes s ON s.id = o.scope_id
		WHERE coalesce(o.hold_reason, o.failure_reason) = 'permanent' AND (o.created_at, o.id) < (5, 6)
		ORDER BY o.created_at DESC, o.id DESC LIMIT 10`)
	if !strings.Contains(got, "operations_reason_created") || strings.Contains(got, "TEMP B-TREE") {
		t.Fatalf("plan %q, want index operations_reason_created and no sort", got)
	}
}
