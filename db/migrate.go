package db

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"

	"pacer/internal/stored"
)

// schema is version 1 of the database: applied in one transaction to a new
// database.
//
//go:embed schema.sql
var schema string

// migrations lists the steps after the schema, in order: migrations()[i]
// takes a database from version i+1 to i+2. The list is append-only:
// never edit or reorder a step that has shipped; add a new one.
func migrations() []string {
	return []string{
		maybeAppliedAndDeadlines, // version 2
		// version 3: find the operations of a scope that send one request
		// identity (an idempotency key a provider remembers). The identity
		// leads, so the planner keeps the scope's own indexes for listings.
		`CREATE INDEX operations_identity ON operations (request_identity, scope_id);`,
		// version 4: the row DB.Writable writes to find out whether the
		// database accepts writes (and removes in the same transaction).
		`CREATE TABLE write_probe (
			id INTEGER PRIMARY KEY CHECK (id = 1),
			pad BLOB NOT NULL
		) STRICT;`,
		lastResponses,   // version 5
		resourceBudgets, // version 6
		// version 7: each scope's credential type in the clear (never a
		// value), so that only claims open the sealed credentials; NULL
		// until recorded (Open records it for older rows).
		`ALTER TABLE scopes ADD COLUMN credential_type TEXT;`,
		// version 8: what a person released an operation from (its state and
		// reason), while the release has not been sent: the release can be
		// changed or undone until the claim clears it (design §14).
		`ALTER TABLE operations ADD COLUMN released_from_state TEXT CHECK (released_from_state IN ('held', 'failed'));
		ALTER TABLE operations ADD COLUMN released_from_reason TEXT;`,
		// version 9: staff roles (a viewer looks, an operator acts) and the
		// failed sign-ins in a row that lock an account until
		// pacer users unlock (design §14).
		`ALTER TABLE users ADD COLUMN role TEXT NOT NULL DEFAULT 'operator' CHECK (role IN ('viewer', 'operator'));
		ALTER TABLE users ADD COLUMN failed_signins INTEGER NOT NULL DEFAULT 0 CHECK (failed_signins >= 0);`,
		slimFeedAndScopeVersions, // version 10
		runningIndex,             // version 11
		narrowHotRow,             // version 12
		scopeTokens,              // version 13
	}
}

// scopeTokens (issue 17, design §13) is the token of each scope whose
// grant renews itself: sealed like the credentials (the access token, a
// rotated refresh token, their times, and the fingerprint of the grant
// they came from), its expiry and last refresh in the clear for the
// scope's readers and metrics, and the refresh lease that lets one
// refresh per scope run at a time. PutScope removes the row when the
// credentials change.
const scopeTokens = `
CREATE TABLE scope_tokens (
	scope_id       INTEGER PRIMARY KEY REFERENCES scopes (id) ON DELETE CASCADE,
	sealed         BLOB,
	expires_at     INTEGER NOT NULL DEFAULT 0,
	refreshed_at   INTEGER NOT NULL DEFAULT 0,
	refresh_result TEXT    NOT NULL DEFAULT '',
	lease_holder   TEXT,
	lease_until    INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX scope_tokens_expires ON scope_tokens (expires_at) WHERE expires_at > 0;`

// runningIndex (issue 15) replaces the two partial indexes of running rows
// (per scope, for the in-flight counts; by lease expiry, for recovery and
// NextWake) with one, by scope then expiry: every claim and completion
// wrote both. Running rows are bounded by the workers of the processes
// sharing the database, so recovery and NextWake read all of them and
// order by expiry themselves.
const runningIndex = `
DROP INDEX operations_running_scope;
DROP INDEX operations_running_lease;
CREATE INDEX operations_running ON operations (scope_id, lease_expires_at) WHERE state = 'running';`

// narrowHotRow (issue 15: the hot path) splits the operation row, which the
// claim and the completion rewrote whole, request and answers with it:
//   - operations keeps what the claim, the completion and manual actions
//     change (state, times, lease, counters, reasons, the budget it
//     spends) and, in answered_attempt, the number of the attempt whose
//     answer is the operation's last outcome (NULL before any).
//   - operation_requests holds what is written once, at enqueue: the
//     request (kind, method, path, headers, body, content type), its
//     identity, content hash and retry bounds. The request-identity index
//     moves with it (the scope is checked on the operation row).
//   - the last outcome is the answered attempt's own columns (class,
//     status, finished_at, hint, reason, detail), which the completion
//     writes anyway; the provider's whole answer (a success's result, or
//     the last answer of an operation that did not succeed) is that
//     attempt's answer column. Only the answered attempt keeps one: a
//     later answer clears the one before, so an operation keeps one whole
//     answer, as before.
//
// Existing rows are split as they are: the answered attempt is the
// latest finished one (only an applied completion finishes an attempt),
// and it takes the operation's result or last response.
const narrowHotRow = `
CREATE TABLE operation_requests (
    id               INTEGER PRIMARY KEY REFERENCES operations (id),
    kind             TEXT    NOT NULL CHECK (kind IN ('read', 'mutation')),
    method           TEXT    NOT NULL CHECK (method <> ''),
    path             TEXT    NOT NULL CHECK (path LIKE '/%'),
    headers          TEXT    CHECK (headers IS NULL OR json_valid(headers)),
    body             BLOB,
    content_type     TEXT    NOT NULL DEFAULT '',
    request_identity TEXT    NOT NULL CHECK (request_identity <> ''),
    content_hash     TEXT    NOT NULL,
    max_attempts     INTEGER NOT NULL CHECK (max_attempts >= 1),
    max_elapsed_ms   INTEGER NOT NULL CHECK (max_elapsed_ms >= 1)
) STRICT;
INSERT INTO operation_requests (id, kind, method, path, headers, body, content_type,
        request_identity, content_hash, max_attempts, max_elapsed_ms)
    SELECT id, kind, method, path, headers, body, content_type,
        request_identity, content_hash, max_attempts, max_elapsed_ms
    FROM operations ORDER BY id;
DROP INDEX operations_identity;
CREATE INDEX operation_requests_identity ON operation_requests (request_identity);
ALTER TABLE attempts ADD COLUMN answer TEXT CHECK (answer IS NULL OR json_valid(answer));
ALTER TABLE operations ADD COLUMN answered_attempt INTEGER CHECK (answered_attempt >= 1);
UPDATE operations SET answered_attempt = (
        SELECT max(a.number) FROM attempts a WHERE a.operation_id = operations.id AND a.finished_at IS NOT NULL)
    WHERE last_outcome IS NOT NULL;
UPDATE attempts SET answer = (
        SELECT coalesce(o.result, o.last_response) FROM operations o WHERE o.id = attempts.operation_id)
    WHERE (operation_id, number) IN (SELECT id, answered_attempt FROM operations WHERE answered_attempt IS NOT NULL);
ALTER TABLE operations DROP COLUMN kind;
ALTER TABLE operations DROP COLUMN method;
ALTER TABLE operations DROP COLUMN path;
ALTER TABLE operations DROP COLUMN headers;
ALTER TABLE operations DROP COLUMN body;
ALTER TABLE operations DROP COLUMN content_type;
ALTER TABLE operations DROP COLUMN request_identity;
ALTER TABLE operations DROP COLUMN content_hash;
ALTER TABLE operations DROP COLUMN max_attempts;
ALTER TABLE operations DROP COLUMN max_elapsed_ms;
ALTER TABLE operations DROP COLUMN last_outcome;
ALTER TABLE operations DROP COLUMN last_response;
ALTER TABLE operations DROP COLUMN result;
`

// maybeAppliedAndDeadlines (design §11) records on each operation whether
// an attempt of it may have applied its mutation (maybe_applied, set by a
// completion whose attempt had an uncertain outcome, cleared only by a
// resolve), filled in for existing operations from their attempts; and
// indexes the deadlines of waiting operations, so the ones a deadline
// ends while they wait are found without reading the backlog.
const maybeAppliedAndDeadlines = `
ALTER TABLE operations ADD COLUMN maybe_applied INTEGER NOT NULL DEFAULT 0 CHECK (maybe_applied IN (0, 1));
UPDATE operations SET maybe_applied = 1
WHERE kind = 'mutation' AND state NOT IN ('succeeded', 'canceled')
	AND coalesce(failure_reason, '') <> 'resolvedFailed'
	AND EXISTS (SELECT 1 FROM attempts a WHERE a.operation_id = operations.id AND a.class = 'unknownOutcome');
CREATE INDEX operations_waiting_deadline ON operations (deadline)
	WHERE state IN ('scheduled', 'waitingForBudget');
`

// lastResponses (design §12 "What the provider answered is kept") stores
// the whole last answer of an operation that did not succeed
// (last_response, JSON of scheduler.Result, bounded by the result limit),
// apart from last_outcome so that claims and listings do not read it, and
// each attempt's bounded copy (attempts.response). NULL for none.
const lastResponses = `
ALTER TABLE operations ADD COLUMN last_response TEXT CHECK (last_response IS NULL OR json_valid(last_response));
ALTER TABLE attempts ADD COLUMN response TEXT CHECK (response IS NULL OR json_valid(response));
`

// resourceBudgets (design §12 "Separate budgets where the provider keeps
// them") gives every scope one learned budget per resource the provider
// names (GitHub's x-ratelimit-resource: search, graphql, …), so that a
// spent search budget does not hold a REST write:
//   - scope_budgets holds each budget: its figures, its own pause and its
//     pacing slot. Resource "" is the profile's default budget, the one a
//     request spends unless its route was learned to spend another; every
//     scope has that row (the trigger below), filled here from the scope's
//     old budget columns, which are unused from this version on.
//   - scope_routes maps a request's route ("METHOD /first-segment", or
//     "METHOD /whole/path" where it differs from its first segment) to the
//     resource the provider's answer named for it; each route's resource
//     has its budget row (the triggers below).
//   - operations.resource is the resource an operation's request spends,
//     from scope_routes; the due index leads with it, so admission reads
//     the head of each budget's due rows.
//
// A scope's configured rate slot stays scopes.next_slot_at; the pacing of
// a learned budget moves to its row.
const resourceBudgets = `
CREATE TABLE scope_budgets (
    scope_id     INTEGER NOT NULL REFERENCES scopes (id),
    resource     TEXT    NOT NULL,
    remaining    INTEGER,
    "limit"      INTEGER,
    reset_at     INTEGER,
    paused_until INTEGER NOT NULL DEFAULT 0,
    pause_reason TEXT    NOT NULL DEFAULT '',
    next_slot_at INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (scope_id, resource),
    CHECK (remaining IS NOT NULL OR ("limit" IS NULL AND reset_at IS NULL))
) STRICT, WITHOUT ROWID;
INSERT INTO scope_budgets (scope_id, resource, remaining, "limit", reset_at)
	SELECT id, '', budget_remaining, budget_limit, budget_reset_at FROM scopes;
UPDATE scopes SET budget_remaining = NULL, budget_limit = NULL, budget_reset_at = NULL;
CREATE TRIGGER scopes_default_budget AFTER INSERT ON scopes
BEGIN
    INSERT INTO scope_budgets (scope_id, resource) VALUES (NEW.id, '');
END;
CREATE TABLE scope_routes (
    scope_id   INTEGER NOT NULL REFERENCES scopes (id),
    route      TEXT    NOT NULL CHECK (route <> ''),
    resource   TEXT    NOT NULL,
    -- 1 for a whole path's route that differs from its first segment's
    -- (at most scheduler.MaxExceptionRoutes of them are kept).
    exception  INTEGER NOT NULL CHECK (exception IN (0, 1)),
    learned_at INTEGER NOT NULL,
    PRIMARY KEY (scope_id, route)
) STRICT, WITHOUT ROWID;
CREATE TRIGGER scope_routes_budget_insert AFTER INSERT ON scope_routes
BEGIN
    INSERT OR IGNORE INTO scope_budgets (scope_id, resource) VALUES (NEW.scope_id, NEW.resource);
END;
CREATE TRIGGER scope_routes_budget_update AFTER UPDATE OF resource ON scope_routes
BEGIN
    INSERT OR IGNORE INTO scope_budgets (scope_id, resource) VALUES (NEW.scope_id, NEW.resource);
END;
ALTER TABLE operations ADD COLUMN resource TEXT NOT NULL DEFAULT '';
DROP INDEX operations_due;
CREATE INDEX operations_due ON operations (scope_id, resource, next_attempt_at)
    WHERE state IN ('scheduled', 'waitingForBudget');
`

// slimFeedAndScopeVersions (issue 15: the hot path) makes two hot writes
// cheaper and the claim's scope read cacheable:
//   - A change row carries its operation's scope_id, not the scope's name
//     looked up per row, and the feed has no per-scope index: a read of one
//     scope scans the feed in seq order, bounded (db.ListChanges), and the
//     name is joined when read. Scopes are never renamed or deleted (no
//     statement of pacer does either; the triggers below refuse it), so the
//     name joined is the name the change was recorded under. A change whose
//     name matched no scope when this step ran (the file was edited by
//     hand) keeps its name in orphan_scope, its scope_id NULL. The table is
//     rebuilt with its seq values, and the newest seq ever assigned is kept
//     (sqlite_sequence), so no cursor is invalidated or reused.
//   - scopes.config_version changes, by trigger, with every update of a
//     column the claim hands to the worker as configuration (provider, base
//     URL, credentials, profile, idempotency header, limits); the admission
//     state (hold, pauses, rate slot, budgets, updated_at) leaves it alone.
//     Versions come from one database-wide clock (scope_config_clock), so
//     a version is never given to two configurations, not even to a scope
//     that reuses the row ID of one deleted by hand. A claim reuses the
//     scope it opened before while the version is the same
//     (internal/scopecache).
const slimFeedAndScopeVersions = `
DROP TRIGGER operations_changes_insert;
DROP TRIGGER operations_changes_update;
CREATE TABLE changes_v10 (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    operation_id TEXT    NOT NULL,
    scope_id     INTEGER,
    orphan_scope TEXT,
    state        TEXT    NOT NULL,
    at           INTEGER NOT NULL,
    CHECK ((scope_id IS NULL) <> (orphan_scope IS NULL))
) STRICT;
INSERT INTO changes_v10 (seq, operation_id, scope_id, orphan_scope, state, at)
    SELECT c.seq, c.operation_id, s.id, CASE WHEN s.id IS NULL THEN c.scope END, c.state, c.at
    FROM changes c LEFT JOIN scopes s ON s.name = c.scope ORDER BY c.seq;
DELETE FROM sqlite_sequence WHERE name = 'changes_v10';
INSERT INTO sqlite_sequence (name, seq) SELECT 'changes_v10', seq FROM sqlite_sequence WHERE name = 'changes';
DROP TABLE changes;
ALTER TABLE changes_v10 RENAME TO changes;
CREATE TRIGGER operations_changes_insert AFTER INSERT ON operations
BEGIN
    INSERT INTO changes (operation_id, scope_id, state, at)
    VALUES (NEW.operation_id, NEW.scope_id, NEW.state, NEW.updated_at);
END;
CREATE TRIGGER operations_changes_update AFTER UPDATE OF state ON operations
WHEN NEW.state IS NOT OLD.state
BEGIN
    INSERT INTO changes (operation_id, scope_id, state, at)
    VALUES (NEW.operation_id, NEW.scope_id, NEW.state, NEW.updated_at);
END;
CREATE TRIGGER scopes_never_renamed BEFORE UPDATE OF name ON scopes
WHEN NEW.name IS NOT OLD.name
BEGIN
    SELECT RAISE(ABORT, 'a scope is never renamed: the change feed names it by its row');
END;
CREATE TRIGGER scopes_never_deleted BEFORE DELETE ON scopes
BEGIN
    SELECT RAISE(ABORT, 'a scope is never deleted: the change feed names it by its row');
END;
CREATE TABLE scope_config_clock (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    last INTEGER NOT NULL
) STRICT;
INSERT INTO scope_config_clock (id, last) SELECT 1, coalesce(max(id), 0) FROM scopes;
ALTER TABLE scopes ADD COLUMN config_version INTEGER NOT NULL DEFAULT 0;
UPDATE scopes SET config_version = id;
CREATE TRIGGER scopes_config_version_insert AFTER INSERT ON scopes
BEGIN
    UPDATE scope_config_clock SET last = last + 1;
    UPDATE scopes SET config_version = (SELECT last FROM scope_config_clock) WHERE id = NEW.id;
END;
CREATE TRIGGER scopes_config_version AFTER UPDATE OF provider, base_url, credentials, credential_type,
    idempotency_header, profile_spec, max_concurrent, rate_requests, rate_per_ms, limit_group, budget_reserve ON scopes
BEGIN
    UPDATE scope_config_clock SET last = last + 1;
    UPDATE scopes SET config_version = (SELECT last FROM scope_config_clock) WHERE id = NEW.id;
END;
`

// SchemaVersion is the schema version this binary writes and expects
// (PRAGMA user_version).
func SchemaVersion() int { return 1 + len(migrations()) }

// SchemaTooNewError is returned by Open for a database written by a newer
// pacer: Found is its version, Known the newest this binary knows.
type SchemaTooNewError struct {
	Found, Known int
}

// Error implements error.
func (e *SchemaTooNewError) Error() string {
	return fmt.Sprintf("database schema version %d is newer than this pacer binary knows (%d): run a newer pacer, or restore a backup taken before the upgrade", e.Found, e.Known)
}

// NotPacerError is returned for a database file that is not pacer's: Open,
// CheckFile and BackupFile refuse it rather than add pacer's tables to
// another application's data or report on it.
type NotPacerError struct {
	Path string
	// Why says what gave it away.
	Why string
}

// Error implements error.
func (e *NotPacerError) Error() string {
	return fmt.Sprintf("%s is not a pacer database (%s): check --db", e.Path, e.Why)
}

// ErrNoDatabase is returned when a command other than serve names a file
// that holds no pacer database yet: only serve creates one (the same error
// as pgstore's: stored.ErrNoDatabase).
var ErrNoDatabase = stored.ErrNoDatabase

// pacerTables are tables of every pacer schema version: a database with a
// user_version but without them belongs to another application.
var pacerTables = []string{"scopes", "operations", "attempts", "audit"}

// recognize reads the database's schema version and tells whether it is
// pacer's: version 0 with no schema at all is a new, empty database (new
// is true); version 0 with tables, or a version without pacer's tables, is
// another application's (*NotPacerError). It is the one definition of
// "this file is a pacer database".
func recognize(ctx context.Context, tx *sql.Tx, path string) (version int, isNew bool, err error) {
	if version, err = userVersion(ctx, tx); err != nil {
		return 0, false, err
	}
	var objects int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&objects); err != nil {
		return 0, false, fmt.Errorf("read schema: %w", err)
	}
	if version == 0 {
		if objects > 0 {
			return 0, false, &NotPacerError{Path: path, Why: fmt.Sprintf("it holds tables or indexes (%d) but no pacer schema version", objects)}
		}
		return 0, true, nil
	}
	for _, table := range pacerTables {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`, table).Scan(&n); err != nil {
			return 0, false, fmt.Errorf("read schema: %w", err)
		}
		if n == 0 {
			return 0, false, &NotPacerError{Path: path, Why: fmt.Sprintf("schema version %d but no table %q", version, table)}
		}
	}
	return version, false, nil
}

// migrate brings the database on conn up to SchemaVersion, one transaction
// per step: the schema when the database is new (only when create is
// true, else ErrNoDatabase), then each pending migration. It refuses
// another application's database (see recognize).
func migrate(ctx context.Context, conn *sql.DB, path string, create bool) error {
	steps := append([]string{schema}, migrations()...)
	for {
		done, err := migrateStep(ctx, conn, steps, path, create)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// migrateStep applies the next pending step, if any, and reports whether
// the database is current.
func migrateStep(ctx context.Context, conn *sql.DB, steps []string, path string, create bool) (done bool, err error) {
	tx, err := conn.BeginTx(ctx, nil) // immediate: no one else migrates at once
	if err != nil {
		return false, fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	version, isNew, err := recognize(ctx, tx, path)
	if err != nil {
		return false, err
	}
	switch {
	case isNew && !create:
		return false, fmt.Errorf("%s holds no pacer database yet: %w", path, ErrNoDatabase)
	case version > len(steps):
		return false, &SchemaTooNewError{Found: version, Known: len(steps)}
	case version == len(steps):
		return true, nil
	}
	if _, err := tx.ExecContext(ctx, steps[version]); err != nil {
		return false, fmt.Errorf("migrate to version %d: %w", version+1, err)
	}
	// PRAGMA takes no parameters; version is an int.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", version+1)); err != nil {
		return false, fmt.Errorf("migrate to version %d: %w", version+1, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migrate to version %d: %w", version+1, err)
	}
	return false, nil
}

// userVersion reads PRAGMA user_version.
func userVersion(ctx context.Context, tx *sql.Tx) (int, error) {
	var v int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}
