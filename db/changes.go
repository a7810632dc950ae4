package db

import (
	"context"
	"fmt"

	"pacer/scheduler"
)

// ListChanges returns up to f.Limit changes with seq > f.After (of
// f.Scope only, when set), in seq order; a Limit outside
// 1..scheduler.MaxChangeLimit is clamped.
//
// The triggers on operations fill the changes table inside the writing
// transaction, and every write goes through the single writer connection,
// so seq values become visible in order: a reader that sees seq N has seen
// every change below N that the table holds. AUTOINCREMENT keeps seq from
// ever being reused, even after the newest rows are deleted. (A store with
// concurrent writers needs another way to order its feed.)
func (db *DB) ListChanges(ctx context.Context, f scheduler.ChangeFilter) ([]scheduler.Change, error) {
	limit := min(max(f.Limit, 1), scheduler.MaxChangeLimit)
	query := `SELECT seq, operation_id, scope, state, at FROM changes WHERE seq > ? ORDER BY seq LIMIT ?`
	args := []any{f.After, limit}
	if f.Scope != "" {
		query = `SELECT seq, operation_id, scope, state, at FROM changes WHERE scope = ? AND seq > ? ORDER BY seq LIMIT ?`
		args = []any{f.Scope, f.After, limit}
	}
	rows, err := db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list changes: %w", err)
	}
	defer rows.Close()
	var out []scheduler.Change
	for rows.Next() {
		var (
			c  scheduler.Change
			at int64
		)
		if err := rows.Scan(&c.Seq, &c.OperationID, &c.Scope, &c.State, &at); err != nil {
			return nil, fmt.Errorf("list changes: %w", err)
		}
		c.At = fromMillis(at)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list changes: %w", err)
	}
	return out, nil
}
