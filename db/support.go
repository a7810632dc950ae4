package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"pacer/scheduler"
)

// CountOperations counts the operations ListOperations would list for f
// over all its pages (f.Limit and f.Cursor are ignored). It reads the same
// indexes as the listing, and each counted row's scope (by primary key)
// when the states asked for depend on it.
func (db *DB) CountOperations(ctx context.Context, f scheduler.OperationFilter) (int, error) {
	tx, err := db.beginRead(ctx)
	if err != nil {
		return 0, fmt.Errorf("count operations: %w", err)
	}
	defer tx.Rollback()
	where, args, none, err := operationFilter(ctx, tx, f)
	if err != nil {
		return 0, fmt.Errorf("count operations: %w", err)
	}
	if none {
		return 0, nil
	}
	query := `SELECT COUNT(*) FROM operations o`
	if slices.ContainsFunc(where, func(w string) bool { return strings.Contains(w, opState) }) {
		query = `SELECT COUNT(*)` + operationFrom // the state reported depends on the scope
	}
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	var n int
	if err := tx.QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count operations: %w", err)
	}
	return n, nil
}

// ReleaseHeldInScope releases every held operation of the scope at `at`
// in one transaction (see scheduler.Store): each moves to scheduled with
// the same request identity and a fresh retry budget (deadline at plus its
// own maximum elapsed time) and gets a "release" audit entry; the scope
// gets one "releaseHeld" entry saying how many. The scope's own hold or
// pause is left alone. ErrNotFound (wrapped) for an unknown scope.
func (db *DB) ReleaseHeldInScope(ctx context.Context, scope string, at time.Time, act scheduler.Action) (int, error) {
	tx, err := db.beginWrite(ctx)
	if err != nil {
		return 0, fmt.Errorf("release held operations of %s: %w", scope, err)
	}
	defer tx.Rollback()
	n, err := releaseHeldInScope(ctx, tx, scope, at, act)
	if err != nil {
		return 0, fmt.Errorf("release held operations of %s: %w", scope, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("release held operations of %s: %w", scope, err)
	}
	return n, nil
}

func releaseHeldInScope(ctx context.Context, tx *sql.Tx, scope string, at time.Time, act scheduler.Action) (int, error) {
	var scopeID int64
	err := tx.QueryRowContext(ctx, `SELECT id FROM scopes WHERE name = ?`, scope).Scan(&scopeID)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, scheduler.ErrNotFound
	} else if err != nil {
		return 0, err
	}
	// The audit entries first, while the rows still say why they were held
	// (the same detail ReleaseOperation writes).
	_, err = tx.ExecContext(ctx, `
		INSERT INTO audit (operation_id, scope, action, actor, reason, at, detail)
		SELECT o.id, ?, 'release', ?, ?, ?, 'held (' || o.hold_reason || ') → scheduled at ' || ?
		FROM operations o WHERE o.scope_id = ? AND o.state = 'held'
		ORDER BY o.id`,
		scope, act.Actor, act.Reason, millis(act.At), at.UTC().Format(time.RFC3339), scopeID)
	if err != nil {
		return 0, fmt.Errorf("record audit entries: %w", err)
	}
	res, err := tx.ExecContext(ctx, `
		UPDATE operations SET state = 'scheduled', next_attempt_at = ?, hold_reason = NULL,
			failure_reason = NULL, budget_attempts = 0, updated_at = ?,
			deadline = ? + (SELECT r.max_elapsed_ms FROM operation_requests r WHERE r.id = operations.id)
		WHERE scope_id = ? AND state = 'held'`,
		millis(at), millis(act.At), millis(at), scopeID)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	detail := fmt.Sprintf("released %d held operations to run at %s", n, at.UTC().Format(time.RFC3339))
	if err := insertAudit(ctx, tx, auditRow{scope: scope, action: "releaseHeld", act: act, detail: detail}); err != nil {
		return 0, err
	}
	return int(n), nil
}
