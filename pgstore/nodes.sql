-- Nodes (design §10): every process sharing the database registers a node
-- (a new id per start) and holds a session-level advisory lock on its id
-- for its lifetime (node.go); its claims stamp their lease with that id.
CREATE TABLE nodes (
    id         INTEGER GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    started_at BIGINT  NOT NULL,
    beat_at    BIGINT  NOT NULL,
    -- database time after which the node's leases may be recovered even
    -- while its lock is held (a node alive but cut off); 0 once it closed.
    expires_at BIGINT  NOT NULL,
    host       TEXT    NOT NULL DEFAULT '',
    pid        INTEGER NOT NULL DEFAULT 0
);

-- the node whose claim holds a running operation's lease.
ALTER TABLE operations ADD COLUMN lease_node INTEGER;
CREATE INDEX operations_running_node ON operations (lease_node) WHERE state = 'running';

-- elections: the node that runs a maintenance task that must run once
-- (retention), until expires_at (database time) unless it renews.
CREATE TABLE elections (
    task       TEXT    PRIMARY KEY,
    node       INTEGER NOT NULL,
    expires_at BIGINT  NOT NULL
);
