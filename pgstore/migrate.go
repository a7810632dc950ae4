package pgstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"pacer/internal/stored"
)

// schema is version 1 of the database: applied to a new database.
//
//go:embed schema.sql
var schema string

// migrations lists the steps after the schema, in order: migrations()[i]
// takes a database from version i+1 to i+2. The list is append-only:
// never edit or reorder a step that has shipped; add a new one.
func migrations() []string {
	return []string{
		nodesMigration, // nodes, lease_node, elections (node.go)
		// 3: staff accounts of the support page and their sessions, as on
		// SQLite (db/schema.sql and its migrations), shared by every
		// process: a sign-in on one process is a session on all, and the
		// failed sign-ins that lock an account and those the sign-in
		// throttle counts (throttle.go) count across all; and the key
		// check (verifyKey).
		usersAndSessions,
		// 4: scopes.config_version, by which claims reuse the scopes
		// they opened before (scopecache.go).
		scopeConfigVersions,
		// 5: the tokens of renewing grants and their refresh leases
		// (tokens.go), as on SQLite.
		scopeTokens,
		// 6: nodes.process, the key of the lock every connection of the
		// node's process holds (node.go).
		nodeProcesses,
	}
}

// usersAndSessions is migration 2 (see migrations).
const usersAndSessions = `
CREATE TABLE users (
    id             BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name           TEXT    NOT NULL UNIQUE CHECK (name <> ''),
    -- a bcrypt hash, never the password
    password_hash  TEXT    NOT NULL CHECK (password_hash LIKE '$2%'),
    role           TEXT    NOT NULL DEFAULT 'operator' CHECK (role IN ('viewer', 'operator')),
    -- failed sign-ins in a row; the account is locked at
    -- scheduler.MaxFailedSignIns
    failed_signins INTEGER NOT NULL DEFAULT 0 CHECK (failed_signins >= 0),
    created_at     BIGINT  NOT NULL
);

-- sessions: signed-in staff. The cookie carries a random token; only its
-- SHA-256 is stored, so a copy of the database signs no one in. Removing
-- a user ends their sessions.
CREATE TABLE sessions (
    token_hash BYTEA  PRIMARY KEY CHECK (length(token_hash) = 32),
    user_id    BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL CHECK (expires_at > created_at)
);

CREATE INDEX sessions_user ON sessions (user_id);
CREATE INDEX sessions_expires ON sessions (expires_at);

-- signin_failures: failed sign-ins (reserved before the password is
-- checked) per throttle key ("user:NAME", "client:ADDR"), the sign-in
-- throttle of every process (httpapi.SignInThrottle); rows older than the
-- window are dropped as sign-ins come.
CREATE TABLE signin_failures (
    id  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key TEXT   NOT NULL,
    at  BIGINT NOT NULL
);

CREATE INDEX signin_failures_key ON signin_failures (key, at);
CREATE INDEX signin_failures_at ON signin_failures (at);

-- key_check: a value sealed with the credentials key by the first process
-- that opened the database; every process opening it must open it, so
-- that all use the same key even before any scope stores credentials.
CREATE TABLE key_check (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    sealed BYTEA   NOT NULL
);
`

// SchemaVersion is the schema version this binary writes and expects.
func SchemaVersion() int { return 1 + len(migrations()) }

// migrateLock is the key of the transaction-scoped advisory lock that
// migrations run under ("pacer" in ASCII), so that processes starting at
// once migrate one after the other: the first applies the steps, the
// others find the database current.
const migrateLock int64 = 0x7061636572

// SchemaTooNewError is returned by Open for a database written by a newer
// pacer: Found is its version, Known the newest this binary knows.
type SchemaTooNewError struct {
	Found, Known int
}

// Error implements error.
func (e *SchemaTooNewError) Error() string {
	return fmt.Sprintf("database schema version %d is newer than this pacer binary knows (%d): run a newer pacer", e.Found, e.Known)
}

// ErrNoDatabase is returned when a command other than serve names a
// database that holds no pacer database yet: only serve creates one (the
// same error as package db's: stored.ErrNoDatabase).
var ErrNoDatabase = stored.ErrNoDatabase

// NotPacerError is returned by Open for a database that holds tables but
// no pacer schema: pacer does not add its tables to another application's
// data.
type NotPacerError struct {
	// Why says what gave it away.
	Why string
}

// Error implements error.
func (e *NotPacerError) Error() string {
	return fmt.Sprintf("the database is not a pacer database (%s): check --db", e.Why)
}

// migrate brings the database up to SchemaVersion in one transaction,
// holding the advisory lock migrateLock until it commits: the schema when
// the database is new (if create, else ErrNoDatabase), then each pending
// migration, then the version.
func migrate(ctx context.Context, pool *pgxpool.Pool, create bool) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLock); err != nil {
		return fmt.Errorf("migrate: take the migration lock: %w", err)
	}
	version, err := schemaVersion(ctx, tx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	steps := append([]string{schema}, migrations()...)
	switch {
	case version > len(steps):
		return &SchemaTooNewError{Found: version, Known: len(steps)}
	case version == len(steps):
		return nil
	case version == 0 && !create:
		return fmt.Errorf("it has no pacer schema yet: %w", ErrNoDatabase)
	}
	for v := version; v < len(steps); v++ {
		if _, err := tx.Exec(ctx, steps[v]); err != nil {
			return fmt.Errorf("migrate to version %d: %w", v+1, err)
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO pacer_schema (id, version) VALUES (1, $1)
		ON CONFLICT (id) DO UPDATE SET version = excluded.version`, len(steps)); err != nil {
		return fmt.Errorf("migrate: record version %d: %w", len(steps), err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("migrate to version %d: %w", len(steps), err)
	}
	return nil
}

// schemaVersion reads the database's schema version: 0 for a new, empty
// database; a *NotPacerError for one holding other tables.
func schemaVersion(ctx context.Context, tx pgx.Tx) (int, error) {
	var hasSchema bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('pacer_schema') IS NOT NULL`).Scan(&hasSchema); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if !hasSchema {
		var tables int
		err := tx.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`).Scan(&tables)
		if err != nil {
			return 0, fmt.Errorf("read schema: %w", err)
		}
		if tables > 0 {
			return 0, &NotPacerError{Why: fmt.Sprintf("it holds %d tables but no pacer_schema", tables)}
		}
		return 0, nil
	}
	var version int
	err := tx.QueryRow(ctx, `SELECT version FROM pacer_schema WHERE id = 1`).Scan(&version)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, &NotPacerError{Why: "pacer_schema holds no version"}
	}
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return version, nil
}
