package db_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pacer/db"
	"pacer/providers"
	"pacer/scheduler"
)

// finish claims every due operation at now and completes each with the
// state decide gives it.
func finish(t *testing.T, d *db.DB, now time.Time, decide func(id string) scheduler.Decision) {
	t.Helper()
	for _, c := range claim(t, d, now, 100) {
		dec := decide(c.Operation.ID)
		out := providers.Outcome{Class: providers.ClassSuccess, Status: 200}
		switch dec.State {
		case scheduler.StateHeld:
			out = providers.Outcome{Class: providers.ClassUnknownOutcome, Status: 502}
		case scheduler.StateFailed:
			out = providers.Outcome{Class: providers.ClassPermanent, Status: 422}
		}
		complete(t, d, c, now, dec, out)
	}
}

func countTable(t *testing.T, path, table string) int {
	t.Helper()
	var n int
	if err := rawDB(t, path).QueryRow(`SELECT COUNT(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPruneFinished(t *testing.T) {
	ctx := context.Background()
	d, path := newTestDB(t)
	putScope(t, d, "a", scopeOpts{})
	var ops []scheduler.NewOperation
	for _, id := range []string{"ok-1", "ok-2", "held", "failed", "canceled", "later"} {
		ops = append(ops, newOp(id, "a", t0))
	}
	ops[5].NotBefore = t0.Add(48 * time.Hour) // stays scheduled
	enqueue(t, d, t0, ops...)
	if _, err := d.CancelOperation(ctx, "canceled", scheduler.Action{Actor: "test", At: t0, Reason: "not needed"}); err != nil {
		t.Fatal(err)
	}
	finish(t, d, t0, func(id string) scheduler.Decision {
		switch id {
		case "held":
			return scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldUnknownOutcome}
		case "failed":
			return scheduler.Decision{State: scheduler.StateFailed, FailureReason: scheduler.FailurePermanent}
		}
		return scheduler.Decision{State: scheduler.StateSucceeded}
	})
	// A recent success that must stay.
	enqueue(t, d, t0.Add(time.Hour), newOp("recent", "a", t0.Add(time.Hour)))
	finish(t, d, t0.Add(time.Hour), func(string) scheduler.Decision { return scheduler.Decision{State: scheduler.StateSucceeded} })
	changes := countTable(t, path, "changes")

	t.Run("NothingBeforeTheCutoff", func(t *testing.T) {
		res, err := d.PruneFinished(ctx, scheduler.PruneParams{Before: t0, Limit: 10})
		if err != nil || res != (scheduler.PruneResult{}) {
			t.Fatalf("PruneFinished(before t0) = %+v, %v; want nothing", res, err)
		}
	})
	t.Run("InBatches", func(t *testing.T) {
		before := t0.Add(time.Minute)
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
			if got := getOp(t, d, id).State; got != st {
				t.Errorf("%s: %s, want %s kept", id, got, st)
			}
		}
		if a, err := d.ListAttempts(ctx, "held"); err != nil || len(a) != 1 {
			t.Errorf("held operation's attempts: %d, %v; want 1 kept", len(a), err)
		}
		// Every change recorded at t0 went; the three of "recent" stay.
		if got := countTable(t, path, "changes"); got != 3 || total.Changes != changes-3 {
			t.Errorf("changes left %d (removed %d of %d), want 3", got, total.Changes, changes)
		}
		var minSeq int64
		if err := rawDB(t, path).QueryRow(`SELECT MIN(seq) FROM changes`).Scan(&minSeq); err != nil || minSeq != int64(changes-2) {
			t.Errorf("oldest change left has seq %d (%v), want %d: only the head of the feed goes", minSeq, err, changes-2)
		}
	})
	t.Run("SeqNotReused", func(t *testing.T) {
		enqueue(t, d, t0.Add(2*time.Hour), newOp("after", "a", t0.Add(2*time.Hour)))
		var maxSeq int64
		if err := rawDB(t, path).QueryRow(`SELECT MAX(seq) FROM changes`).Scan(&maxSeq); err != nil || maxSeq != int64(changes+1) {
			t.Errorf("new change has seq %d (%v), want %d", maxSeq, err, changes+1)
		}
	})
	t.Run("BadLimit", func(t *testing.T) {
		if _, err := d.PruneFinished(ctx, scheduler.PruneParams{Before: t0, Limit: 0}); err == nil {
			t.Error("limit 0 accepted")
		}
	})
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

func TestCountByState(t *testing.T) {
	ctx := context.Background()
	d, _ := newTestDB(t)
	putScope(t, d, "open", scopeOpts{})
	putScope(t, d, "paused", scopeOpts{})
	putScope(t, d, "held", scopeOpts{})
	enqueue(t, d, t0, newOp("p1", "paused", t0), newOp("h1", "held", t0), newOp("o1", "open", t0), newOp("o2", "open", t0.Add(time.Hour)))
	for _, c := range claim(t, d, t0, 10) {
		switch c.Scope.Name {
		case "paused":
			complete(t, d, c, t0, scheduler.Decision{State: scheduler.StateWaitingForBudget, NextAttemptAt: t0.Add(time.Minute),
				Scope: scheduler.ScopeEffect{PauseUntil: t0.Add(time.Minute), PauseReason: "429"}}, providers.Outcome{Class: providers.ClassRateLimited, Status: 429})
		case "held":
			complete(t, d, c, t0, scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked,
				Scope: scheduler.ScopeEffect{Hold: scheduler.HoldAuthRevoked}}, providers.Outcome{Class: providers.ClassAuthRevoked, Status: 401})
		}
	}
	c, err := d.CountByState(ctx, t0)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(c.Operations, c.Scopes)
	want := fmt.Sprint(map[scheduler.State]int{"waitingForBudget": 1, "held": 1, "running": 1, "scheduled": 1},
		map[scheduler.ScopeStatus]int{"open": 1, "paused": 1, "held": 1})
	if got != want {
		t.Errorf("counts at t0 = %s, want %s", got, want)
	}
	c, err = d.CountByState(ctx, t0.Add(time.Minute)) // the pause is over
	if err != nil {
		t.Fatal(err)
	}
	if c.Scopes[scheduler.ScopePaused] != 0 || c.Scopes[scheduler.ScopeOpen] != 2 {
		t.Errorf("scopes after the pause = %v, want 2 open, 1 held", c.Scopes)
	}
}

func TestBackupFileAndCheckFile(t *testing.T) {
	ctx := context.Background()
	d, path := newTestDB(t)
	putScope(t, d, "a", scopeOpts{Credentials: scheduler.Credentials{Type: scheduler.CredentialBearer, Token: "tok"}})
	enqueue(t, d, t0, newOp("op-1", "a", t0))

	t.Run("LiveCopyWithoutKey", func(t *testing.T) {
		to := filepath.Join(t.TempDir(), "copy.db")
		if err := db.BackupFile(ctx, path, to); err != nil { // d is still open and holds the writer
			t.Fatal(err)
		}
		if v, err := db.CheckFile(ctx, to); err != nil || v != db.SchemaVersion() {
			t.Fatalf("CheckFile(copy) = %d, %v; want version %d", v, err, db.SchemaVersion())
		}
		if got := getOp(t, openTestDB(t, to), "op-1").ID; got != "op-1" {
			t.Errorf("copy holds %q", got)
		}
		if err := db.BackupFile(ctx, path, to); err == nil || !strings.Contains(err.Error(), "exists") {
			t.Errorf("backup over an existing file: %v, want a refusal", err)
		}
	})
	t.Run("Missing", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "nope.db")
		if _, err := db.CheckFile(ctx, missing); err == nil || !strings.Contains(err.Error(), "no database file") {
			t.Errorf("CheckFile(missing) = %v", err)
		}
		if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
			t.Error("CheckFile created the missing file")
		}
		if err := db.BackupFile(ctx, missing, filepath.Join(t.TempDir(), "c.db")); err == nil {
			t.Error("BackupFile(missing) succeeded")
		}
	})
	t.Run("NotADatabase", func(t *testing.T) {
		junk := filepath.Join(t.TempDir(), "junk.db")
		if err := os.WriteFile(junk, []byte(strings.Repeat("not sqlite at all ", 512)), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := db.CheckFile(ctx, junk); err == nil {
			t.Error("CheckFile accepted a file that is not a database")
		}
	})
	t.Run("WrongSchemaVersion", func(t *testing.T) {
		to := filepath.Join(t.TempDir(), "old.db")
		if err := db.BackupFile(ctx, path, to); err != nil {
			t.Fatal(err)
		}
		if _, err := rawDB(t, to).Exec(`PRAGMA user_version = 99`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.CheckFile(ctx, to); err == nil || !strings.Contains(err.Error(), "schema version is 99") {
			t.Errorf("CheckFile(version 99) = %v, want a schema version problem", err)
		}
	})
}

// fillFinished inserts n operations of scope that succeeded at `at`, each
// with one attempt (and, through the triggers, one change).
func fillFinished(tb testing.TB, raw *sql.DB, scope string, n int, at time.Time) {
	tb.Helper()
	ms := at.UnixMilli()
	_, err := raw.Exec(`
		WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?1)
		INSERT INTO operations (operation_id, scope_id, kind, method, path, request_identity, state, attempt,
			budget_attempts, created_at, updated_at, deadline, max_attempts, max_elapsed_ms, lease_token, first_sent_at, content_hash)
		SELECT ?2 || '-done-' || i, (SELECT id FROM scopes WHERE name = ?2), 'read', 'GET', '/x', ?2 || '-done-' || i,
			'succeeded', 1, 1, ?3, ?3, ?3 + 86400000, 5, 86400000, 1, ?3, 'h'
		FROM seq`, n, scope, ms)
	if err != nil {
		tb.Fatalf("fill finished %s: %v", scope, err)
	}
	_, err = raw.Exec(`
		INSERT INTO attempts (operation_id, number, lease_token, started_at, finished_at, class, status, decided_state)
		SELECT id, 1, 1, ?1, ?1, 'success', 200, 'succeeded' FROM operations WHERE state = 'succeeded' AND operation_id LIKE ?2 || '-done-%'`, ms, scope)
	if err != nil {
		tb.Fatalf("fill attempts %s: %v", scope, err)
	}
}

// BenchmarkPruneBatch measures one retention batch (500 operations with
// their attempts and 500 changes) in a table of 200,000 finished
// operations: the longest the claim loop waits for the pruner.
//
//	go test -run=^$ -bench=PruneBatch -benchtime=100x ./db/
func BenchmarkPruneBatch(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.db")
	d, err := db.Open(path, db.Options{Key: testKey()})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	putScope(b, d, "a", scopeOpts{})
	raw := rawDB(b, path)
	fillFinished(b, raw, "a", max(200_000, 500*b.N), t0)
	b.ResetTimer()
	for range b.N {
		res, err := d.PruneFinished(context.Background(), scheduler.PruneParams{Before: t0.Add(time.Hour), Limit: scheduler.DefaultPruneBatch})
		if err != nil || res.Operations != scheduler.DefaultPruneBatch {
			b.Fatalf("prune: %+v %v", res, err)
		}
	}
}

// BenchmarkCountByState measures the query behind the metrics' state
// gauges on 1,000,000 operations.
//
//	go test -run=^$ -bench=CountByState -benchtime=20x ./db/
func BenchmarkCountByState(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.db")
	d, err := db.Open(path, db.Options{Key: testKey()})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	putScope(b, d, "a", scopeOpts{})
	raw := rawDB(b, path)
	fillDue(b, raw, "a", 500_000, t0)
	fillFinished(b, raw, "a", 500_000, t0)
	b.ResetTimer()
	for range b.N {
		if _, err := d.CountByState(context.Background(), t0); err != nil {
			b.Fatal(err)
		}
	}
}
