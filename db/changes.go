package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"pacer/scheduler"
)

// ListChanges returns up to f.Limit changes with seq > f.After (of
// f.Scope only, when set), in seq order; a Limit outside
// 1..scheduler.MaxChangeLimit is clamped. A cursor that cannot continue
// (pruned changes, or ahead of the feed) is a *scheduler.FeedGapError,
// judged in the same read transaction as the page.
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
	tx, err := db.beginRead(ctx)
	if err != nil {
		return nil, fmt.Errorf("list changes: %w", err)
	}
	defer tx.Rollback()
	if err := checkFeedCursor(ctx, tx, f.After); err != nil {
		return nil, fmt.Errorf("list changes: %w", err)
	}
	rows, err := tx.QueryContext(ctx, query, args...)
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

// checkFeedCursor applies scheduler.CheckFeedCursor to the feed as tx
// sees it: the oldest change held, and the newest seq ever assigned
// (AUTOINCREMENT keeps it in sqlite_sequence, also after the rows are
// pruned).
func checkFeedCursor(ctx context.Context, tx *sql.Tx, after int64) error {
	var oldest, last int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(min(seq), 0) FROM changes`).Scan(&oldest); err != nil {
		return err
	}
	err := tx.QueryRowContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name = 'changes'`).Scan(&last)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	return scheduler.CheckFeedCursor(after, oldest, last)
}
