-- pacer schema, version 1. Applied in one transaction on a new database
-- (PRAGMA user_version = 0); later changes go in the migrations list in
-- migrate.go, never here.
--
-- Every time is INTEGER Unix milliseconds UTC. Tables are STRICT so a value
-- of the wrong type is an error, not a silent conversion.

-- scopes: one provider account with its configuration and admission state.
CREATE TABLE scopes (
    id                 INTEGER PRIMARY KEY,
    name               TEXT    NOT NULL UNIQUE CHECK (name <> ''),
    provider           TEXT    NOT NULL CHECK (provider <> ''),
    base_url           TEXT    NOT NULL,
    -- AES-256-GCM sealed JSON of the credentials; the scope name is the
    -- additional data, so a blob copied to another scope does not open.
    credentials        BLOB    NOT NULL,
    idempotency_header TEXT    NOT NULL DEFAULT '',
    -- JSON of providers.Spec: the declarative profile a 'custom' scope
    -- carries, and only such a scope.
    profile_spec       TEXT    CHECK (profile_spec IS NULL OR json_valid(profile_spec))
                               CHECK ((provider = 'custom') = (profile_spec IS NOT NULL)),
    max_concurrent     INTEGER NOT NULL CHECK (max_concurrent >= 1),
    -- configured rate: at most rate_requests sends in any window of
    -- rate_per_ms milliseconds; both NULL without one.
    rate_requests      INTEGER CHECK (rate_requests >= 1),
    rate_per_ms        INTEGER CHECK (rate_per_ms >= 1),
    hold_reason        TEXT    CHECK (hold_reason <> ''),
    paused_until       INTEGER NOT NULL DEFAULT 0,
    pause_reason       TEXT    NOT NULL DEFAULT '',
    budget_remaining   INTEGER,
    budget_limit       INTEGER,
    budget_reset_at    INTEGER,
    -- earliest time the next request of a rate-limited scope may leave
    -- (even spacing); 0 when it may leave at once.
    next_slot_at       INTEGER NOT NULL DEFAULT 0,
    -- scopes sharing a provider-wide limit (an app's or project's quota):
    -- a shared rate limit pauses every scope of the group. Defaults to the
    -- provider name.
    limit_group        TEXT    NOT NULL CHECK (limit_group <> ''),
    -- requests of the learned budget kept back: the scope pauses until the
    -- reset once remaining falls to this figure.
    budget_reserve     INTEGER NOT NULL DEFAULT 0 CHECK (budget_reserve >= 0),
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    CHECK ((rate_requests IS NULL) = (rate_per_ms IS NULL)),
    CHECK (budget_remaining IS NOT NULL OR (budget_limit IS NULL AND budget_reset_at IS NULL))
) STRICT;

CREATE INDEX scopes_limit_group ON scopes (limit_group);

-- operations: one business command and its life cycle (design §2). The
-- CHECKs tie each state to the columns it needs.
CREATE TABLE operations (
    id               INTEGER PRIMARY KEY,
    operation_id     TEXT    NOT NULL UNIQUE CHECK (operation_id <> ''),
    scope_id         INTEGER NOT NULL REFERENCES scopes (id),
    kind             TEXT    NOT NULL CHECK (kind IN ('read', 'mutation')),
    method           TEXT    NOT NULL CHECK (method <> ''),
    path             TEXT    NOT NULL CHECK (path LIKE '/%'),
    headers          TEXT    CHECK (headers IS NULL OR json_valid(headers)),
    body             BLOB,
    content_type     TEXT    NOT NULL DEFAULT '',
    request_identity TEXT    NOT NULL CHECK (request_identity <> ''),
    state            TEXT    NOT NULL CHECK (state IN ('scheduled', 'waitingForBudget', 'running', 'held', 'succeeded', 'failed', 'canceled')),
    -- attempt counts every attempt ever started; budget_attempts those of
    -- the current retry budget (reset by a release).
    attempt          INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    budget_attempts  INTEGER NOT NULL DEFAULT 0 CHECK (budget_attempts BETWEEN 0 AND attempt),
    next_attempt_at  INTEGER,
    hold_reason      TEXT    CHECK (hold_reason <> ''),
    failure_reason   TEXT    CHECK (failure_reason <> ''),
    -- JSON of scheduler.OutcomeSummary; NULL before the first attempt ends.
    last_outcome     TEXT    CHECK (last_outcome IS NULL OR json_valid(last_outcome)),
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    deadline         INTEGER NOT NULL,
    max_attempts     INTEGER NOT NULL CHECK (max_attempts >= 1),
    max_elapsed_ms   INTEGER NOT NULL CHECK (max_elapsed_ms >= 1),
    -- JSON of scheduler.Result; set on success.
    result           TEXT    CHECK (result IS NULL OR json_valid(result)),
    lease_token      INTEGER NOT NULL DEFAULT 0 CHECK (lease_token >= 0),
    lease_expires_at INTEGER,
    first_sent_at    INTEGER,
    content_hash     TEXT    NOT NULL,
    CHECK ((state = 'held') = (hold_reason IS NOT NULL)),
    CHECK ((state = 'failed') = (failure_reason IS NOT NULL)),
    CHECK ((state = 'running') = (lease_expires_at IS NOT NULL)),
    CHECK (state NOT IN ('scheduled', 'waitingForBudget') OR next_attempt_at IS NOT NULL),
    CHECK (state <> 'running' OR (first_sent_at IS NOT NULL AND lease_token >= 1 AND attempt >= 1))
) STRICT;

-- Due work per scope, oldest first: the claim and NextWake read only the
-- head of each scope's due rows, never the whole backlog.
CREATE INDEX operations_due ON operations (scope_id, next_attempt_at)
    WHERE state IN ('scheduled', 'waitingForBudget');
-- Running rows per scope: the in-flight count is derived from leases.
CREATE INDEX operations_running_scope ON operations (scope_id)
    WHERE state = 'running';
-- Running rows by lease expiry: recovery and NextWake.
CREATE INDEX operations_running_lease ON operations (lease_expires_at)
    WHERE state = 'running';
-- Listing newest first, unfiltered, by state and by scope.
CREATE INDEX operations_created ON operations (created_at, id);
CREATE INDEX operations_state_created ON operations (state, created_at, id);
CREATE INDEX operations_scope_created ON operations (scope_id, created_at, id);
-- Finished rows retention may remove, oldest first (PruneFinished): held
-- and failed rows are not in it, so they are never even looked at.
CREATE INDEX operations_finished ON operations (updated_at, id)
    WHERE state IN ('succeeded', 'canceled');
-- Listing by hold or failure reason: only held and failed rows have one
-- (at most one of the two, by the CHECKs above).
CREATE INDEX operations_reason_created ON operations (coalesce(hold_reason, failure_reason), created_at, id)
    WHERE coalesce(hold_reason, failure_reason) IS NOT NULL;
-- The support page's "needs attention" list, newest first, overall and per
-- scope: held and failed rows, which are exactly the rows with a reason
-- (the CHECKs above). Small, since only those rows are in them.
CREATE INDEX operations_attention ON operations (created_at, id)
    WHERE coalesce(hold_reason, failure_reason) IS NOT NULL;
CREATE INDEX operations_attention_scope ON operations (scope_id, created_at, id)
    WHERE coalesce(hold_reason, failure_reason) IS NOT NULL;

-- attempts: one send of an operation, written as an intent by the claim
-- and finished by the completion (or marked stale when fenced out).
CREATE TABLE attempts (
    operation_id  INTEGER NOT NULL REFERENCES operations (id),
    number        INTEGER NOT NULL CHECK (number >= 1),
    lease_token   INTEGER NOT NULL CHECK (lease_token >= 1),
    started_at    INTEGER NOT NULL,
    finished_at   INTEGER,
    class         TEXT    CHECK (class IN ('success', 'rateLimited', 'transient', 'permanent', 'authRevoked', 'unknownOutcome')),
    status        INTEGER,
    -- JSON of providers.Hint; NULL when the answer carried none.
    hint          TEXT    CHECK (hint IS NULL OR json_valid(hint)),
    reason        TEXT    NOT NULL DEFAULT '',
    detail        TEXT    NOT NULL DEFAULT '',
    decided_state TEXT    CHECK (decided_state IN ('scheduled', 'waitingForBudget', 'running', 'held', 'succeeded', 'failed', 'canceled')),
    -- the next attempt time decided; NULL for states that do not wait.
    decided_at    INTEGER,
    decision      TEXT    NOT NULL DEFAULT '',
    stale         INTEGER NOT NULL DEFAULT 0 CHECK (stale IN (0, 1)),
    PRIMARY KEY (operation_id, number),
    CHECK ((finished_at IS NULL) = (class IS NULL)),
    CHECK (finished_at IS NOT NULL OR decided_state IS NULL)
) STRICT, WITHOUT ROWID;

-- audit: every manual action, who, when and why.
CREATE TABLE audit (
    id           INTEGER PRIMARY KEY,
    operation_id INTEGER REFERENCES operations (id),
    scope        TEXT    NOT NULL,
    action       TEXT    NOT NULL CHECK (action <> ''),
    actor        TEXT    NOT NULL,
    reason       TEXT    NOT NULL,
    at           INTEGER NOT NULL,
    detail       TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX audit_operation ON audit (operation_id, id) WHERE operation_id IS NOT NULL;
CREATE INDEX audit_scope ON audit (scope, id);

-- changes: a feed of operation state changes in commit order, filled by
-- the triggers below (GET /v1/changes).
CREATE TABLE changes (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    operation_id TEXT    NOT NULL,
    scope        TEXT    NOT NULL,
    state        TEXT    NOT NULL,
    at           INTEGER NOT NULL
) STRICT;

-- The feed of one scope (GET /v1/changes?providerScope=…), in seq order.
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

-- users: staff accounts of the support page (pacer users add). The
-- password is stored only as a bcrypt hash.
CREATE TABLE users (
    id            INTEGER PRIMARY KEY,
    name          TEXT    NOT NULL UNIQUE CHECK (name <> ''),
    password_hash TEXT    NOT NULL CHECK (password_hash LIKE '$2%'),
    created_at    INTEGER NOT NULL
) STRICT;

-- sessions: signed-in staff. The cookie carries a random token; only its
-- SHA-256 is stored, so a copy of the database signs no one in. Removing
-- a user ends their sessions.
CREATE TABLE sessions (
    token_hash BLOB    PRIMARY KEY CHECK (length(token_hash) = 32),
    user_id    INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL CHECK (expires_at > created_at)
) STRICT, WITHOUT ROWID;

CREATE INDEX sessions_user ON sessions (user_id);
CREATE INDEX sessions_expires ON sessions (expires_at);
