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

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"pacer/db"
	"pacer/internal/pacertest"
	"pacer/providers"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// t0 is the fixed "now" of the tests.
var t0 = storetest.T0

// newTestDB opens a fresh database file in a temporary directory and closes
// it when the test (or benchmark) ends. It returns the store and the file's path.
func newTestDB(tb testing.TB) (*db.DB, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "pacer.db")
	return pacertest.OpenStoreAt(tb, path), path
}

// rawDB opens the database file directly, to read or tamper with rows.
func rawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatalf("open raw: %v", err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}

func TestOpen(t *testing.T) {
	t.Run("SchemaApplied", func(t *testing.T) {
		d, path := newTestDB(t)
		if err := d.Check(context.Background()); err != nil {
			t.Fatalf("check: %v", err)
		}
		var version int
		if err := rawDB(t, path).QueryRow(`PRAGMA user_version`).Scan(&version); err != nil {
			t.Fatal(err)
		}
		if got, want := version, db.SchemaVersion(); got != want {
			t.Fatalf("user_version = %d, want %d", got, want)
		}
		var mode string
		if err := rawDB(t, path).QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" {
			t.Fatalf("journal_mode = %q, want wal", mode)
		}
	})

	t.Run("ReopenKeepsSchema", func(t *testing.T) {
		d, path := newTestDB(t)
		storetest.PutScope(t, d, "a", storetest.ScopeOpts{})
		d.Close()
		d = pacertest.OpenStoreAt(t, path)
		if _, err := d.GetScope(context.Background(), "a"); err != nil {
			t.Fatalf("get scope after reopen: %v", err)
		}
	})

	t.Run("PathWithURICharacters", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "a dir?x=1#frag%20")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "pacer db?.db")
		d := pacertest.OpenStoreAt(t, path)
		storetest.PutScope(t, d, "a", storetest.ScopeOpts{})
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("database not at its path: %v", err)
		}
		if got := d.Path(); got != path {
			t.Fatalf("Path() = %q, want %q", got, path)
		}
	})

	t.Run("ErrSchemaTooNew", func(t *testing.T) {
		d, path := newTestDB(t)
		d.Close()
		if _, err := rawDB(t, path).Exec(`PRAGMA user_version = 99`); err != nil {
			t.Fatal(err)
		}
		_, err := db.Open(path, pacertest.Options())
		var tooNew *db.SchemaTooNewError
		if !errors.As(err, &tooNew) || tooNew.Found != 99 {
			t.Fatalf("open = %v, want SchemaTooNewError for 99", err)
		}
		if !strings.Contains(err.Error(), "newer than this pacer binary") {
			t.Fatalf("message %q does not explain", err)
		}
	})

	t.Run("ErrKeyLength", func(t *testing.T) {
		_, err := db.Open(filepath.Join(t.TempDir(), "x.db"), db.Options{Key: []byte("short")})
		if err == nil || !strings.Contains(err.Error(), "32 bytes") {
			t.Fatalf("open = %v, want key length error", err)
		}
	})

	t.Run("ErrWrongKey", func(t *testing.T) {
		d, path := newTestDB(t)
		storetest.PutScope(t, d, "a", storetest.ScopeOpts{Credentials: scheduler.Credentials{Type: scheduler.CredentialBearer, Token: "tok"}})
		d.Close()
		other := []byte("ffffffffffffffffffffffffffffffff")
		_, err := db.Open(path, db.Options{Key: other})
		if err == nil || !strings.Contains(err.Error(), "credentials key does not open") {
			t.Fatalf("open with another key = %v, want a key mismatch error", err)
		}
	})
}

func TestBackup(t *testing.T) {
	d, _ := newTestDB(t)
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{})
	storetest.Enqueue(t, d, t0, storetest.NewOp("op-1", "a", t0))
	to := filepath.Join(t.TempDir(), "backup.db")
	if err := d.Backup(context.Background(), to); err != nil {
		t.Fatalf("backup: %v", err)
	}
	b := pacertest.OpenStoreAt(t, to)
	if err := b.Check(context.Background()); err != nil {
		t.Fatalf("check backup: %v", err)
	}
	if got := storetest.GetOp(t, b, "op-1"); got.State != scheduler.StateScheduled {
		t.Fatalf("backup op state = %s", got.State)
	}
	if err := d.Backup(context.Background(), to); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("backup over an existing file = %v, want refusal", err)
	}
}

// checkCode asserts that err is an SQLite constraint error with code.
func checkCode(t *testing.T, err error, code int) {
	t.Helper()
	var se *sqlite.Error
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want an SQLite error", err)
	}
	if se.Code() != code {
		t.Fatalf("code = %d (%v), want %d", se.Code(), err, code)
	}
}

func TestSchemaChecks(t *testing.T) {
	d, path := newTestDB(t)
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{})
	raw := rawDB(t, path)
	insert := func(state, hold, failure string, lease any) error {
		_, err := raw.Exec(`
			INSERT INTO operations (operation_id, scope_id, state,
				next_attempt_at, hold_reason, failure_reason, lease_expires_at, first_sent_at, lease_token, attempt,
				created_at, updated_at, deadline)
			VALUES (?, (SELECT id FROM scopes WHERE name = 'a'), ?,
				1, NULLIF(?, ''), NULLIF(?, ''), ?, 1, 1, 1, 1, 1, 1)`,
			"op-"+state+hold+failure, state, hold, failure, lease)
		return err
	}
	for _, tc := range []struct {
		name                 string
		state, hold, failure string
		lease                any
		ok                   bool
	}{
		{name: "ScheduledOK", state: "scheduled", ok: true},
		{name: "HeldOK", state: "held", hold: "unknownOutcome", ok: true},
		{name: "RunningOK", state: "running", lease: int64(5), ok: true},
		{name: "UnknownState", state: "sleeping"},
		{name: "HeldWithoutReason", state: "held"},
		{name: "FailedWithoutReason", state: "failed"},
		{name: "ScheduledWithHoldReason", state: "scheduled", hold: "unknownOutcome"},
		{name: "ScheduledWithFailureReason", state: "scheduled", failure: "permanent"},
		{name: "RunningWithoutLease", state: "running"},
		{name: "SucceededWithLease", state: "succeeded", lease: int64(5)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := insert(tc.state, tc.hold, tc.failure, tc.lease)
			if tc.ok {
				if err != nil {
					t.Fatalf("insert: %v", err)
				}
				return
			}
			checkCode(t, err, sqlite3.SQLITE_CONSTRAINT_CHECK)
		})
	}

	t.Run("UnknownScope", func(t *testing.T) {
		// The changes trigger (scope name NOT NULL) or the foreign key
		// refuses it, whichever SQLite checks first.
		_, err := raw.Exec(`
			INSERT INTO operations (operation_id, scope_id, state, next_attempt_at, created_at, updated_at, deadline)
			VALUES ('orphan', 999, 'scheduled', 1, 1, 1, 1)`)
		var se *sqlite.Error
		if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_CONSTRAINT {
			t.Fatalf("insert with unknown scope = %v, want a constraint error", err)
		}
	})
	t.Run("AttemptOfUnknownOperation", func(t *testing.T) {
		_, err := raw.Exec(`INSERT INTO attempts (operation_id, number, lease_token, started_at) VALUES (999, 1, 1, 1)`)
		checkCode(t, err, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY)
	})

	t.Run("TimeMustBeInteger", func(t *testing.T) {
		_, err := raw.Exec(`UPDATE scopes SET paused_until = '2026-09-11T02:00:00Z'`)
		if err == nil {
			t.Fatal("a text time was stored")
		}
	})
}

// What a store commits is there when it opens again: scopes with their
// pauses, budgets and rate slots, operations, and leases still held.
func TestDurableAcrossReopen(t *testing.T) {
	ctx := context.Background()
	d, path := newTestDB(t)
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{MaxConcurrent: 2, Rate: &scheduler.RateLimit{Requests: 1, Per: time.Minute}})
	storetest.PutScope(t, d, "b", storetest.ScopeOpts{})
	storetest.Enqueue(t, d, t0, storetest.NewOp("a-1", "a", t0), storetest.NewOp("a-2", "a", t0), storetest.NewOp("b-1", "b", t0.Add(time.Hour)))
	c := storetest.Claim(t, d, t0, 10)[0] // a-1; the rate then spaces a's next send by a minute
	storetest.Complete(t, d, c, t0.Add(time.Second), scheduler.Decision{
		State: scheduler.StateWaitingForBudget, NextAttemptAt: t0.Add(20 * time.Minute),
		Scope: scheduler.ScopeEffect{PauseUntil: t0.Add(10 * time.Minute), PauseReason: "rate limited",
			Budget: &providers.Budget{Remaining: 0, Limit: 60, ResetAt: t0.Add(10 * time.Minute)}},
	}, providers.Outcome{Class: providers.ClassRateLimited, Status: 429})
	storetest.Enqueue(t, d, t0, storetest.NewOp("a-3", "a", t0))
	running := storetest.Claim(t, d, t0.Add(10*time.Minute), 10) // a-2, left running by a "crash"
	if fmt.Sprint(storetest.ClaimedIDs(running)) != "[a-2]" {
		t.Fatalf("claimed %v", storetest.ClaimedIDs(running))
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	d = pacertest.OpenStoreAt(t, path)
	s, err := d.GetScope(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if !s.PausedUntil.Equal(t0.Add(10*time.Minute)) || s.Budget == nil || s.Budget.Limit != 60 || s.InFlight != 1 {
		t.Fatalf("scope after reopen %+v", s)
	}
	if op := storetest.GetOp(t, d, "a-1"); op.State != scheduler.StateWaitingForBudget || !op.NextAttemptAt.Equal(t0.Add(20*time.Minute)) {
		t.Fatalf("a-1 after reopen %+v", op)
	}
	expired, err := d.ListRunning(ctx, t0.Add(11*time.Minute), 10)
	if err != nil || fmt.Sprint(storetest.ClaimedIDs(expired)) != "[a-2]" || expired[0].Operation.LeaseToken != 1 {
		t.Fatalf("running after reopen %v, %v", storetest.ClaimedIDs(expired), err)
	}
	// Nothing runs early after the restart: a's next rate slot is at +11m.
	if got := storetest.Claim(t, d, t0.Add(11*time.Minute-time.Millisecond), 10); len(got) != 0 {
		t.Fatalf("claimed %v before the rate slot", storetest.ClaimedIDs(got))
	}
	if got := storetest.ClaimedIDs(storetest.Claim(t, d, t0.Add(11*time.Minute), 10)); fmt.Sprint(got) != "[a-3]" {
		t.Fatalf("claimed %v at the rate slot", got)
	}
	if at, ok, err := d.NextWake(ctx); err != nil || !ok || !at.Equal(t0.Add(11*time.Minute)) {
		t.Fatalf("next wake %v, %v, %v: want +11m (rate slot and lease expiry)", at, ok, err)
	}
}

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
