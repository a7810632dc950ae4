package db

import (
	"context"
	"database/sql"
	"fmt"

	"pacer/scheduler"
)

// auditRow is one action to record.
type auditRow struct {
	opRowID int64 // 0 for scope actions
	scope   string
	action  string
	act     scheduler.Action
	detail  string
}

// insertAudit records one manual action.
func insertAudit(ctx context.Context, tx *sql.Tx, a auditRow) error {
	var op sql.NullInt64
	if a.opRowID != 0 {
		op = sql.NullInt64{Int64: a.opRowID, Valid: true}
	}
	_, err := tx.ExecContext(ctx, `
		INSERT INTO audit (operation_id, scope, action, actor, reason, at, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?)`,
		op, a.scope, a.action, a.act.Actor, a.act.Reason, millis(a.act.At), a.detail)
	if err != nil {
		return fmt.Errorf("record audit entry: %w", err)
	}
	return nil
}

// ListAudit returns the audit entries of an operation, oldest first; none
// for an unknown operation.
func (db *DB) ListAudit(ctx context.Context, operationID string) ([]scheduler.AuditEntry, error) {
	tx, err := db.beginRead(ctx)
	if err != nil {
		return nil, fmt.Errorf("list audit of %s: %w", operationID, err)
	}
	defer tx.Rollback()
	entries, err := findAudit(ctx, tx, `
		SELECT a.id, o.operation_id, a.scope, a.action, a.actor, a.reason, a.at, a.detail
		FROM audit a JOIN operations o ON o.id = a.operation_id
		WHERE o.operation_id = ? ORDER BY a.id`, operationID)
	if err != nil {
		return nil, fmt.Errorf("list audit of %s: %w", operationID, err)
	}
	return entries, nil
}

// ListScopeAudit returns the audit entries of a scope's own actions
// (putScope, resume), oldest first; none for an unknown scope.
func (db *DB) ListScopeAudit(ctx context.Context, scope string) ([]scheduler.AuditEntry, error) {
	tx, err := db.beginRead(ctx)
	if err != nil {
		return nil, fmt.Errorf("list audit of scope %s: %w", scope, err)
	}
	defer tx.Rollback()
	entries, err := findAudit(ctx, tx, `
		SELECT a.id, '', a.scope, a.action, a.actor, a.reason, a.at, a.detail
		FROM audit a WHERE a.scope = ? AND a.operation_id IS NULL ORDER BY a.id`, scope)
	if err != nil {
		return nil, fmt.Errorf("list audit of scope %s: %w", scope, err)
	}
	return entries, nil
}

// findAudit runs an audit query selecting the AuditEntry fields in order.
func findAudit(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]scheduler.AuditEntry, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []scheduler.AuditEntry
	for rows.Next() {
		var (
			e  scheduler.AuditEntry
			at int64
		)
		if err := rows.Scan(&e.ID, &e.OperationID, &e.Scope, &e.Action, &e.Actor, &e.Reason, &at, &e.Detail); err != nil {
			return nil, err
		}
		e.At = fromMillis(at)
		out = append(out, e)
	}
	return out, rows.Err()
}
