package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"pacer/providers"
	"pacer/scheduler"
)

// ListAttempts returns the operation's attempts, oldest first, or
// ErrNotFound when the operation does not exist.
func (db *DB) ListAttempts(ctx context.Context, id string) ([]scheduler.Attempt, error) {
	tx, err := db.beginRead(ctx)
	if err != nil {
		return nil, fmt.Errorf("list attempts of %s: %w", id, err)
	}
	defer tx.Rollback()
	attempts, err := listAttempts(ctx, tx, id)
	if err != nil {
		return nil, fmt.Errorf("list attempts of %s: %w", id, err)
	}
	return attempts, nil
}

func listAttempts(ctx context.Context, tx *sql.Tx, id string) ([]scheduler.Attempt, error) {
	var rowID int64
	if err := tx.QueryRowContext(ctx, `SELECT id FROM operations WHERE operation_id = ?`, id).Scan(&rowID); errors.Is(err, sql.ErrNoRows) {
		return nil, scheduler.ErrNotFound
	} else if err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `
		SELECT number, lease_token, started_at, finished_at, class, status, hint, reason, detail, response,
			decided_state, decided_at, decision, stale
		FROM attempts WHERE operation_id = ? ORDER BY number`, rowID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []scheduler.Attempt
	for rows.Next() {
		var (
			a                     = scheduler.Attempt{OperationID: id}
			startedAt             int64
			finishedAt, decidedAt sql.NullInt64
			class, decided, hint  sql.NullString
			response              sql.NullString
			status                sql.NullInt64
		)
		err := rows.Scan(&a.Number, &a.LeaseToken, &startedAt, &finishedAt, &class, &status, &hint, &a.Reason, &a.Detail, &response,
			&decided, &decidedAt, &a.Decision, &a.Stale)
		if err != nil {
			return nil, err
		}
		a.StartedAt = fromMillis(startedAt)
		a.FinishedAt = fromNullMillis(finishedAt)
		a.Class = providers.Class(class.String)
		a.Status = int(status.Int64)
		a.DecidedState = scheduler.State(decided.String)
		a.DecidedAt = fromNullMillis(decidedAt)
		if a.Hint, err = decodeHint(hint); err != nil {
			return nil, fmt.Errorf("attempt %d: stored hint: %w", a.Number, err)
		}
		if a.Response, err = decodeResult(response); err != nil {
			return nil, fmt.Errorf("attempt %d: stored response: %w", a.Number, err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}
