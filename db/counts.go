package db

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"pacer/scheduler"
)

// CountByState counts operations by state and scopes by status at now (see
// scheduler.Store), in one read snapshot. The operation counts are the
// states operations report (opState): they come from the
// operations_state_created index without reading a row, and the scheduled
// rows held back by their scope from the due index. The scope statuses are
// decided by scheduler.Scope.Status from the admission columns only, so no
// credentials are decrypted.
func (db *DB) CountByState(ctx context.Context, now time.Time) (scheduler.Counts, error) {
	tx, err := db.beginRead(ctx)
	if err != nil {
		return scheduler.Counts{}, fmt.Errorf("count by state: %w", err)
	}
	defer tx.Rollback()
	c := scheduler.Counts{Operations: map[scheduler.State]int{}, Scopes: map[scheduler.ScopeStatus]int{}}
	rows, err := tx.QueryContext(ctx, `SELECT state, COUNT(*) FROM operations INDEXED BY operations_state_created GROUP BY state`)
	if err != nil {
		return scheduler.Counts{}, fmt.Errorf("count operations by state: %w", err)
	}
	for rows.Next() {
		var (
			state string
			n     int
		)
		if err := rows.Scan(&state, &n); err != nil {
			rows.Close()
			return scheduler.Counts{}, fmt.Errorf("count operations by state: %w", err)
		}
		c.Operations[scheduler.State(state)] = n
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return scheduler.Counts{}, fmt.Errorf("count operations by state: %w", err)
	}
	rows.Close()
	// Scheduled rows held back by their scope report waitingForBudget
	// (opState): move them over, reading only the due index entries of
	// each scope before its ready time.
	var heldBack int
	err = tx.QueryRowContext(ctx, `
		SELECT COUNT(*) FROM scopes s CROSS JOIN operations o INDEXED BY operations_due `+operationBudgetJoin+`
		WHERE o.scope_id = s.id AND o.state IN `+dueStates+` AND o.state = 'scheduled' AND `+opHeldBackByScope).Scan(&heldBack)
	if err != nil {
		return scheduler.Counts{}, fmt.Errorf("count operations held back by their scope: %w", err)
	}
	if heldBack > 0 {
		c.Operations[scheduler.StateScheduled] -= heldBack
		c.Operations[scheduler.StateWaitingForBudget] += heldBack
		if c.Operations[scheduler.StateScheduled] == 0 {
			delete(c.Operations, scheduler.StateScheduled)
		}
	}

	rows, err = tx.QueryContext(ctx, `SELECT s.hold_reason, `+scopePausedUntil+scopeFrom)
	if err != nil {
		return scheduler.Counts{}, fmt.Errorf("count scopes by status: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			s         scheduler.Scope
			hold      sql.NullString
			pauseEnds int64
		)
		if err := rows.Scan(&hold, &pauseEnds); err != nil {
			return scheduler.Counts{}, fmt.Errorf("count scopes by status: %w", err)
		}
		s.HoldReason = scheduler.HoldReason(hold.String)
		s.PauseEnds = fromMillis(pauseEnds)
		c.Scopes[s.Status(now)]++
	}
	if err := rows.Err(); err != nil {
		return scheduler.Counts{}, fmt.Errorf("count scopes by status: %w", err)
	}
	err = tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM scope_tokens WHERE expires_at > 0 AND expires_at <= ?`,
		millis(now.Add(scheduler.TokenExpiringWithin))).Scan(&c.TokensExpiring)
	if err != nil {
		return scheduler.Counts{}, fmt.Errorf("count expiring tokens: %w", err)
	}
	return c, nil
}

// Ping checks that the database answers a query on the read pool: for
// readiness probes. It does not wait for the writer.
func (db *DB) Ping(ctx context.Context) error {
	var n int
	if err := db.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM scopes WHERE 0`).Scan(&n); err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	return nil
}
