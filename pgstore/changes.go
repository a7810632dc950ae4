package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"pacer/scheduler"
)

// The change feed on a database several processes write at once (design
// §10). Transactions commit in another order than the one they wrote
// their changes in, so a change's seq cannot be given when it is written:
// a reader that saw seq N could later find a change below N that was still
// uncommitted, and skip it for good. Instead a change row is written
// without a seq, and the sequencer numbers, continuing from
// change_seq.last, every row its statement can see that has none: rows
// of committed transactions only, in id order. Readers read numbered rows
// only. A number once given is never followed by a lower one: the runs
// are serialized (an advisory lock) and each numbers after the last.
//
// Why id order: ids come from a sequence when the row is inserted, so of
// two changes of one operation the later one (written after the earlier
// one's transaction committed, as it waited for the row's lock) has the
// higher id. Transaction IDs would not do: a transaction that wrote
// something else first holds a lower one than the transaction it waited
// for. Nor would waiting for the snapshot's xmin to pass a row's
// transaction, which issue 16 proposed: xmin is the whole cluster's, so
// a busy transaction in any database of the server held back this feed
// (seen in the contract suite, whose tests run in parallel in databases
// of one server).

// sequencerLock is the key of the advisory lock that serializes the
// sequencer's runs ("pacerseq" in ASCII).
const sequencerLock int64 = 0x70616365727365

// sequenceBatch bounds the rows one statement of the sequencer numbers.
const sequenceBatch = 10000

// sequence numbers the changes of every committed transaction not numbered
// yet, and returns how many it numbered. It commits on its own and calls
// no OnCommit function (the feed's readers run it: a wake-up would wake
// them again).
func (s *Store) sequence(ctx context.Context) (int, error) {
	var total int
	var err error
	for try := 1; try <= maxTries; try++ {
		if total, err = s.sequenceOnce(ctx); err == nil || !retryable(err) {
			break
		}
	}
	if err != nil {
		return 0, fmt.Errorf("sequence changes: %w", err)
	}
	return total, nil
}

func (s *Store) sequenceOnce(ctx context.Context) (int, error) {
	// Most reads find nothing to number: they take no lock and write
	// nothing. A change committed before the call is seen here.
	var pending bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM changes WHERE seq IS NULL)`).Scan(&pending); err != nil || !pending {
		return 0, err
	}
	total := 0
	err := s.writeOnce(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, sequencerLock); err != nil {
			return err
		}
		for {
			var n int
			err := tx.QueryRow(ctx, `
				WITH todo AS (
					SELECT id, row_number() OVER (ORDER BY id) AS n FROM changes
					WHERE seq IS NULL ORDER BY id LIMIT $1
				), base AS (
					SELECT last FROM change_seq WHERE id = 1
				), numbered AS (
					UPDATE changes c SET seq = base.last + todo.n FROM todo, base
					WHERE c.id = todo.id RETURNING 1
				)
				UPDATE change_seq SET last = last + (SELECT count(*) FROM numbered) WHERE id = 1
				RETURNING (SELECT count(*) FROM numbered)`, sequenceBatch).Scan(&n)
			if err != nil {
				return err
			}
			total += n
			if n < sequenceBatch {
				return nil
			}
		}
	})
	return total, err
}

// ListChanges returns up to f.Limit changes with seq > f.After (of f.Scope
// only, when set), in seq order, as the SQLite store does (see
// scheduler.Store); a Limit outside 1..scheduler.MaxChangeLimit is
// clamped. It first runs the sequencer, so that every change committed
// before the call, by any process, has its number; then reads numbered
// changes only, in one snapshot with the cursor's check.
func (s *Store) ListChanges(ctx context.Context, f scheduler.ChangeFilter) (scheduler.ChangeBatch, error) {
	limit := min(max(f.Limit, 1), scheduler.MaxChangeLimit)
	if _, err := s.sequence(ctx); err != nil {
		return scheduler.ChangeBatch{}, fmt.Errorf("list changes: %w", err)
	}
	var b scheduler.ChangeBatch
	err := s.read(ctx, func(tx pgx.Tx) error {
		if err := checkFeedCursor(ctx, tx, f.After); err != nil {
			return err
		}
		var err error
		if f.Scope == "" {
			b, err = listAllChanges(ctx, tx, f.After, limit)
		} else {
			b, err = listScopeChanges(ctx, tx, f.Scope, f.After, limit)
		}
		return err
	})
	if err != nil {
		return scheduler.ChangeBatch{}, fmt.Errorf("list changes: %w", err)
	}
	return b, nil
}

// listAllChanges reads the next limit changes of every scope.
func listAllChanges(ctx context.Context, tx pgx.Tx, after int64, limit int) (scheduler.ChangeBatch, error) {
	cs, err := scanChanges(tx.Query(ctx, `
		SELECT c.seq, c.operation_id, s.name, c.state, c.at
		FROM changes c JOIN scopes s ON s.id = c.scope_id
		WHERE c.seq > $1 ORDER BY c.seq LIMIT $2`, after, limit))
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
// after after, the first limit of scope's. Next is the last change
// returned when limit were, else the last change examined.
func listScopeChanges(ctx context.Context, tx pgx.Tx, scope string, after int64, limit int) (scheduler.ChangeBatch, error) {
	cs, err := scanChanges(tx.Query(ctx, `
		SELECT seq, operation_id, $3::text, state, at
		FROM (SELECT seq, operation_id, scope_id, state, at FROM changes
			WHERE seq > $1 ORDER BY seq LIMIT $2) c
		WHERE scope_id = (SELECT id FROM scopes WHERE name = $3)
		ORDER BY seq LIMIT $4`, after, scheduler.MaxChangeScan, scope, limit))
	if err != nil {
		return scheduler.ChangeBatch{}, err
	}
	if len(cs) == limit {
		return scheduler.ChangeBatch{Changes: cs, Next: cs[len(cs)-1].Seq, More: true}, nil
	}
	var examined, last int64
	err = tx.QueryRow(ctx, `
		SELECT count(*), coalesce(max(seq), $1)
		FROM (SELECT seq FROM changes WHERE seq > $1 ORDER BY seq LIMIT $2) c`,
		after, scheduler.MaxChangeScan).Scan(&examined, &last)
	if err != nil {
		return scheduler.ChangeBatch{}, err
	}
	return scheduler.ChangeBatch{Changes: cs, Next: last, More: examined == scheduler.MaxChangeScan}, nil
}

// scanChanges reads the rows of a changes query (seq, operation ID, scope
// name, state, at).
func scanChanges(rows pgx.Rows, err error) ([]scheduler.Change, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []scheduler.Change
	for rows.Next() {
		var (
			c     scheduler.Change
			at    int64
			state string
		)
		if err := rows.Scan(&c.Seq, &c.OperationID, &c.Scope, &state, &at); err != nil {
			return nil, err
		}
		c.State, c.At = scheduler.State(state), fromMillis(at)
		out = append(out, c)
	}
	return out, rows.Err()
}

// checkFeedCursor applies scheduler.CheckFeedCursor to the feed as tx
// sees it: the oldest numbered change held, and the newest seq ever
// given (change_seq, kept after the rows are pruned).
func checkFeedCursor(ctx context.Context, tx pgx.Tx, after int64) error {
	var oldest, last int64
	if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT min(seq) FROM changes), 0), (SELECT last FROM change_seq WHERE id = 1)`).
		Scan(&oldest, &last); err != nil {
		return err
	}
	return scheduler.CheckFeedCursor(after, oldest, last)
}
