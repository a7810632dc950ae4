package db_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pacer/db"
	"pacer/internal/pacertest"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

func TestBackupFileAndCheckFile(t *testing.T) {
	ctx := context.Background()
	d, path := newTestDB(t)
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{Credentials: scheduler.Credentials{Type: scheduler.CredentialBearer, Token: "tok"}})
	storetest.Enqueue(t, d, t0, storetest.NewOp("op-1", "a", t0))

	t.Run("LiveCopyWithoutKey", func(t *testing.T) {
		to := filepath.Join(t.TempDir(), "copy.db")
		if err := db.BackupFile(ctx, path, to); err != nil { // d is still open and holds the writer
			t.Fatal(err)
		}
		if v, err := db.CheckFile(ctx, to); err != nil || v != db.SchemaVersion() {
			t.Fatalf("CheckFile(copy) = %d, %v; want version %d", v, err, db.SchemaVersion())
		}
		if got := storetest.GetOp(t, pacertest.OpenStoreAt(t, to), "op-1").ID; got != "op-1" {
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
	d := pacertest.OpenStoreAt(b, path)
	storetest.PutScope(b, d, "a", storetest.ScopeOpts{})
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
	d := pacertest.OpenStoreAt(b, path)
	storetest.PutScope(b, d, "a", storetest.ScopeOpts{})
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
