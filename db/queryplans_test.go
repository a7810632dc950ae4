package db_test

import (
	"database/sql"
	"strings"
	"testing"

	"pacer/db"
)

// queryPlan returns SQLite's plan for query, its steps joined by "; ".
func queryPlan(t testing.TB, raw *sql.DB, query string, args ...any) string {
	t.Helper()
	rows, err := raw.Query(`EXPLAIN QUERY PLAN `+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	return strings.Join(plan, "; ")
}

// Every query of the claim, the enqueue, the lists and expiry reaches its
// rows through the index named and sorts nothing, whatever the backlog.
func TestQueryPlans(t *testing.T) {
	_, path := newTestDB(t)
	raw := rawDB(t, path)
	attention := `SELECT o.id FROM operations o JOIN scopes s ON s.id = o.scope_id WHERE coalesce(o.hold_reason, o.failure_reason) IS NOT NULL`
	newest := ` ORDER BY o.created_at DESC, o.id DESC LIMIT 51`
	for _, tc := range []struct {
		name, query, index string
		args               []any
	}{
		// The claim reaches due rows and running counts through the
		// partial indexes, so a paused scope's backlog is never scanned.
		{"Due", `SELECT id FROM operations WHERE scope_id = 1 AND resource = '' AND state IN ('scheduled', 'waitingForBudget') AND next_attempt_at <= 5 ORDER BY next_attempt_at, id LIMIT 3`, "operations_due", nil},
		{"EarliestDue", `SELECT next_attempt_at FROM operations WHERE scope_id = 1 AND resource = 'search' AND state IN ('scheduled', 'waitingForBudget') ORDER BY next_attempt_at LIMIT 1`, "operations_due", nil},
		{"Running", `SELECT COUNT(*) FROM operations WHERE scope_id = 1 AND state = 'running'`, "operations_running", nil},
		{"LeaseExpiry", `SELECT MIN(lease_expires_at) FROM operations INDEXED BY operations_running WHERE state = 'running'`, "operations_running", nil},
		{"ListByScope", `SELECT o.id FROM operations o JOIN scopes s ON s.id = o.scope_id WHERE o.scope_id = 3 AND (o.created_at, o.id) < (5, 6) ORDER BY o.created_at DESC, o.id DESC LIMIT 10`, "operations_scope_created", nil},
		{"ListByState", `SELECT id FROM operations WHERE state = 'held' ORDER BY created_at DESC, id DESC LIMIT 50`, "operations_state_created", nil},
		// A claim reads each scope's version and admission state by its
		// row ID.
		{"ClaimScopeState", db.ClaimScopeState, "SEARCH s USING INTEGER PRIMARY KEY (rowid=?)", []any{1}},
		// The claim leases its batch by row ID, never by scanning the
		// scheduled rows of the state index.
		{"ClaimByRowID", db.ClaimUpdate, "INTEGER PRIMARY KEY", []any{1, 2, "[1,2]"}},
		// Finding by ID prefix reads a range of the unique ID index (design
		// §14: no scan).
		{"FindByIDPrefix", db.FindOperationsQuery, "sqlite_autoindex_operations_1 (operation_id>? AND operation_id<?)", []any{"sync-", "sync-\U0010FFFF", 20}},
		// The reason filter reads operations_reason_created, in order (the
		// filters' results are in storetest's ListOperationsFilters).
		{"Reason", `SELECT o.id FROM operations o JOIN scopes s ON s.id = o.scope_id
			WHERE coalesce(o.hold_reason, o.failure_reason) = 'permanent' AND (o.created_at, o.id) < (5, 6)
			ORDER BY o.created_at DESC, o.id DESC LIMIT 10`, "operations_reason_created", nil},
		// The enqueue's look-up of another operation sending the same
		// request identity.
		{"RequestIdentity", db.IdentityHolderQuery, "operation_requests_identity", []any{"x", 1, "y", 0}},
		// The support page's lists read only the rows they show, in order.
		{"Attention", attention + newest, "operations_attention", nil},
		{"AttentionPage", attention + ` AND (o.created_at, o.id) < (5, 6)` + newest, "operations_attention", nil},
		{"AttentionScope", attention + ` AND o.scope_id = 3` + newest, "operations_attention_scope", nil},
		{"AttentionReason", attention + ` AND coalesce(o.hold_reason, o.failure_reason) = 'permanent'` + newest, "operations_reason_created", nil},
		{"CountAttentionScope", `SELECT COUNT(*) FROM operations o WHERE coalesce(o.hold_reason, o.failure_reason) IS NOT NULL AND o.scope_id = 3`, "operations_attention_scope", nil},
		// Expiry finds the overdue and the earliest deadline by index.
		{"Overdue", db.OverdueOperations, "operations_waiting_deadline", []any{5, 10}},
		{"EarliestDeadline", db.EarliestWaitingDeadline, "operations_waiting_deadline", []any{5, 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := queryPlan(t, raw, tc.query, tc.args...)
			if !strings.Contains(got, tc.index) || strings.Contains(got, "TEMP B-TREE") {
				t.Fatalf("plan %q, want index %s and no sort", got, tc.index)
			}
		})
	}
	// A chunk of completions reaches each operation and attempt row by
	// its key, for the VALUES list's rows: no statement walks a table.
	for name, query := range db.CompletionStatements(8) {
		args := make([]any, strings.Count(query, "?"))
		got := queryPlan(t, raw, query, args...)
		if strings.Contains(got, "SCAN o") || strings.Contains(got, "SCAN operations") || strings.Contains(got, "SCAN attempts") ||
			!strings.Contains(got, "SEARCH") {
			t.Errorf("%s: plan %q, want each row searched by its key", name, got)
		}
	}
	// An operation's request and answered attempt are joined by their
	// keys, in listings as in claims.
	for name, query := range map[string]string{
		"ListJoins":  db.OperationSelect + `WHERE o.scope_id = 3 AND (o.created_at, o.id) < (5, 6) ORDER BY o.created_at DESC, o.id DESC LIMIT 10`,
		"ClaimJoins": db.ClaimedSelect + `WHERE o.id IN (SELECT value FROM json_each('[1,2]'))`,
	} {
		got := queryPlan(t, raw, query)
		for _, want := range []string{"SEARCH r USING INTEGER PRIMARY KEY (rowid=?)", "SEARCH a USING PRIMARY KEY (operation_id=? AND number=?)"} {
			if !strings.Contains(got, want) || strings.Contains(got, "TEMP B-TREE") {
				t.Errorf("%s: plan %q, want %q and no sort", name, got, want)
			}
		}
	}
	// Recovery reads the running rows through their index and orders
	// them by expiry itself: they are bounded by the workers of the
	// processes, so the sort is too, whatever the backlog.
	expired := `SELECT o.id FROM operations o INDEXED BY operations_running JOIN scopes s ON s.id = o.scope_id WHERE o.state = 'running' AND o.lease_expires_at <= 5 ORDER BY o.lease_expires_at, o.id LIMIT 10`
	if got := queryPlan(t, raw, expired); !strings.Contains(got, "operations_running") {
		t.Fatalf("expired leases: plan %q, want the running index", got)
	}
}

// The feed's reads walk the changes table by its primary key from the
// cursor and sort nothing; a read of one scope finds the scope by its
// unique name once, and has no per-scope index to use.
func TestChangesQueryPlans(t *testing.T) {
	_, path := newTestDB(t)
	raw := rawDB(t, path)
	for _, tc := range []struct {
		name, query string
		args        []any
		want        []string
	}{
		{"All", db.AllChanges, []any{5, 100}, []string{"SEARCH c USING INTEGER PRIMARY KEY (rowid>?)", "SEARCH s USING INTEGER PRIMARY KEY (rowid=?)"}},
		{"Scope", db.ScopeChanges, []any{5, 4096, "a", 100}, []string{"SEARCH changes USING INTEGER PRIMARY KEY (rowid>?)", "SEARCH scopes USING COVERING INDEX sqlite_autoindex_scopes_1 (name=?)"}},
		{"Examined", db.ChangesExamined, []any{5, 4096}, []string{"SEARCH changes USING INTEGER PRIMARY KEY (rowid>?)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := queryPlan(t, raw, tc.query, tc.args...)
			for _, want := range tc.want {
				if !strings.Contains(got, want) {
					t.Errorf("plan %q, want %q", got, want)
				}
			}
			if strings.Contains(got, "TEMP B-TREE") || strings.Contains(got, "SCAN changes") || strings.Contains(got, "SCAN c ") {
				t.Errorf("plan %q sorts or scans the whole feed", got)
			}
		})
	}
}

func TestPruneQueryPlans(t *testing.T) {
	// Every statement of a batch reaches its rows through an index: none
	// walks the finished (or any other) rows of the table.
	_, path := newTestDB(t)
	raw := rawDB(t, path)
	for _, tc := range []struct{ name, query, want string }{
		{"Select", `SELECT id FROM operations INDEXED BY operations_finished WHERE state IN ('succeeded', 'canceled') AND updated_at < 5 ORDER BY updated_at, id LIMIT 500`, "operations_finished"},
		{"Attempts", `DELETE FROM attempts WHERE operation_id IN (SELECT value FROM json_each('[1,2]'))`, "SEARCH attempts USING PRIMARY KEY"},
		{"Audit", `DELETE FROM audit WHERE operation_id IN (SELECT value FROM json_each('[1,2]'))`, "SEARCH audit USING COVERING INDEX audit_operation"},
		{"Requests", `DELETE FROM operation_requests WHERE id IN (SELECT id FROM operations
		WHERE id IN (SELECT value FROM json_each('[1,2]')) AND +state IN ('succeeded', 'canceled'))`, "SEARCH operation_requests USING INTEGER PRIMARY KEY"},
		{"Operations", `DELETE FROM operations WHERE id IN (SELECT value FROM json_each('[1,2]')) AND +state IN ('succeeded', 'canceled')`, "SEARCH operations USING INTEGER PRIMARY KEY"},
		{"Changes", `DELETE FROM changes WHERE seq <= 5`, "SEARCH changes USING INTEGER PRIMARY KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := queryPlan(t, raw, tc.query)
			if !strings.Contains(got, tc.want) || strings.Contains(got, "TEMP B-TREE") || strings.Contains(got, "SCAN operations") || strings.Contains(got, "SCAN attempts") {
				t.Fatalf("plan %q, want %q, no scan of a table and no sort", got, tc.want)
			}
		})
	}
}
