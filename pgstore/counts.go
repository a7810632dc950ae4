package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"pacer/scheduler"
)

// CountByState counts operations by state (the states they report) and
// scopes by status at now, in one snapshot (see scheduler.Store).
func (s *Store) CountByState(ctx context.Context, now time.Time) (scheduler.Counts, error) {
	c := scheduler.Counts{Operations: map[scheduler.State]int{}, Scopes: map[scheduler.ScopeStatus]int{}}
	err := s.read(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+opState+`, COUNT(*)`+operationFrom+`GROUP BY 1`)
		if err != nil {
			return fmt.Errorf("count operations by state: %w", err)
		}
		for rows.Next() {
			var (
				state string
				n     int
			)
			if err := rows.Scan(&state, &n); err != nil {
				rows.Close()
				return fmt.Errorf("count operations by state: %w", err)
			}
			c.Operations[scheduler.State(state)] = n
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("count operations by state: %w", err)
		}
		rows, err = tx.Query(ctx, `SELECT s.hold_reason, `+scopePausedUntil+scopeFrom)
		if err != nil {
			return fmt.Errorf("count scopes by status: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var (
				sc        scheduler.Scope
				hold      *string
				pauseEnds int64
			)
			if err := rows.Scan(&hold, &pauseEnds); err != nil {
				return fmt.Errorf("count scopes by status: %w", err)
			}
			sc.HoldReason = scheduler.HoldReason(deref(hold))
			sc.PauseEnds = fromMillis(pauseEnds)
			c.Scopes[sc.Status(now)]++
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT COUNT(*) FROM scope_tokens WHERE expires_at > 0 AND expires_at <= $1`,
			millis(now.Add(scheduler.TokenExpiringWithin))).Scan(&c.TokensExpiring)
	})
	if err != nil {
		return scheduler.Counts{}, fmt.Errorf("count by state: %w", err)
	}
	return c, nil
}
