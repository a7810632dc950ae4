package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"pacer/internal/stored"
	"pacer/providers"
	"pacer/scheduler"
)

// ListAttempts returns the operation's attempts, oldest first, or
// ErrNotFound when the operation does not exist.
func (s *Store) ListAttempts(ctx context.Context, id string) ([]scheduler.Attempt, error) {
	var out []scheduler.Attempt
	err := s.read(ctx, func(tx pgx.Tx) error {
		var rowID int64
		if err := tx.QueryRow(ctx, `SELECT id FROM operations WHERE operation_id = $1`, id).Scan(&rowID); errors.Is(err, pgx.ErrNoRows) {
			return scheduler.ErrNotFound
		} else if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
			SELECT number, lease_token, started_at, finished_at, class, status, hint, reason, detail, response,
				decided_state, decided_at, decision, stale
			FROM attempts WHERE operation_id = $1 ORDER BY number`, rowID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				a                     = scheduler.Attempt{OperationID: id}
				startedAt             int64
				finishedAt, decidedAt *int64
				class, decided, hint  *string
				response              *string
				status                *int64
			)
			err := rows.Scan(&a.Number, &a.LeaseToken, &startedAt, &finishedAt, &class, &status, &hint, &a.Reason, &a.Detail, &response,
				&decided, &decidedAt, &a.Decision, &a.Stale)
			if err != nil {
				return err
			}
			a.StartedAt = fromMillis(startedAt)
			a.FinishedAt = fromNullMillis(finishedAt)
			a.Class = providers.Class(deref(class))
			a.Status = int(deref(status))
			a.DecidedState = scheduler.State(deref(decided))
			a.DecidedAt = fromNullMillis(decidedAt)
			if a.Hint, err = stored.DecodeHint(sqlString(hint)); err != nil {
				return fmt.Errorf("attempt %d: stored hint: %w", a.Number, err)
			}
			if a.Response, err = stored.DecodeResult(sqlString(response)); err != nil {
				return fmt.Errorf("attempt %d: stored response: %w", a.Number, err)
			}
			out = append(out, a)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("list attempts of %s: %w", id, err)
	}
	return out, nil
}
