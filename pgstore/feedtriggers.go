package pgstore

// feedStatementTriggers is migration 5 (see migrations): the feed's rows
// (changes) are written by one trigger run per statement instead of one
// per row. The rows are the same: one per inserted operation, one per
// updated operation whose state changed, with its operation ID, scope,
// new state and updated_at, in the order the statement wrote the
// operations (a transition table is read in that order; the UPDATE's
// join keeps it by the new rows' ordinal). A row trigger ran a PL/pgSQL
// call and an INSERT per operation: about a third of the time of a
// claim's lease of 100 rows (docs/performance.md, issue 16). An UPDATE
// trigger with transition tables cannot name its columns (UPDATE OF
// state), so it runs for every UPDATE of operations and keeps only the
// rows whose state changed, as the row trigger's WHEN did.
const feedStatementTriggers = `
DROP TRIGGER operations_changes_insert ON operations;
DROP TRIGGER operations_changes_update ON operations;
DROP FUNCTION operations_change();

CREATE FUNCTION operations_changes_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO changes (operation_id, scope_id, state, at)
    SELECT operation_id, scope_id, state, updated_at FROM new_operations;
    RETURN NULL;
END;
$$;

CREATE FUNCTION operations_changes_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO changes (operation_id, scope_id, state, at)
    SELECT n.operation_id, n.scope_id, n.state, n.updated_at
    FROM (SELECT id, operation_id, scope_id, state, updated_at, row_number() OVER () AS k
          FROM new_operations) n
    JOIN old_operations o ON o.id = n.id
    WHERE n.state IS DISTINCT FROM o.state
    ORDER BY n.k;
    RETURN NULL;
END;
$$;

CREATE TRIGGER operations_changes_insert AFTER INSERT ON operations
    REFERENCING NEW TABLE AS new_operations
    FOR EACH STATEMENT EXECUTE FUNCTION operations_changes_inserted();
CREATE TRIGGER operations_changes_update AFTER UPDATE ON operations
    REFERENCING OLD TABLE AS old_operations NEW TABLE AS new_operations
    FOR EACH STATEMENT EXECUTE FUNCTION operations_changes_updated();
`
