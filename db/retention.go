package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"pacer/scheduler"
)

// PruneFinished is one bounded retention batch in one immediate
// transaction (see scheduler.Store).
//
// It takes up to p.Limit succeeded or canceled operations whose last
// update (the time they finished) lies before p.Before, oldest first, from
// the operations_finished partial index, so held and failed rows are never
// read, and deletes their attempts, their audit entries and them. Then it
// deletes the longest run of the oldest change-feed entries recorded
// before p.Before, at most p.Limit: the feed loses only its head, so a
// reader resuming after a Seq still held misses nothing. Seq numbers are
// never reused (AUTOINCREMENT). Each batch is small so the single writer
// is back to the claim loop quickly.
func (db *DB) PruneFinished(ctx context.Context, p scheduler.PruneParams) (scheduler.PruneResult, error) {
	if p.Limit < 1 {
		return scheduler.PruneResult{}, fmt.Errorf("prune finished operations: limit %d must be at least 1", p.Limit)
	}
	tx, err := db.beginWrite(ctx)
	if err != nil {
		return scheduler.PruneResult{}, fmt.Errorf("prune finished operations: %w", err)
	}
	defer tx.Rollback()
	before := millis(p.Before)
	res, err := pruneOperations(ctx, tx, before, p.Limit)
	if err != nil {
		return scheduler.PruneResult{}, fmt.Errorf("prune finished operations: %w", err)
	}
	changes, err := pruneChanges(ctx, tx, before, p.Limit)
	if err != nil {
		return scheduler.PruneResult{}, fmt.Errorf("prune changes: %w", err)
	}
	res.Changes = changes
	res.More = res.Operations == p.Limit || changes == p.Limit
	if err := tx.Commit(); err != nil {
		return scheduler.PruneResult{}, fmt.Errorf("prune finished operations: %w", err)
	}
	return res, nil
}

// pruneOperations deletes up to limit operations finished before `before`
// with their attempts and audit entries.
func pruneOperations(ctx context.Context, tx *sql.Tx, before int64, limit int) (scheduler.PruneResult, error) {
	rows, err := tx.QueryContext(ctx, `
		SELECT id FROM operations INDEXED BY operations_finished
		WHERE state IN ('succeeded', 'canceled') AND updated_at < ?
		ORDER BY updated_at, id
		LIMIT ?`, before, limit)
	if err != nil {
		return scheduler.PruneResult{}, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return scheduler.PruneResult{}, err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return scheduler.PruneResult{}, err
	}
	rows.Close()
	if len(ids) == 0 {
		return scheduler.PruneResult{}, nil
	}
	list, err := json.Marshal(ids) // one parameter however long the batch
	if err != nil {
		return scheduler.PruneResult{}, err
	}
	var res scheduler.PruneResult
	del := func(query string) (int, error) {
		r, err := tx.ExecContext(ctx, query, string(list))
		if err != nil {
			return 0, err
		}
		n, err := r.RowsAffected()
		return int(n), err
	}
	if res.Attempts, err = del(`DELETE FROM attempts WHERE operation_id IN (SELECT value FROM json_each(?))`); err != nil {
		return scheduler.PruneResult{}, fmt.Errorf("delete attempts: %w", err)
	}
	if res.Audit, err = del(`DELETE FROM audit WHERE operation_id IN (SELECT value FROM json_each(?))`); err != nil {
		return scheduler.PruneResult{}, fmt.Errorf("delete audit entries: %w", err)
	}
	// The state is checked again: nothing but a finished row is removed.
	// The unary + keeps the planner on the row IDs: searching the state
	// index instead would walk every finished row.
	if _, err = del(`DELETE FROM operation_requests WHERE id IN (SELECT id FROM operations
		WHERE id IN (SELECT value FROM json_each(?)) AND +state IN ('succeeded', 'canceled'))`); err != nil {
		return scheduler.PruneResult{}, fmt.Errorf("delete requests: %w", err)
	}
	if res.Operations, err = del(`DELETE FROM operations WHERE id IN (SELECT value FROM json_each(?)) AND +state IN ('succeeded', 'canceled')`); err != nil {
		return scheduler.PruneResult{}, fmt.Errorf("delete operations: %w", err)
	}
	return res, nil
}

// pruneChanges deletes the head of the change feed recorded before
// `before`: walking the oldest limit entries in Seq order, it stops at the
// first one that is recent enough to keep.
func pruneChanges(ctx context.Context, tx *sql.Tx, before int64, limit int) (int, error) {
	rows, err := tx.QueryContext(ctx, `SELECT seq, at FROM changes ORDER BY seq LIMIT ?`, limit)
	if err != nil {
		return 0, err
	}
	var last int64
	n := 0
	for rows.Next() {
		var seq, at int64
		if err := rows.Scan(&seq, &at); err != nil {
			rows.Close()
			return 0, err
		}
		if at >= before {
			break
		}
		last, n = seq, n+1
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return 0, err
	}
	rows.Close()
	if n == 0 {
		return 0, nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM changes WHERE seq <= ?`, last); err != nil {
		return 0, err
	}
	return n, nil
}
