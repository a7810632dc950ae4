-- pacer schema on PostgreSQL, version 1: what the SQLite schema holds at
-- its version 11, in PostgreSQL's types. Applied in one transaction to a
-- new database (migrate.go); later changes go in the migrations list
-- there, never here.
--
-- Every time is BIGINT Unix milliseconds UTC, as on SQLite, so that the
-- admission rule reads the same in both stores.

-- pacer_schema: the schema version (one row).
CREATE TABLE pacer_schema (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);

-- scopes: one provider account with its configuration and admission state.
CREATE TABLE scopes (
    id                 BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name               TEXT    NOT NULL UNIQUE CHECK (name <> ''),
    provider           TEXT    NOT NULL CHECK (provider <> ''),
    base_url           TEXT    NOT NULL,
    -- AES-256-GCM sealed JSON of the credentials (package stored); the
    -- scope name is the additional data.
    credentials        BYTEA   NOT NULL,
    credential_type    TEXT    NOT NULL,
    idempotency_header TEXT    NOT NULL DEFAULT '',
    -- JSON of providers.Spec (package stored), only for a 'custom' scope.
    profile_spec       TEXT    CHECK ((provider = 'custom') = (profile_spec IS NOT NULL)),
    max_concurrent     INTEGER NOT NULL CHECK (max_concurrent >= 1),
    rate_requests      INTEGER CHECK (rate_requests >= 1),
    rate_per_ms        BIGINT  CHECK (rate_per_ms >= 1),
    hold_reason        TEXT    CHECK (hold_reason <> ''),
    paused_until       BIGINT  NOT NULL DEFAULT 0,
    pause_reason       TEXT    NOT NULL DEFAULT '',
    -- earliest time the next request of a rate-limited scope may leave.
    next_slot_at       BIGINT  NOT NULL DEFAULT 0,
    limit_group        TEXT    NOT NULL CHECK (limit_group <> ''),
    budget_reserve     BIGINT  NOT NULL DEFAULT 0 CHECK (budget_reserve >= 0),
    created_at         BIGINT  NOT NULL,
    updated_at         BIGINT  NOT NULL,
    CHECK ((rate_requests IS NULL) = (rate_per_ms IS NULL))
);

CREATE INDEX scopes_limit_group ON scopes (limit_group);

-- scope_budgets: one learned budget per resource the provider names;
-- resource '' is the default budget, which every scope has (PutScope
-- writes it with the scope).
CREATE TABLE scope_budgets (
    scope_id     BIGINT NOT NULL REFERENCES scopes (id),
    resource     TEXT   NOT NULL,
    remaining    BIGINT,
    "limit"      BIGINT,
    reset_at     BIGINT,
    paused_until BIGINT NOT NULL DEFAULT 0,
    pause_reason TEXT   NOT NULL DEFAULT '',
    next_slot_at BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (scope_id, resource),
    CHECK (remaining IS NOT NULL OR ("limit" IS NULL AND reset_at IS NULL))
);

-- scope_routes: the resource the provider named for a request's route.
CREATE TABLE scope_routes (
    scope_id   BIGINT  NOT NULL REFERENCES scopes (id),
    route      TEXT    NOT NULL CHECK (route <> ''),
    resource   TEXT    NOT NULL,
    exception  BOOLEAN NOT NULL,
    learned_at BIGINT  NOT NULL,
    PRIMARY KEY (scope_id, route)
);

-- operations: one business command and its life cycle (design §2).
CREATE TABLE operations (
    id                   BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    operation_id         TEXT    NOT NULL UNIQUE CHECK (operation_id <> ''),
    scope_id             BIGINT  NOT NULL REFERENCES scopes (id),
    kind                 TEXT    NOT NULL CHECK (kind IN ('read', 'mutation')),
    method               TEXT    NOT NULL CHECK (method <> ''),
    path                 TEXT    NOT NULL CHECK (path LIKE '/%'),
    headers              TEXT,
    body                 BYTEA,
    content_type         TEXT    NOT NULL DEFAULT '',
    request_identity     TEXT    NOT NULL CHECK (request_identity <> ''),
    state                TEXT    NOT NULL CHECK (state IN ('scheduled', 'waitingForBudget', 'running', 'held', 'succeeded', 'failed', 'canceled')),
    attempt              INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    budget_attempts      INTEGER NOT NULL DEFAULT 0 CHECK (budget_attempts BETWEEN 0 AND attempt),
    next_attempt_at      BIGINT,
    hold_reason          TEXT    CHECK (hold_reason <> ''),
    failure_reason       TEXT    CHECK (failure_reason <> ''),
    last_outcome         TEXT,
    last_response        TEXT,
    created_at           BIGINT  NOT NULL,
    updated_at           BIGINT  NOT NULL,
    deadline             BIGINT  NOT NULL,
    max_attempts         INTEGER NOT NULL CHECK (max_attempts >= 1),
    max_elapsed_ms       BIGINT  NOT NULL CHECK (max_elapsed_ms >= 1),
    result               TEXT,
    lease_token          BIGINT  NOT NULL DEFAULT 0 CHECK (lease_token >= 0),
    lease_expires_at     BIGINT,
    first_sent_at        BIGINT,
    content_hash         TEXT    NOT NULL,
    maybe_applied        BOOLEAN NOT NULL DEFAULT false,
    resource             TEXT    NOT NULL DEFAULT '',
    released_from_state  TEXT    CHECK (released_from_state IN ('held', 'failed')),
    released_from_reason TEXT,
    CHECK ((state = 'held') = (hold_reason IS NOT NULL)),
    CHECK ((state = 'failed') = (failure_reason IS NOT NULL)),
    CHECK ((state = 'running') = (lease_expires_at IS NOT NULL)),
    CHECK (state NOT IN ('scheduled', 'waitingForBudget') OR next_attempt_at IS NOT NULL),
    CHECK (state <> 'running' OR (first_sent_at IS NOT NULL AND lease_token >= 1 AND attempt >= 1))
);

CREATE INDEX operations_due ON operations (scope_id, resource, next_attempt_at, id)
    WHERE state IN ('scheduled', 'waitingForBudget');
CREATE INDEX operations_running ON operations (scope_id, lease_expires_at) WHERE state = 'running';
CREATE INDEX operations_running_lease ON operations (lease_expires_at, id) WHERE state = 'running';
CREATE INDEX operations_waiting_deadline ON operations (deadline, id)
    WHERE state IN ('scheduled', 'waitingForBudget');
CREATE INDEX operations_identity ON operations (request_identity, scope_id);
CREATE INDEX operations_created ON operations (created_at, id);
CREATE INDEX operations_state_created ON operations (state, created_at, id);
CREATE INDEX operations_scope_created ON operations (scope_id, created_at, id);
CREATE INDEX operations_finished ON operations (updated_at, id) WHERE state IN ('succeeded', 'canceled');
CREATE INDEX operations_reason_created ON operations ((coalesce(hold_reason, failure_reason)), created_at, id)
    WHERE coalesce(hold_reason, failure_reason) IS NOT NULL;
-- FindOperations: a range of IDs in bytewise order, whatever the collation.
CREATE INDEX operations_operation_id_c ON operations ((operation_id COLLATE "C"));

-- attempts: one send of an operation, written as an intent by the claim
-- and finished by the completion (or marked stale when fenced out).
CREATE TABLE attempts (
    operation_id  BIGINT  NOT NULL REFERENCES operations (id),
    number        INTEGER NOT NULL CHECK (number >= 1),
    lease_token   BIGINT  NOT NULL CHECK (lease_token >= 1),
    started_at    BIGINT  NOT NULL,
    finished_at   BIGINT,
    class         TEXT    CHECK (class IN ('success', 'rateLimited', 'transient', 'permanent', 'authRevoked', 'unknownOutcome')),
    status        INTEGER,
    hint          TEXT,
    reason        TEXT    NOT NULL DEFAULT '',
    detail        TEXT    NOT NULL DEFAULT '',
    response      TEXT,
    decided_state TEXT    CHECK (decided_state IN ('scheduled', 'waitingForBudget', 'running', 'held', 'succeeded', 'failed', 'canceled')),
    decided_at    BIGINT,
    decision      TEXT    NOT NULL DEFAULT '',
    stale         BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (operation_id, number),
    CHECK ((finished_at IS NULL) = (class IS NULL)),
    CHECK (finished_at IS NOT NULL OR decided_state IS NULL)
);

-- audit: every manual action, who, when and why.
CREATE TABLE audit (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    operation_id BIGINT REFERENCES operations (id),
    scope        TEXT   NOT NULL,
    action       TEXT   NOT NULL CHECK (action <> ''),
    actor        TEXT   NOT NULL,
    reason       TEXT   NOT NULL,
    at           BIGINT NOT NULL,
    detail       TEXT   NOT NULL DEFAULT ''
);

CREATE INDEX audit_operation ON audit (operation_id, id) WHERE operation_id IS NOT NULL;
CREATE INDEX audit_scope ON audit (scope, id);

-- changes: the feed of operation state changes (GET /v1/changes), filled
-- by the triggers below. Several processes write at once, so a row's
-- place in the feed is not known when it is written: it gets its seq from
-- the sequencer once its transaction committed (changes.go); readers read
-- only rows with a seq.
CREATE TABLE changes (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    seq          BIGINT UNIQUE,
    operation_id TEXT   NOT NULL,
    scope_id     BIGINT NOT NULL REFERENCES scopes (id),
    state        TEXT   NOT NULL,
    at           BIGINT NOT NULL
);

CREATE INDEX changes_unsequenced ON changes (id) WHERE seq IS NULL;

-- change_seq: the newest seq the sequencer assigned (one row); seq values
-- are never reused, even after retention removes the rows.
CREATE TABLE change_seq (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    last BIGINT  NOT NULL
);
INSERT INTO change_seq (id, last) VALUES (1, 0);

CREATE FUNCTION operations_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO changes (operation_id, scope_id, state, at)
    VALUES (NEW.operation_id, NEW.scope_id, NEW.state, NEW.updated_at);
    RETURN NULL;
END;
$$;

CREATE TRIGGER operations_changes_insert AFTER INSERT ON operations
    FOR EACH ROW EXECUTE FUNCTION operations_change();
CREATE TRIGGER operations_changes_update AFTER UPDATE OF state ON operations
    FOR EACH ROW WHEN (NEW.state IS DISTINCT FROM OLD.state) EXECUTE FUNCTION operations_change();
