package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"pacer/internal/stored"
	"pacer/scheduler"
)

// Complete applies completions in one transaction (see scheduler.Store),
// each fenced by its lease token exactly as the SQLite store's: an applied
// one sets the decided state and what goes with it, finishes its attempt
// row and applies the scope effect; a fenced-out one only marks its
// attempt stale, if nothing finished it before. The operation rows are
// locked first, all at once in row ID order, so batches completing the
// same operations in another order do not deadlock.
func (s *Store) Complete(ctx context.Context, cs []scheduler.Completion) ([]bool, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	applied, _, err := s.tick(ctx, cs, scheduler.ClaimParams{})
	if err != nil {
		return nil, fmt.Errorf("complete attempts: %w", err)
	}
	return applied, nil
}

// completeAll applies cs in tx, their rows locked first in row ID order.
func completeAll(ctx context.Context, tx pgx.Tx, cs []scheduler.Completion) ([]bool, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.OperationID
	}
	if _, err := tx.Exec(ctx, `SELECT id FROM operations WHERE operation_id = ANY($1) ORDER BY id FOR NO KEY UPDATE`, ids); err != nil {
		return nil, fmt.Errorf("lock the completed operations: %w", err)
	}
	applied := make([]bool, len(cs))
	for i, c := range cs {
		var err error
		if applied[i], err = completeAttempt(ctx, tx, c); err != nil {
			return nil, fmt.Errorf("complete attempt %d of %s: %w", c.Attempt, c.OperationID, err)
		}
	}
	return applied, nil
}

func completeAttempt(ctx context.Context, tx pgx.Tx, c scheduler.Completion) (bool, error) {
	d := c.Decision
	if !d.State.Valid() || d.State == scheduler.StateRunning {
		return false, fmt.Errorf("%w: decided state %q", scheduler.ErrInvalidTransition, d.State)
	}
	if d.State.Due() && d.NextAttemptAt.IsZero() {
		return false, fmt.Errorf("%w: %s without a next attempt time", scheduler.ErrInvalidTransition, d.State)
	}
	var next *int64
	if d.State.Due() {
		next = nullMillis(d.NextAttemptAt)
	}
	hint := stored.AttemptHint(c.Outcome.Hint)
	detail := stored.AttemptDetail(c.Outcome.Detail)
	lastOutcome, err := stored.EncodeOutcome(scheduler.OutcomeSummary{
		Class: c.Outcome.Class, Status: c.Outcome.Status, At: c.FinishedAt.UTC(),
		Hint: hint, Reason: c.Outcome.Reason, Detail: detail,
	})
	if err != nil {
		return false, err
	}
	result, err := stored.EncodeResult(d.Result)
	if err != nil {
		return false, err
	}
	lastResponse, err := stored.EncodeResult(c.Response)
	if err != nil {
		return false, err
	}
	attemptResponse, err := stored.EncodeResult(c.AttemptResponse)
	if err != nil {
		return false, err
	}
	var hold, failure *string
	if d.State == scheduler.StateHeld {
		hold = nullString(string(d.HoldReason))
	}
	if d.State == scheduler.StateFailed {
		failure = nullString(string(d.FailureReason))
	}

	// The fence: the row is updated only while it is still running with
	// this lease.
	var (
		rowID, scopeID         int64
		method, path, resource string
	)
	err = tx.QueryRow(ctx, `
		UPDATE operations o SET state = $1, next_attempt_at = $2, hold_reason = $3, failure_reason = $4,
			last_outcome = $5, last_response = $6, result = $7, lease_expires_at = NULL, updated_at = $8,
			maybe_applied = o.maybe_applied OR $9, budget_attempts = GREATEST(o.budget_attempts - $10, 0)
		WHERE o.operation_id = $11 AND o.state = 'running' AND o.lease_token = $12
		RETURNING o.id, o.scope_id, o.method, o.path, o.resource`,
		string(d.State), next, hold, failure, lastOutcome, pgString(lastResponse), pgString(result), millis(c.FinishedAt),
		d.MaybeApplied, boolInt(d.Uncounted), c.OperationID, c.LeaseToken).Scan(&rowID, &scopeID, &method, &path, &resource)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, markStale(ctx, tx, c)
	} else if err != nil {
		return false, err
	}
	hintJSON, err := stored.EncodeHint(hint)
	if err != nil {
		return false, err
	}
	tag, err := tx.Exec(ctx, `
		UPDATE attempts SET finished_at = $1, class = $2, status = $3, hint = $4, reason = $5, detail = $6, response = $7,
			decided_state = $8, decided_at = $9, decision = $10
		WHERE operation_id = $11 AND number = $12 AND lease_token = $13`,
		millis(c.FinishedAt), string(c.Outcome.Class), c.Outcome.Status, pgString(hintJSON), c.Outcome.Reason, detail, pgString(attemptResponse),
		string(d.State), next, d.Reason,
		rowID, c.Attempt, c.LeaseToken)
	if err != nil {
		return false, err
	}
	if tag.RowsAffected() != 1 {
		return false, fmt.Errorf("no attempt %d with lease token %d", c.Attempt, c.LeaseToken)
	}
	if e := d.Scope; e.ResourceKnown && e.Resource != resource {
		// The answer names the budget this request spends: learn its
		// route, and move this operation there too.
		if err := learnRoute(ctx, tx, scopeID, method, path, e.Resource, millis(c.FinishedAt)); err != nil {
			return false, err
		}
		if _, err := tx.Exec(ctx, `UPDATE operations SET resource = $1 WHERE id = $2`, e.Resource, rowID); err != nil {
			return false, fmt.Errorf("move operation to budget %q: %w", e.Resource, err)
		}
	}
	if err := applyScopeEffect(ctx, tx, scopeID, d.Scope, c); err != nil {
		return false, err
	}
	return true, nil
}

// markStale marks the attempt of a fenced-out completion stale, unless
// something (lease recovery) finished it already.
func markStale(ctx context.Context, tx pgx.Tx, c scheduler.Completion) error {
	_, err := tx.Exec(ctx, `
		UPDATE attempts SET stale = true
		WHERE operation_id = (SELECT id FROM operations WHERE operation_id = $1)
			AND number = $2 AND lease_token = $3 AND finished_at IS NULL`,
		c.OperationID, c.Attempt, c.LeaseToken)
	return err
}

// applyScopeEffect records what an applied attempt taught about its scope,
// as the SQLite store's applyScopeEffect does.
func applyScopeEffect(ctx context.Context, tx pgx.Tx, scopeID int64, e scheduler.ScopeEffect, c scheduler.Completion) error {
	at := millis(c.FinishedAt)
	system := scheduler.Action{Actor: scheduler.SystemActor, At: c.FinishedAt, Reason: fmt.Sprintf("the provider's answer to %s (attempt %d)", c.OperationID, c.Attempt)}
	if !e.PauseUntil.IsZero() {
		// Never shortens a pause in place. A shared limit pauses every
		// scope of the group, and only those; the rows are locked in ID
		// order, and the audit names the scopes that were not paused.
		where := `id = $2`
		if e.Shared {
			where = `limit_group = (SELECT limit_group FROM scopes WHERE id = $2)`
		}
		rows, err := tx.Query(ctx, `
			WITH target AS (SELECT id, name, paused_until FROM scopes WHERE `+where+` AND paused_until < $1 ORDER BY id FOR NO KEY UPDATE),
			paused AS (UPDATE scopes s SET paused_until = $1, pause_reason = $3, updated_at = $4
				FROM target t WHERE s.id = t.id)
			SELECT name FROM target WHERE paused_until <= $4 AND $1 > $4 ORDER BY id`,
			millis(e.PauseUntil), scopeID, e.PauseReason, at)
		if err != nil {
			return fmt.Errorf("pause scope: %w", err)
		}
		newly, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("pause scope: %w", err)
		}
		for _, name := range newly {
			detail := "paused until " + e.PauseUntil.UTC().Format(time.RFC3339) + ": " + e.PauseReason
			if err := insertAudit(ctx, tx, auditRow{scope: name, action: "pause", act: system, detail: detail}); err != nil {
				return err
			}
		}
	}
	if e.Hold != "" {
		var name string
		err := tx.QueryRow(ctx, `UPDATE scopes SET hold_reason = $1, updated_at = $2 WHERE id = $3 AND hold_reason IS NULL RETURNING name`,
			string(e.Hold), at, scopeID).Scan(&name)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return fmt.Errorf("hold scope: %w", err)
		default:
			detail := fmt.Sprintf("open → held (%s): %s", e.Hold, c.Decision.Reason)
			if err := insertAudit(ctx, tx, auditRow{scope: name, action: "hold", act: system, detail: detail}); err != nil {
				return err
			}
		}
	}
	if b := e.Budget; b != nil {
		var limit *int64
		if b.Limit != 0 {
			limit = &b.Limit
		}
		// Within one window (same reset) keep the lower remaining figure;
		// a new window replaces the figures.
		_, err := tx.Exec(ctx, `
			INSERT INTO scope_budgets AS sb (scope_id, resource, remaining, "limit", reset_at) VALUES ($4, $5, $1, $2, $3)
			ON CONFLICT (scope_id, resource) DO UPDATE SET
				remaining = CASE WHEN $3::bigint IS NOT NULL AND sb.reset_at = $3::bigint THEN LEAST(sb.remaining, $1) ELSE $1 END,
				"limit" = $2, reset_at = $3`,
			b.Remaining, limit, nullMillis(b.ResetAt), scopeID, e.Resource)
		if err != nil {
			return fmt.Errorf("record budget %q: %w", e.Resource, err)
		}
	}
	if !e.BudgetPauseUntil.IsZero() {
		var name string
		err := tx.QueryRow(ctx, `
			SELECT s.name FROM scopes s LEFT JOIN scope_budgets b ON b.scope_id = s.id AND b.resource = $2
			WHERE s.id = $1 AND COALESCE(b.paused_until, 0) <= $3 AND $4 > $3`,
			scopeID, e.Resource, at, millis(e.BudgetPauseUntil)).Scan(&name)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return fmt.Errorf("pause budget %q: %w", e.Resource, err)
		default:
			which := "its default budget"
			if e.Resource != "" {
				which = "its budget " + e.Resource
			}
			detail := which + " paused until " + e.BudgetPauseUntil.UTC().Format(time.RFC3339) + ": " + e.BudgetPauseReason
			if err := insertAudit(ctx, tx, auditRow{scope: name, action: "pause", act: system, detail: detail}); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO scope_budgets AS sb (scope_id, resource, paused_until, pause_reason) VALUES ($3, $4, $1, $2)
			ON CONFLICT (scope_id, resource) DO UPDATE SET paused_until = $1, pause_reason = $2
			WHERE sb.paused_until < $1`,
			millis(e.BudgetPauseUntil), e.BudgetPauseReason, scopeID, e.Resource)
		if err != nil {
			return fmt.Errorf("pause budget %q: %w", e.Resource, err)
		}
	}
	return nil
}

// boolInt is b as 0 or 1.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
