package db

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"pacer/scheduler"
)

// overdueOperations selects the waiting operations whose deadline is before
// ?1, earliest deadline first, at most ?2, from the waiting-deadline
// partial index: the rest of the backlog is never read.
const overdueOperations = `SELECT ` + operationColumns + `
	FROM operations o INDEXED BY operations_waiting_deadline JOIN scopes s ON s.id = o.scope_id ` + operationJoins + operationBudgetJoin + `
	WHERE o.state IN ('scheduled', 'waitingForBudget') AND o.deadline < ?1
	ORDER BY o.deadline, o.id
	LIMIT ?2`

// earliestWaitingDeadline is the earliest deadline of a waiting operation,
// NULL when none waits: one entry of the waiting-deadline index.
const earliestWaitingDeadline = `SELECT MIN(deadline) FROM operations INDEXED BY operations_waiting_deadline
	WHERE state IN ('scheduled', 'waitingForBudget')`

// ExpireOverdue ends up to p.Limit waiting operations whose deadline is
// before p.Before, earliest first, each as p.Decide says (held or failed),
// in one transaction (see scheduler.Store). It first reads the earliest
// waiting deadline and writes nothing when none is overdue, so a pass with
// nothing to do costs one index read and no write transaction. The state
// change reaches the change feed through its trigger.
func (db *DB) ExpireOverdue(ctx context.Context, p scheduler.ExpireParams) (scheduler.ExpireResult, error) {
	if p.Limit < 1 || p.Decide == nil {
		return scheduler.ExpireResult{}, fmt.Errorf("expire overdue operations: need a limit of at least 1 and a decision")
	}
	rtx, err := db.beginRead(ctx)
	if err != nil {
		return scheduler.ExpireResult{}, fmt.Errorf("expire overdue operations: %w", err)
	}
	next, err := earliestDeadline(ctx, rtx)
	rtx.Rollback()
	if err != nil {
		return scheduler.ExpireResult{}, fmt.Errorf("expire overdue operations: %w", err)
	}
	if next.IsZero() || !next.Before(p.Before) {
		return scheduler.ExpireResult{Next: next}, nil
	}

	tx, err := db.beginWrite(ctx)
	if err != nil {
		return scheduler.ExpireResult{}, fmt.Errorf("expire overdue operations: %w", err)
	}
	defer tx.Rollback()
	res, err := expireOverdue(ctx, tx, p)
	if err != nil {
		return scheduler.ExpireResult{}, fmt.Errorf("expire overdue operations: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return scheduler.ExpireResult{}, fmt.Errorf("expire overdue operations: %w", err)
	}
	return res, nil
}

func expireOverdue(ctx context.Context, tx *sql.Tx, p scheduler.ExpireParams) (scheduler.ExpireResult, error) {
	rows, err := tx.QueryContext(ctx, overdueOperations, millis(p.Before), p.Limit)
	if err != nil {
		return scheduler.ExpireResult{}, err
	}
	var overdue []opRow
	for rows.Next() {
		r, err := scanOperation(rows)
		if err != nil {
			rows.Close()
			return scheduler.ExpireResult{}, err
		}
		overdue = append(overdue, r)
	}
	if err := rows.Close(); err != nil {
		return scheduler.ExpireResult{}, err
	}
	if err := rows.Err(); err != nil {
		return scheduler.ExpireResult{}, err
	}
	for _, r := range overdue {
		d := p.Decide(r.Operation)
		var hold, failure sql.NullString
		switch {
		case d.State == scheduler.StateHeld && d.HoldReason != "":
			hold = nullString(string(d.HoldReason))
		case d.State == scheduler.StateFailed && d.FailureReason != "":
			failure = nullString(string(d.FailureReason))
		default:
			return scheduler.ExpireResult{}, fmt.Errorf("%w: an overdue operation (%s) can only end held or failed with a reason, not %s", scheduler.ErrInvalidTransition, r.ID, d.State)
		}
		// The lease token fences the row as read: it cannot have run since.
		_, err := tx.ExecContext(ctx, `
			UPDATE operations SET state = ?, hold_reason = ?, failure_reason = ?, next_attempt_at = NULL, updated_at = ?
			WHERE id = ? AND +state IN ('scheduled', 'waitingForBudget') AND lease_token = ?`,
			string(d.State), hold, failure, millis(p.Now), r.id, r.LeaseToken)
		if err != nil {
			return scheduler.ExpireResult{}, fmt.Errorf("expire %s: %w", r.ID, err)
		}
	}
	next, err := earliestDeadline(ctx, tx)
	if err != nil {
		return scheduler.ExpireResult{}, err
	}
	return scheduler.ExpireResult{Expired: len(overdue), More: len(overdue) == p.Limit, Next: next}, nil
}

// earliestDeadline is the earliest deadline of a waiting operation; zero
// when none waits.
func earliestDeadline(ctx context.Context, tx *sql.Tx) (time.Time, error) {
	var at sql.NullInt64
	if err := tx.QueryRowContext(ctx, earliestWaitingDeadline).Scan(&at); err != nil {
		return time.Time{}, fmt.Errorf("find the earliest waiting deadline: %w", err)
	}
	return fromNullMillis(at), nil
}
