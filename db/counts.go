package db

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// CountByState counts operations by state and scopes by status at now (see
// scheduler.Store), in one read snapshot. The operation counts come from
// the operations_state_created index without reading a row; the scope
// statuses are decided by scheduler.Scope.Status from the admission
// columns only, so no credentials are decrypted.
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

	rows, err = tx.QueryContext(ctx, `
		SELECT hold_reason, paused_until, pause_reason, budget_remaining, budget_reset_at, budget_reserve
		FROM scopes`)
	if err != nil {
		return scheduler.Counts{}, fmt.Errorf("count scopes by status: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			s                  scheduler.Scope
			hold               sql.NullString
			pausedUntil        int64
			remaining, resetAt sql.NullInt64
		)
		if err := rows.Scan(&hold, &pausedUntil, &s.PauseReason, &remaining, &resetAt, &s.BudgetReserve); err != nil {
			return scheduler.Counts{}, fmt.Errorf("count scopes by status: %w", err)
		}
		s.HoldReason = scheduler.HoldReason(hold.String)
		s.PausedUntil = fromMillis(pausedUntil)
		if remaining.Valid {
			s.Budget = &providers.Budget{Remaining: remaining.Int64, ResetAt: fromNullMillis(resetAt)}
		}
		c.Scopes[s.Status(now)]++
	}
	if err := rows.Err(); err != nil {
		return scheduler.Counts{}, fmt.Errorf("count scopes by status: %w", err)
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
