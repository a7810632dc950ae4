package db_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"pacer/internal/pacertest"
	"pacer/providers"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// With nothing overdue ExpireOverdue takes no write transaction: it goes
// through while another connection holds the write lock (a write would
// wait out the busy timeout and fail with SQLITE_BUSY).
func TestExpireOverdueIdleWritesNothing(t *testing.T) {
	d, path := newTestDB(t)
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{})
	storetest.Enqueue(t, d, t0, storetest.OpWith("x", "a", t0, time.Hour))
	raw := rawDB(t, path)
	conn, err := raw.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), `ROLLBACK`)
	res := storetest.Expire(t, d, t0.Add(30*time.Minute), 10)
	if res.Expired != 0 || !res.Next.Equal(t0.Add(time.Hour)) {
		t.Fatalf("result %+v", res)
	}
}

// Migration 2 marks the existing mutations that had an uncertain attempt
// and are not settled.
func TestMigrationMarksMaybeApplied(t *testing.T) {
	d, path := newTestDB(t)
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{})
	storetest.PutScope(t, d, "b", storetest.ScopeOpts{})
	read := storetest.NewOp("read", "b", t0)
	read.Kind, read.Request.Method = scheduler.KindRead, "GET"
	storetest.Enqueue(t, d, t0, storetest.NewOp("uncertain", "a", t0), read)
	for _, c := range storetest.Claim(t, d, t0, 2) {
		storetest.Complete(t, d, c, t0, scheduler.Decision{State: scheduler.StateScheduled, NextAttemptAt: t0.Add(time.Second)},
			providers.Outcome{Class: providers.ClassUnknownOutcome})
	}
	d.Close()
	// Take the file back to version 1: undo every later migration.
	raw := rawDB(t, path)
	for _, q := range []string{undoResourceBudgets, `ALTER TABLE attempts DROP COLUMN response`, `ALTER TABLE operations DROP COLUMN last_response`, `DROP TABLE write_probe`, `DROP INDEX operations_identity`, `DROP INDEX operations_waiting_deadline`, `ALTER TABLE operations DROP COLUMN maybe_applied`, `PRAGMA user_version = 1`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()
	d = pacertest.OpenStoreAt(t, path)
	if op := storetest.GetOp(t, d, "uncertain"); !op.MaybeApplied {
		t.Error("the uncertain mutation is not marked")
	}
	if op := storetest.GetOp(t, d, "read"); op.MaybeApplied {
		t.Error("a read is marked")
	}
}

// undoResourceBudgets takes a database from version 12 back to 5.
const undoResourceBudgets = undoCredentialTypes + `
	DROP TRIGGER scopes_default_budget;
	DROP TABLE scope_routes;
	DROP TABLE scope_budgets;
	DROP INDEX operations_due;
	ALTER TABLE operations DROP COLUMN resource;
	CREATE INDEX operations_due ON operations (scope_id, next_attempt_at) WHERE state IN ('scheduled', 'waitingForBudget');
	PRAGMA user_version = 5;`

// undoScopeTokens takes a database from version 13 back to 12.
const undoScopeTokens = `
	DROP TABLE scope_tokens;
	PRAGMA user_version = 12;`

// undoNarrowRow takes a database from version 13 back to 11: the request
// and the last answer move back into the operation row (the last outcome
// as the JSON version 11 wrote), and the attempts lose their answers.
const undoNarrowRow = undoScopeTokens + `
	ALTER TABLE operations ADD COLUMN kind TEXT NOT NULL DEFAULT 'read';
	ALTER TABLE operations ADD COLUMN method TEXT NOT NULL DEFAULT 'GET';
	ALTER TABLE operations ADD COLUMN path TEXT NOT NULL DEFAULT '/';
	ALTER TABLE operations ADD COLUMN headers TEXT;
	ALTER TABLE operations ADD COLUMN body BLOB;
	ALTER TABLE operations ADD COLUMN content_type TEXT NOT NULL DEFAULT '';
	ALTER TABLE operations ADD COLUMN request_identity TEXT NOT NULL DEFAULT '';
	ALTER TABLE operations ADD COLUMN content_hash TEXT NOT NULL DEFAULT '';
	ALTER TABLE operations ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 1;
	ALTER TABLE operations ADD COLUMN max_elapsed_ms INTEGER NOT NULL DEFAULT 1;
	ALTER TABLE operations ADD COLUMN last_outcome TEXT;
	ALTER TABLE operations ADD COLUMN last_response TEXT;
	ALTER TABLE operations ADD COLUMN result TEXT;
	UPDATE operations SET (kind, method, path, headers, body, content_type, request_identity, content_hash, max_attempts, max_elapsed_ms) =
		(SELECT kind, method, path, headers, body, content_type, request_identity, content_hash, max_attempts, max_elapsed_ms
		 FROM operation_requests r WHERE r.id = operations.id);
	UPDATE operations SET (last_outcome, last_response, result) = (
		SELECT json_object('class', a.class, 'status', a.status,
				'at', strftime('%Y-%m-%dT%H:%M:%fZ', a.finished_at / 1000.0, 'unixepoch'),
				'hint', json(a.hint), 'reason', a.reason, 'detail', a.detail),
			CASE WHEN a.decided_state IS NOT 'succeeded' THEN a.answer END,
			CASE WHEN a.decided_state = 'succeeded' THEN a.answer END
		FROM attempts a WHERE a.operation_id = operations.id AND a.number = operations.answered_attempt)
	WHERE answered_attempt IS NOT NULL;
	ALTER TABLE attempts DROP COLUMN answer;
	ALTER TABLE operations DROP COLUMN answered_attempt;
	DROP INDEX operation_requests_identity;
	DROP TABLE operation_requests;
	CREATE INDEX operations_identity ON operations (request_identity, scope_id);
	PRAGMA user_version = 11;`

// undoRunningIndex takes a database from version 12 back to 10.
const undoRunningIndex = undoNarrowRow + `
	DROP INDEX operations_running;
	CREATE INDEX operations_running_scope ON operations (scope_id) WHERE state = 'running';
	CREATE INDEX operations_running_lease ON operations (lease_expires_at) WHERE state = 'running';
	PRAGMA user_version = 10;`

// undoSlimFeed takes a database from version 12 back to 9: the feed's rows
// name their scope again (an orphan's kept name included), with the
// per-scope index and the version 1 triggers; the scopes lose their
// configuration version and the triggers that refuse a rename or delete.
const undoSlimFeed = undoRunningIndex + `
	DROP TRIGGER scopes_config_version;
	DROP TRIGGER scopes_config_version_insert;
	ALTER TABLE scopes DROP COLUMN config_version;
	DROP TABLE scope_config_clock;
	DROP TRIGGER scopes_never_renamed;
	DROP TRIGGER scopes_never_deleted;
	DROP TRIGGER operations_changes_insert;
	DROP TRIGGER operations_changes_update;
	CREATE TABLE changes_v9 (
		seq          INTEGER PRIMARY KEY AUTOINCREMENT,
		operation_id TEXT    NOT NULL,
		scope        TEXT    NOT NULL,
		state        TEXT    NOT NULL,
		at           INTEGER NOT NULL
	) STRICT;
	INSERT INTO changes_v9 (seq, operation_id, scope, state, at)
		SELECT c.seq, c.operation_id, coalesce(s.name, c.orphan_scope), c.state, c.at
		FROM changes c LEFT JOIN scopes s ON s.id = c.scope_id ORDER BY c.seq;
	DELETE FROM sqlite_sequence WHERE name = 'changes_v9';
	INSERT INTO sqlite_sequence (name, seq) SELECT 'changes_v9', seq FROM sqlite_sequence WHERE name = 'changes';
	DROP TABLE changes;
	ALTER TABLE changes_v9 RENAME TO changes;
	CREATE INDEX changes_scope ON changes (scope, seq);
	CREATE TRIGGER operations_changes_insert AFTER INSERT ON operations
	BEGIN
		INSERT INTO changes (operation_id, scope, state, at)
		VALUES (NEW.operation_id, (SELECT name FROM scopes WHERE id = NEW.scope_id), NEW.state, NEW.updated_at);
	END;
	CREATE TRIGGER operations_changes_update AFTER UPDATE OF state ON operations
	WHEN NEW.state IS NOT OLD.state
	BEGIN
		INSERT INTO changes (operation_id, scope, state, at)
		VALUES (NEW.operation_id, (SELECT name FROM scopes WHERE id = NEW.scope_id), NEW.state, NEW.updated_at);
	END;
	PRAGMA user_version = 9;`

// undoStaffRoles takes a database from version 12 back to 8.
const undoStaffRoles = undoSlimFeed + `
	ALTER TABLE users DROP COLUMN role;
	ALTER TABLE users DROP COLUMN failed_signins;
	PRAGMA user_version = 8;`

// undoReleasedFrom takes a database from version 12 back to 7.
const undoReleasedFrom = undoStaffRoles + `
	ALTER TABLE operations DROP COLUMN released_from_state;
	ALTER TABLE operations DROP COLUMN released_from_reason;
	PRAGMA user_version = 7;`

// undoCredentialTypes takes a database from version 12 back to 6.
const undoCredentialTypes = undoReleasedFrom + `
	ALTER TABLE scopes DROP COLUMN credential_type;
	PRAGMA user_version = 6;`

// Migration 7 and Open record each older scope's credential type in the
// clear, so that reads show it without opening the sealed values.
func TestMigrationRecordsCredentialTypes(t *testing.T) {
	d, path := newTestDB(t)
	storetest.PutScope(t, d, "tok", storetest.ScopeOpts{Credentials: scheduler.Credentials{Type: scheduler.CredentialBearer, Token: "s3cret"}})
	storetest.PutScope(t, d, "none", storetest.ScopeOpts{})
	d.Close()
	raw := rawDB(t, path)
	if _, err := raw.Exec(undoCredentialTypes); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	d = pacertest.OpenStoreAt(t, path)
	raw = rawDB(t, path)
	for name, want := range map[string]string{"tok": "bearer", "none": ""} {
		var typ sql.NullString
		if err := raw.QueryRow(`SELECT credential_type FROM scopes WHERE name = ?`, name).Scan(&typ); err != nil {
			t.Fatal(err)
		}
		if !typ.Valid || typ.String != want {
			t.Errorf("%s: credential_type %v, want %q recorded", name, typ, want)
		}
		s, err := d.GetScope(context.Background(), name)
		if err != nil || string(s.Credentials.Type) != want || s.Credentials.Token != "" {
			t.Errorf("%s: GetScope credentials %#v, %v; want the type %q alone", name, s.Credentials, err, want)
		}
	}
}

// Migration 6 moves each scope's learned budget to its default budget row,
// and gives every scope one, so that its operations are admitted as
// before.
func TestMigrationMovesBudgets(t *testing.T) {
	d, path := newTestDB(t)
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{MaxConcurrent: 5})
	storetest.PutScope(t, d, "b", storetest.ScopeOpts{MaxConcurrent: 5})
	storetest.Enqueue(t, d, t0, storetest.NewOp("a1", "a", t0), storetest.NewOp("a2", "a", t0), storetest.NewOp("b1", "b", t0))
	d.Close()
	raw := rawDB(t, path)
	reset := t0.Add(time.Hour)
	for _, q := range []string{undoResourceBudgets,
		fmt.Sprintf(`UPDATE scopes SET budget_remaining = 1, budget_limit = 60, budget_reset_at = %d WHERE name = 'a'`, reset.UnixMilli())} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()
	d = pacertest.OpenStoreAt(t, path)
	s, err := d.GetScope(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if b := s.Budget; b == nil || b.Remaining != 1 || b.Limit != 60 || !b.ResetAt.Equal(reset) {
		t.Fatalf("budget after migration %+v, want 1 of 60 until %s", s.Budget, reset)
	}
	// a's budget lets one through; b has none.
	var got []string
	for _, c := range storetest.Claim(t, d, t0, 10) {
		got = append(got, c.Operation.ID)
	}
	if slices.Sort(got); !slices.Equal(got, []string{"a1", "b1"}) {
		t.Fatalf("claimed %v, want [a1 b1]", got)
	}
}

// Migration 11 (one index of running rows) on a database with live
// leases: the leases still count against their scope's concurrency, are
// found by recovery and NextWake, and their completions apply.
func TestMigrationRunningIndexKeepsLiveLeases(t *testing.T) {
	d, path := newTestDB(t)
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{MaxConcurrent: 2})
	storetest.Enqueue(t, d, storetest.T0, storetest.NewOp("one", "a", storetest.T0), storetest.NewOp("two", "a", storetest.T0), storetest.NewOp("three", "a", storetest.T0))
	claims := storetest.Claim(t, d, storetest.T0, 2)
	if len(claims) != 2 {
		t.Fatalf("claimed %v, want two (the scope's cap)", storetest.ClaimedIDs(claims))
	}
	d.Close()
	raw := rawDB(t, path)
	if _, err := raw.Exec(undoRunningIndex); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	d = pacertest.OpenStoreAt(t, path)
	ctx := context.Background()
	if more := storetest.Claim(t, d, storetest.T0, 10); len(more) != 0 {
		t.Fatalf("claimed %v past the cap after the migration: the live leases stopped counting", storetest.ClaimedIDs(more))
	}
	running, err := d.ListRunning(ctx, storetest.T0.Add(time.Hour), 0)
	if err != nil || len(running) != 2 {
		t.Fatalf("ListRunning after the migration: %d, %v; want the two live leases", len(running), err)
	}
	if at, ok, err := d.NextWake(ctx); err != nil || !ok || !at.Equal(claims[0].Operation.LeaseExpiresAt) {
		t.Fatalf("NextWake = %s, %v, %v; want the leases' expiry %s", at, ok, err, claims[0].Operation.LeaseExpiresAt)
	}
	done := storetest.CompletionOf(claims[0], storetest.T0.Add(time.Second), scheduler.Decision{State: scheduler.StateSucceeded}, providers.Outcome{Class: providers.ClassSuccess, Status: 200})
	applied, next, err := d.CompleteAndClaim(ctx, []scheduler.Completion{done}, scheduler.ClaimParams{Now: storetest.T0.Add(time.Second), Limit: 10, LeaseFor: time.Minute})
	if err != nil || !applied[0] || len(next) != 1 || next[0].Operation.ID != "three" {
		t.Fatalf("complete and claim after the migration: applied %v, claimed %v, %v; want the freed slot to go to three", applied, storetest.ClaimedIDs(next), err)
	}
}
