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
// The feed has no per-scope index (it would cost every state change a
// second b-tree write): a read of one scope examines the next
// scheduler.MaxChangeScan changes in seq order and keeps the scope's
// (listScopeChanges). A change row holds its scope's row ID; the name is
// joined here (scopes are never renamed or deleted: see migration 10).
//
// The triggers on operations fill the changes table inside the writing
// transaction, and every write goes through the single writer connection,
// so seq values become visible in order: a reader that sees seq N has seen
// every change below N that the table holds. AUTOINCREMENT keeps seq from
// ever being reused, even after the newest rows are deleted. (A store with
// concurrent writers needs another way to order its feed.)
func (db *DB) ListChanges(ctx context.Context, f scheduler.ChangeFilter) (scheduler.ChangeBatch, error) {
	limit := min(max(f.Limit, 1), scheduler.MaxChangeLimit)
	tx, err := db.beginRead(ctx)
	if err != nil {
		return scheduler.ChangeBatch{}, fmt.Errorf("list changes: %w", err)
	}
	defer tx.Rollback()
	if err := checkFeedCursor(ctx, tx, f.After); err != nil {
		return scheduler.ChangeBatch{}, fmt.Errorf("list changes: %w", err)
	}
	var b scheduler.ChangeBatch
	if f.Scope == "" {
		b, err = listAllChanges(ctx, tx, f.After, limit)
	} else {
		b, err = listScopeChanges(ctx, tx, f.Scope, f.After, limit)
	}
	if err != nil {
		return scheduler.ChangeBatch{}, fmt.Errorf("list changes: %w", err)
	}
	return b, nil
}

// listAllChanges reads the next limit changes of every scope.
func listAllChanges(ctx context.Context, tx *sql.Tx, after int64, limit int) (scheduler.ChangeBatch, error) {
	cs, err := scanChanges(tx.QueryContext(ctx, allChanges, after, limit))
	if err != nil {
		return scheduler.ChangeBatch{}, err
	}
	b := scheduler.ChangeBatch{Changes: cs, Next: after, More: len(cs) == limit}
	if len(cs) > 0 {
		b.Next = cs[len(cs)-1].Seq
	}
	return b, nil
}

// listScopeChanges reads, of the next scheduler.MaxChangeScan changes
// after after, the first limit of scope's (by its row, or by the name a
// change migrated without a scope kept). Next is the last change returned
// when limit were, else the last change examined.
func listScopeChanges(ctx context.Context, tx *sql.Tx, scope string, after int64, limit int) (scheduler.ChangeBatch, error) {
	cs, err := scanChanges(tx.QueryContext(ctx, scopeChanges, after, scheduler.MaxChangeScan, scope, limit))
	if err != nil {
		return scheduler.ChangeBatch{}, err
	}
	if len(cs) == limit {
		return scheduler.ChangeBatch{Changes: cs, Next: cs[len(cs)-1].Seq, More: true}, nil
	}
	var examined, last int64
	err = tx.QueryRowContext(ctx, changesExamined, after, scheduler.MaxChangeScan).Scan(&examined, &last)
	if err != nil {
		return scheduler.ChangeBatch{}, err
	}
	return scheduler.ChangeBatch{Changes: cs, Next: last, More: examined == scheduler.MaxChangeScan}, nil
}

// The feed's queries (after ?1). allChanges reads the next ?2 changes;
// scopeChanges the first ?4 of scope ?3's among the next ?2 (by its row,
// or by the name a change migrated without a scope kept), the name being
// ?3; changesExamined counts the next ?2 and gives the last seq of them
// (?1 when none). Each reads the table's rows in seq order from ?1, by
// the primary key.
const (
	allChanges = `
		SELECT c.seq, c.operation_id, coalesce(s.name, c.orphan_scope, ''), c.state, c.at
		FROM changes c LEFT JOIN scopes s ON s.id = c.scope_id
		WHERE c.seq > ?1 ORDER BY c.seq LIMIT CAST(?2 AS INTEGER)`
	scopeChanges = `
		SELECT seq, operation_id, ?3, state, at
		FROM (SELECT seq, operation_id, scope_id, orphan_scope, state, at FROM changes
			WHERE seq > ?1 ORDER BY seq LIMIT CAST(?2 AS INTEGER))
		WHERE scope_id = (SELECT id FROM scopes WHERE name = ?3) OR orphan_scope = ?3
		ORDER BY seq LIMIT CAST(?4 AS INTEGER)`
	changesExamined = `
		SELECT count(*), coalesce(max(seq), ?1)
		FROM (SELECT seq FROM changes WHERE seq > ?1 ORDER BY seq LIMIT CAST(?2 AS INTEGER))`
)

// scanChanges reads the rows of a changes query (seq, operation ID, scope
// name, state, at).
func scanChanges(rows *sql.Rows, err error) ([]scheduler.Change, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []scheduler.Change
	for rows.Next() {
		var (
			c  scheduler.Change
			at int64
		)
		if err := rows.Scan(&c.Seq, &c.OperationID, &c.Scope, &c.State, &at); err != nil {
			return nil, err
		}
		c.At = fromMillis(at)
		out = append(out, c)
	}
	return out, rows.Err()
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
