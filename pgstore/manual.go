package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"pacer/scheduler"
)

// The manual actions, as the SQLite store does them (db/operations.go,
// db/support.go). Each reads the operation FOR UPDATE before it checks
// what the action allows: a claim or completion committed meanwhile is
// seen, and none changes the row between the check and the write.

// ReleaseOperation moves an operation that CanRelease to scheduled at
// `at` with a fresh retry budget and records act ("release").
func (s *Store) ReleaseOperation(ctx context.Context, id string, at time.Time, act scheduler.Action) (scheduler.Operation, error) {
	return s.release(ctx, id, at, act, scheduler.ActRelease)
}

// ReleaseUnapplied releases, as ReleaseOperation does, an operation that
// CanResolve, in the same transaction as the check.
func (s *Store) ReleaseUnapplied(ctx context.Context, id string, at time.Time, act scheduler.Action) (scheduler.Operation, error) {
	return s.release(ctx, id, at, act, scheduler.ActResolve)
}

// release runs releaseOperation in its own transaction; its errors are
// named after the action (release, or resolve).
func (s *Store) release(ctx context.Context, id string, at time.Time, act scheduler.Action, allowed scheduler.ManualAction) (scheduler.Operation, error) {
	var r opRow
	err := s.write(ctx, func(tx pgx.Tx) error {
		var err error
		r, err = releaseOperation(ctx, tx, id, at, act, allowed)
		return err
	})
	if err != nil {
		return scheduler.Operation{}, fmt.Errorf("%s %s: %w", allowed, id, err)
	}
	s.announce() // due now for any node
	return r.Operation, nil
}

// releaseOperation releases the operation when its state allows the
// manual action allowed.
func releaseOperation(ctx context.Context, tx pgx.Tx, id string, at time.Time, act scheduler.Action, allowed scheduler.ManualAction) (opRow, error) {
	r, err := findOperation(ctx, tx, id, true)
	if err != nil {
		return opRow{}, err
	}
	if err := r.Allow(allowed); err != nil {
		return opRow{}, err
	}
	from := r.ReleaseOrigin()
	if _, err := tx.Exec(ctx, `
		UPDATE operations SET state = 'scheduled', next_attempt_at = $1, hold_reason = NULL,
			failure_reason = NULL, budget_attempts = 0, deadline = $2, updated_at = $3,
			released_from_state = $4, released_from_reason = $5
		WHERE id = $6`,
		millis(at), millis(at.Add(r.Retry.MaxElapsed)), millis(act.At), string(from.State), from.Reason(), r.id); err != nil {
		return opRow{}, err
	}
	detail := fmt.Sprintf("%s → scheduled at %s", r.DescribeState(), at.UTC().Format(time.RFC3339))
	if r.CanUnrelease() {
		detail = fmt.Sprintf("release changed from %s to %s (released from %s)", r.NextAttemptAt.UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339), from.Describe())
	}
	if allowed == scheduler.ActResolve {
		detail = "not applied, sent again: " + detail
	}
	if err := insertAudit(ctx, tx, auditRow{opRowID: r.id, scope: r.Scope, action: string(allowed), act: act, detail: detail}); err != nil {
		return opRow{}, err
	}
	return findOperationByRowID(ctx, tx, r.id)
}

// UnreleaseOperation undoes a release not sent yet (see scheduler.Store).
func (s *Store) UnreleaseOperation(ctx context.Context, id string, act scheduler.Action) (scheduler.Operation, error) {
	var out opRow
	err := s.write(ctx, func(tx pgx.Tx) error {
		r, err := findOperation(ctx, tx, id, true)
		if err == nil {
			err = r.Allow(scheduler.ActUnrelease)
		}
		if err != nil {
			return err
		}
		rf := r.ReleasedFrom
		var hold, failure *string
		if rf.State == scheduler.StateHeld {
			hold = nullString(string(rf.HoldReason))
		} else {
			failure = nullString(string(rf.FailureReason))
		}
		if _, err := tx.Exec(ctx, `
			UPDATE operations SET state = $1, next_attempt_at = NULL, hold_reason = $2, failure_reason = $3, updated_at = $4,
				released_from_state = NULL, released_from_reason = NULL
			WHERE id = $5`,
			string(rf.State), hold, failure, millis(act.At), r.id); err != nil {
			return err
		}
		detail := fmt.Sprintf("%s (released, not sent) → %s", r.DescribeState(), rf.Describe())
		if err := insertAudit(ctx, tx, auditRow{opRowID: r.id, scope: r.Scope, action: string(scheduler.ActUnrelease), act: act, detail: detail}); err != nil {
			return err
		}
		out, err = findOperationByRowID(ctx, tx, r.id)
		return err
	})
	if err != nil {
		return scheduler.Operation{}, fmt.Errorf("unrelease %s: %w", id, err)
	}
	return out.Operation, nil
}

// ResolveOperation ends an operation that CanResolve as succeeded, or as
// failed with FailureResolvedFailed, clears MaybeApplied and records act
// ("resolve").
func (s *Store) ResolveOperation(ctx context.Context, id string, succeeded bool, act scheduler.Action) (scheduler.Operation, error) {
	var out opRow
	err := s.write(ctx, func(tx pgx.Tx) error {
		r, err := findOperation(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if err := r.Allow(scheduler.ActResolve); err != nil {
			return err
		}
		to, failure := scheduler.StateSucceeded, (*string)(nil)
		if !succeeded {
			to, failure = scheduler.StateFailed, nullString(string(scheduler.FailureResolvedFailed))
		}
		if _, err := tx.Exec(ctx, `
			UPDATE operations SET state = $1, hold_reason = NULL, failure_reason = $2, next_attempt_at = NULL,
				maybe_applied = false, updated_at = $3
			WHERE id = $4`,
			string(to), failure, millis(act.At), r.id); err != nil {
			return err
		}
		detail := fmt.Sprintf("%s → %s", r.DescribeState(), to)
		if err := insertAudit(ctx, tx, auditRow{opRowID: r.id, scope: r.Scope, action: string(scheduler.ActResolve), act: act, detail: detail}); err != nil {
			return err
		}
		out, err = findOperationByRowID(ctx, tx, r.id)
		return err
	})
	if err != nil {
		return scheduler.Operation{}, fmt.Errorf("resolve %s: %w", id, err)
	}
	return out.Operation, nil
}

// CancelOperation cancels an operation that CanCancel and records act
// ("cancel"); a *scheduler.TransitionError otherwise (a running
// operation's request is already on its way: its row, read FOR UPDATE,
// says so even when a claim committed a moment before).
func (s *Store) CancelOperation(ctx context.Context, id string, act scheduler.Action) (scheduler.Operation, error) {
	var out opRow
	err := s.write(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = cancelOperation(ctx, tx, id, act)
		return err
	})
	if err != nil {
		return scheduler.Operation{}, fmt.Errorf("cancel %s: %w", id, err)
	}
	return out.Operation, nil
}

func cancelOperation(ctx context.Context, tx pgx.Tx, id string, act scheduler.Action) (opRow, error) {
	r, err := findOperation(ctx, tx, id, true)
	if err != nil {
		return opRow{}, err
	}
	if err := r.Allow(scheduler.ActCancel); err != nil {
		return opRow{}, err
	}
	if _, err := tx.Exec(ctx, `
		UPDATE operations SET state = 'canceled', hold_reason = NULL, failure_reason = NULL,
			next_attempt_at = NULL, updated_at = $1
		WHERE id = $2`, millis(act.At), r.id); err != nil {
		return opRow{}, err
	}
	detail := fmt.Sprintf("%s → canceled", r.DescribeState())
	if err := insertAudit(ctx, tx, auditRow{opRowID: r.id, scope: r.Scope, action: string(scheduler.ActCancel), act: act, detail: detail}); err != nil {
		return opRow{}, err
	}
	return findOperationByRowID(ctx, tx, r.id)
}

// ActOnOperations releases (at `at`) or cancels the operations ids in one
// transaction, skipping those whose state does not allow it or that do
// not exist (see scheduler.Store). The rows are locked first, in row ID
// order, so two batches over the same operations do not deadlock.
func (s *Store) ActOnOperations(ctx context.Context, a scheduler.ManualAction, ids []string, at time.Time, act scheduler.Action) (int, error) {
	if a != scheduler.ActRelease && a != scheduler.ActCancel {
		return 0, fmt.Errorf("act on operations: %s is not an action on many", a)
	}
	var changed int
	err := s.write(ctx, func(tx pgx.Tx) error {
		changed = 0
		if _, err := tx.Exec(ctx, `SELECT id FROM operations WHERE operation_id = ANY($1) ORDER BY id FOR UPDATE`, ids); err != nil {
			return err
		}
		for _, id := range ids {
			var err error
			if a == scheduler.ActRelease {
				_, err = releaseOperation(ctx, tx, id, at, act, a)
			} else {
				_, err = cancelOperation(ctx, tx, id, act)
			}
			switch {
			case err == nil:
				changed++
			case errors.Is(err, scheduler.ErrInvalidTransition), errors.Is(err, scheduler.ErrNotFound):
			default:
				return fmt.Errorf("%s %s: %w", a, id, err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("%s operations: %w", a, err)
	}
	if a == scheduler.ActRelease && changed > 0 {
		s.announce()
	}
	return changed, nil
}

// ReleaseHeldInScope releases every held operation of the scope at `at`
// in one transaction, as the SQLite store does (each audited as a
// release, the scope's "releaseHeld" saying how many). The held rows are
// locked first, in row ID order, so the audit entries and the update name
// the same operations.
func (s *Store) ReleaseHeldInScope(ctx context.Context, scope string, at time.Time, act scheduler.Action) (int, error) {
	var n int
	err := s.write(ctx, func(tx pgx.Tx) error {
		var scopeID int64
		err := tx.QueryRow(ctx, `SELECT id FROM scopes WHERE name = $1`, scope).Scan(&scopeID)
		if errors.Is(err, pgx.ErrNoRows) {
			return scheduler.ErrNotFound
		} else if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT id FROM operations WHERE scope_id = $1 AND state = 'held' ORDER BY id FOR UPDATE`, scopeID)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		// The audit entries first, while the rows still say why they were
		// held (the same detail ReleaseOperation writes).
		if _, err := tx.Exec(ctx, `
			INSERT INTO audit (operation_id, scope, action, actor, reason, at, detail)
			SELECT o.id, $1, 'release', $2, $3, $4, 'held (' || o.hold_reason || ') → scheduled at ' || $5
			FROM operations o WHERE o.id = ANY($6) ORDER BY o.id`,
			scope, act.Actor, act.Reason, millis(act.At), at.UTC().Format(time.RFC3339), ids); err != nil {
			return fmt.Errorf("record audit entries: %w", err)
		}
		tag, err := tx.Exec(ctx, `
			UPDATE operations SET state = 'scheduled', next_attempt_at = $1, hold_reason = NULL,
				failure_reason = NULL, budget_attempts = 0, deadline = $1 + max_elapsed_ms, updated_at = $2
			WHERE id = ANY($3)`, millis(at), millis(act.At), ids)
		if err != nil {
			return err
		}
		n = int(tag.RowsAffected())
		detail := fmt.Sprintf("released %d held operations to run at %s", n, at.UTC().Format(time.RFC3339))
		return insertAudit(ctx, tx, auditRow{scope: scope, action: "releaseHeld", act: act, detail: detail})
	})
	if err != nil {
		return 0, fmt.Errorf("release held operations of %s: %w", scope, err)
	}
	if n > 0 {
		s.announce()
	}
	return n, nil
}
