package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"pacer/scheduler"
)

// ExpireOverdue ends up to p.Limit waiting operations whose deadline is
// before p.Before, earliest first, each as p.Decide says (held or
// failed), in one transaction (see scheduler.Store), as the SQLite store
// does. It first reads the earliest waiting deadline and writes nothing
// when none is overdue. The overdue rows are locked (FOR UPDATE SKIP
// LOCKED: one a claim or a person holds is left to them), and each update
// is fenced by the row's lease token as read.
func (s *Store) ExpireOverdue(ctx context.Context, p scheduler.ExpireParams) (scheduler.ExpireResult, error) {
	if p.Limit < 1 || p.Decide == nil {
		return scheduler.ExpireResult{}, fmt.Errorf("expire overdue operations: need a limit of at least 1 and a decision")
	}
	var next time.Time
	err := s.read(ctx, func(tx pgx.Tx) error {
		var err error
		next, err = earliestDeadline(ctx, tx)
		return err
	})
	if err != nil {
		return scheduler.ExpireResult{}, fmt.Errorf("expire overdue operations: %w", err)
	}
	if next.IsZero() || !next.Before(p.Before) {
		return scheduler.ExpireResult{Next: next}, nil
	}
	var res scheduler.ExpireResult
	err = s.write(ctx, func(tx pgx.Tx) error {
		var err error
		res, err = expireOverdue(ctx, tx, p)
		return err
	})
	if err != nil {
		return scheduler.ExpireResult{}, fmt.Errorf("expire overdue operations: %w", err)
	}
	return res, nil
}

func expireOverdue(ctx context.Context, tx pgx.Tx, p scheduler.ExpireParams) (scheduler.ExpireResult, error) {
	rows, err := tx.Query(ctx, `SELECT `+operationColumns+operationFrom+`
		WHERE o.state IN `+dueStates+` AND o.deadline < $1
		ORDER BY o.deadline, o.id
		LIMIT $2
		FOR UPDATE OF o SKIP LOCKED`, millis(p.Before), p.Limit)
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
	if err := rows.Err(); err != nil {
		return scheduler.ExpireResult{}, err
	}
	for _, r := range overdue {
		d := p.Decide(r.Operation)
		var hold, failure *string
		switch {
		case d.State == scheduler.StateHeld && d.HoldReason != "":
			hold = nullString(string(d.HoldReason))
		case d.State == scheduler.StateFailed && d.FailureReason != "":
			failure = nullString(string(d.FailureReason))
		default:
			return scheduler.ExpireResult{}, fmt.Errorf("%w: an overdue operation (%s) can only end held or failed with a reason, not %s", scheduler.ErrInvalidTransition, r.ID, d.State)
		}
		if _, err := tx.Exec(ctx, `
			UPDATE operations SET state = $1, hold_reason = $2, failure_reason = $3, next_attempt_at = NULL, updated_at = $4
			WHERE id = $5 AND state IN `+dueStates+` AND lease_token = $6`,
			string(d.State), hold, failure, millis(p.Now), r.id, r.LeaseToken); err != nil {
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
func earliestDeadline(ctx context.Context, tx pgx.Tx) (time.Time, error) {
	var at *int64
	if err := tx.QueryRow(ctx, `SELECT MIN(deadline) FROM operations WHERE state IN `+dueStates).Scan(&at); err != nil {
		return time.Time{}, fmt.Errorf("find the earliest waiting deadline: %w", err)
	}
	return fromNullMillis(at), nil
}
