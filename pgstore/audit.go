package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

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
func insertAudit(ctx context.Context, tx pgx.Tx, a auditRow) error {
	var op *int64
	if a.opRowID != 0 {
		op = &a.opRowID
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO audit (operation_id, scope, action, actor, reason, at, detail)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		op, a.scope, a.action, a.act.Actor, a.act.Reason, millis(a.act.At), a.detail)
	if err != nil {
		return fmt.Errorf("record audit entry: %w", err)
	}
	return nil
}

// ListAudit returns the audit entries of an operation, oldest first; none
// for an unknown operation.
func (s *Store) ListAudit(ctx context.Context, operationID string) ([]scheduler.AuditEntry, error) {
	entries, err := s.findAudit(ctx, `
		SELECT a.id, o.operation_id, a.scope, a.action, a.actor, a.reason, a.at, a.detail
		FROM audit a JOIN operations o ON o.id = a.operation_id
		WHERE o.operation_id = $1 ORDER BY a.id`, operationID)
	if err != nil {
		return nil, fmt.Errorf("list audit of %s: %w", operationID, err)
	}
	return entries, nil
}

// ListScopeAudit returns the audit entries of a scope's own actions,
// oldest first; none for an unknown scope.
func (s *Store) ListScopeAudit(ctx context.Context, scope string) ([]scheduler.AuditEntry, error) {
	entries, err := s.findAudit(ctx, `
		SELECT a.id, '', a.scope, a.action, a.actor, a.reason, a.at, a.detail
		FROM audit a WHERE a.scope = $1 AND a.operation_id IS NULL ORDER BY a.id`, scope)
	if err != nil {
		return nil, fmt.Errorf("list audit of scope %s: %w", scope, err)
	}
	return entries, nil
}

// findAudit runs an audit query selecting the AuditEntry fields in order.
func (s *Store) findAudit(ctx context.Context, query string, args ...any) ([]scheduler.AuditEntry, error) {
	rows, err := s.pool.Query(ctx, query, args...)
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
