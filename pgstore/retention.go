package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"pacer/scheduler"
)

// PruneFinished is one bounded retention batch in one transaction (see
// scheduler.Store), as the SQLite store's: up to p.Limit succeeded or
// canceled operations finished before p.Before, oldest first, with their
// attempts and audit entries, then the longest run of the oldest
// sequenced changes recorded before p.Before, at most p.Limit. The rows
// are locked as they are chosen (SKIP LOCKED: retention never waits for
// the claim loop). Only the node elected for retention prunes (elected);
// on the others it removes nothing. It first runs the sequencer, as the
// feed's readers do: changes no reader asked for are numbered too, so
// retention bounds the feed also when no one reads it.
func (s *Store) PruneFinished(ctx context.Context, p scheduler.PruneParams) (scheduler.PruneResult, error) {
	if p.Limit < 1 {
		return scheduler.PruneResult{}, fmt.Errorf("prune finished operations: limit %d must be at least 1", p.Limit)
	}
	if _, err := s.sequence(ctx); err != nil {
		return scheduler.PruneResult{}, fmt.Errorf("prune changes: %w", err)
	}
	var res scheduler.PruneResult
	err := s.write(ctx, func(tx pgx.Tx) error {
		res = scheduler.PruneResult{}
		if ok, err := s.elected(ctx, tx, retentionTask); err != nil || !ok {
			return err // another node prunes
		}
		before := millis(p.Before)
		var err error
		if res, err = pruneOperations(ctx, tx, before, p.Limit); err != nil {
			return fmt.Errorf("prune finished operations: %w", err)
		}
		if res.Changes, err = pruneChanges(ctx, tx, before, p.Limit); err != nil {
			return fmt.Errorf("prune changes: %w", err)
		}
		res.More = res.Operations == p.Limit || res.Changes == p.Limit
		return nil
	})
	if err != nil {
		return scheduler.PruneResult{}, err
	}
	return res, nil
}

// pruneOperations deletes up to limit operations finished before `before`
// with their attempts and audit entries.
func pruneOperations(ctx context.Context, tx pgx.Tx, before int64, limit int) (scheduler.PruneResult, error) {
	rows, err := tx.Query(ctx, `
		SELECT id FROM operations
		WHERE state IN ('succeeded', 'canceled') AND updated_at < $1
		ORDER BY updated_at, id
		LIMIT $2
		FOR UPDATE SKIP LOCKED`, before, limit)
	if err != nil {
		return scheduler.PruneResult{}, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(ids) == 0 {
		return scheduler.PruneResult{}, err
	}
	var res scheduler.PruneResult
	del := func(query string) (int, error) {
		tag, err := tx.Exec(ctx, query, ids)
		return int(tag.RowsAffected()), err
	}
	if res.Attempts, err = del(`DELETE FROM attempts WHERE operation_id = ANY($1)`); err != nil {
		return scheduler.PruneResult{}, fmt.Errorf("delete attempts: %w", err)
	}
	if res.Audit, err = del(`DELETE FROM audit WHERE operation_id = ANY($1)`); err != nil {
		return scheduler.PruneResult{}, fmt.Errorf("delete audit entries: %w", err)
	}
	// The state is checked again: nothing but a finished row is removed.
	if res.Operations, err = del(`DELETE FROM operations WHERE id = ANY($1) AND state IN ('succeeded', 'canceled')`); err != nil {
		return scheduler.PruneResult{}, fmt.Errorf("delete operations: %w", err)
	}
	return res, nil
}

// pruneChanges deletes the head of the change feed recorded before
// `before`: walking the oldest limit sequenced changes in seq order, it
// stops at the first one recent enough to keep.
func pruneChanges(ctx context.Context, tx pgx.Tx, before int64, limit int) (int, error) {
	rows, err := tx.Query(ctx, `SELECT seq, at FROM changes WHERE seq IS NOT NULL ORDER BY seq LIMIT $1`, limit)
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
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	if _, err := tx.Exec(ctx, `DELETE FROM changes WHERE seq <= $1`, last); err != nil {
		return 0, err
	}
	return n, nil
}
