package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"pacer/providers"
	"pacer/scheduler"
)

// Complete applies completions in one transaction (see scheduler.Store).
//
// Each is fenced: it applies only while the operation is running with the
// completion's LeaseToken. An applied completion sets the decided state,
// next attempt time (NULL unless the state waits for one), hold and failure
// reasons, last outcome (its attempt's: Outcome at FinishedAt), result; clears the
// lease expiry; records MaybeApplied on the operation (never unsets it);
// gives back the attempt's count toward MaxAttempts when Uncounted; finishes the attempt row (class, status, hint, reason,
// bounded detail, decided state and time, decision text); and applies the
// scope effect: a pause only ever lengthened, a hold, the budget figures
// replaced. A fenced-out completion changes no operation or scope: only
// its attempt row (same number and lease token) is marked stale, and only
// if nothing finished it before. applied[i] reports whether cs[i] took
// effect. An invalid decision (such as held without a reason) fails the
// whole call.
func (db *DB) Complete(ctx context.Context, cs []scheduler.Completion) ([]bool, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	applied, _, err := db.tick(ctx, cs, scheduler.ClaimParams{})
	if err != nil {
		return nil, fmt.Errorf("complete attempts: %w", err)
	}
	return applied, nil
}

func completeAttempt(ctx context.Context, tx *sql.Tx, c scheduler.Completion) (bool, error) {
	d := c.Decision
	if !d.State.Valid() || d.State == scheduler.StateRunning {
		return false, fmt.Errorf("%w: decided state %q", scheduler.ErrInvalidTransition, d.State)
	}
	if d.State.Due() && d.NextAttemptAt.IsZero() {
		return false, fmt.Errorf("%w: %s without a next attempt time", scheduler.ErrInvalidTransition, d.State)
	}
	var next sql.NullInt64
	if d.State.Due() {
		next = nullMillis(d.NextAttemptAt)
	}
	hint := hintOf(c.Outcome.Hint)
	detail := bound(c.Outcome.Detail, providers.MaxDetail)
	// The operation's whole answer: a success's result, or the last
	// answer of one that did not succeed.
	answer := c.Response
	if d.State == scheduler.StateSucceeded {
		answer = d.Result
	}
	answerJSON, err := encodeResult(answer)
	if err != nil {
		return false, err
	}
	attemptResponse, err := encodeResult(c.AttemptResponse)
	if err != nil {
		return false, err
	}
	hintJSON, err := encodeHint(hint)
	if err != nil {
		return false, err
	}
	var hold, failure sql.NullString
	if d.State == scheduler.StateHeld {
		hold = nullString(string(d.HoldReason))
	}
	if d.State == scheduler.StateFailed {
		failure = nullString(string(d.FailureReason))
	}

	// The fence: read the row, then update it by row ID only while it is
	// still running with this lease (an UPDATE … RETURNING costs SQLite an
	// ephemeral table per statement, several times a plain UPDATE).
	var (
		rowID, scopeID int64
		resource       string
		answered       sql.NullInt64
	)
	err = tx.QueryRowContext(ctx, `SELECT id, scope_id, resource, answered_attempt FROM operations
		WHERE operation_id = ? AND state = 'running' AND lease_token = ?`,
		c.OperationID, c.LeaseToken).Scan(&rowID, &scopeID, &resource, &answered)
	if errors.Is(err, sql.ErrNoRows) {
		return false, markStale(ctx, tx, c)
	} else if err != nil {
		return false, err
	}
	res, err := tx.ExecContext(ctx, `
		UPDATE operations SET state = ?, next_attempt_at = ?, hold_reason = ?, failure_reason = ?,
			answered_attempt = ?, lease_expires_at = NULL, updated_at = ?,
			maybe_applied = max(maybe_applied, ?), budget_attempts = max(budget_attempts - ?, 0)
		WHERE id = ? AND state = 'running' AND lease_token = ?`,
		string(d.State), next, hold, failure, c.Attempt, millis(c.FinishedAt),
		boolInt(d.MaybeApplied), boolInt(d.Uncounted),
		rowID, c.LeaseToken)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return false, err
	} else if n != 1 {
		return false, fmt.Errorf("operation row %d changed under its completion", rowID) // cannot happen: read in this transaction
	}

	res, err = tx.ExecContext(ctx, `
		UPDATE attempts SET finished_at = ?, class = ?, status = ?, hint = ?, reason = ?, detail = ?, response = ?,
			answer = ?, decided_state = ?, decided_at = ?, decision = ?
		WHERE operation_id = ? AND number = ? AND lease_token = ?`,
		millis(c.FinishedAt), string(c.Outcome.Class), c.Outcome.Status, hintJSON, c.Outcome.Reason, detail, attemptResponse,
		answerJSON, string(d.State), next, d.Reason,
		rowID, c.Attempt, c.LeaseToken)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return false, err
	} else if n != 1 {
		return false, fmt.Errorf("no attempt %d with lease token %d", c.Attempt, c.LeaseToken)
	}
	if answered.Valid && answered.Int64 != int64(c.Attempt) {
		// One whole answer per operation: the one before is no longer its
		// last (the attempt keeps its bounded response).
		if _, err := tx.ExecContext(ctx, `UPDATE attempts SET answer = NULL WHERE operation_id = ? AND number = ?`,
			rowID, answered.Int64); err != nil {
			return false, fmt.Errorf("clear the previous answer: %w", err)
		}
	}
	if e := d.Scope; e.ResourceKnown && e.Resource != resource {
		// The answer names the budget this request spends: learn its
		// route, and move this operation there too (it was running while
		// its route moved, or this answer is the first to say).
		var method, path string
		if err := tx.QueryRowContext(ctx, `SELECT method, path FROM operation_requests WHERE id = ?`, rowID).Scan(&method, &path); err != nil {
			return false, fmt.Errorf("read the request's route: %w", err)
		}
		if err := learnRoute(ctx, tx, scopeID, method, path, e.Resource, millis(c.FinishedAt)); err != nil {
			return false, err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE operations SET resource = ? WHERE id = ?`, e.Resource, rowID); err != nil {
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
func markStale(ctx context.Context, tx *sql.Tx, c scheduler.Completion) error {
	_, err := tx.ExecContext(ctx, `
		UPDATE attempts SET stale = 1
		WHERE operation_id = (SELECT id FROM operations WHERE operation_id = ?)
			AND number = ? AND lease_token = ? AND finished_at IS NULL`,
		c.OperationID, c.Attempt, c.LeaseToken)
	return err
}

// applyScopeEffect records what an applied attempt taught about its scope.
func applyScopeEffect(ctx context.Context, tx *sql.Tx, scopeID int64, e scheduler.ScopeEffect, c scheduler.Completion) error {
	at := millis(c.FinishedAt)
	// What the provider's answer does to a scope on its own is audited as
	// pacer's entry (issue 14): a hold, and a pause of a scope that was
	// not paused (a pause only lengthened is the same episode).
	system := scheduler.Action{Actor: scheduler.SystemActor, At: c.FinishedAt, Reason: fmt.Sprintf("the provider's answer to %s (attempt %d)", c.OperationID, c.Attempt)}
	if !e.PauseUntil.IsZero() {
		// Never shortens a pause in place. A shared limit pauses every
		// scope of the group, and only those.
		where := `id = ?4`
		if e.Shared {
			where = `limit_group = (SELECT limit_group FROM scopes WHERE id = ?4)`
		}
		rows, err := tx.QueryContext(ctx, `SELECT name FROM scopes WHERE `+where+` AND paused_until <= ?3 AND ?1 > ?3`,
			millis(e.PauseUntil), e.PauseReason, at, scopeID) // the parameters of the UPDATE below
		if err != nil {
			return fmt.Errorf("pause scope: %w", err)
		}
		var newly []string
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				rows.Close()
				return fmt.Errorf("pause scope: %w", err)
			}
			newly = append(newly, name)
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("pause scope: %w", err)
		}
		_, err = tx.ExecContext(ctx, `
			UPDATE scopes SET paused_until = ?1, pause_reason = ?2, updated_at = ?3
			WHERE `+where+` AND paused_until < ?1`,
			millis(e.PauseUntil), e.PauseReason, at, scopeID)
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
		res, err := tx.ExecContext(ctx, `UPDATE scopes SET hold_reason = ?, updated_at = ? WHERE id = ? AND hold_reason IS NULL`,
			string(e.Hold), at, scopeID)
		if err != nil {
			return fmt.Errorf("hold scope: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n > 0 {
			var name string
			if err := tx.QueryRowContext(ctx, `SELECT name FROM scopes WHERE id = ?`, scopeID).Scan(&name); err != nil {
				return fmt.Errorf("hold scope: %w", err)
			}
			detail := fmt.Sprintf("open → held (%s): %s", e.Hold, c.Decision.Reason)
			if err := insertAudit(ctx, tx, auditRow{scope: name, action: "hold", act: system, detail: detail}); err != nil {
				return err
			}
		}
	}
	if b := e.Budget; b != nil {
		var limit sql.NullInt64
		if b.Limit != 0 {
			limit = sql.NullInt64{Int64: b.Limit, Valid: true}
		}
		// Within one window (same reset) answers may arrive out of order
		// and the claim already counted requests still in flight: keep the
		// lower remaining figure. A new window replaces the figures.
		_, err := tx.ExecContext(ctx, `
			INSERT INTO scope_budgets (scope_id, resource, remaining, "limit", reset_at) VALUES (?4, ?5, ?1, ?2, ?3)
			ON CONFLICT (scope_id, resource) DO UPDATE SET
				remaining = CASE WHEN ?3 IS NOT NULL AND reset_at = ?3 THEN MIN(remaining, ?1) ELSE ?1 END,
				"limit" = ?2, reset_at = ?3`,
			b.Remaining, limit, nullMillis(b.ResetAt), scopeID, e.Resource)
		if err != nil {
			return fmt.Errorf("record budget %q: %w", e.Resource, err)
		}
	}
	if !e.BudgetPauseUntil.IsZero() {
		// Pauses only the requests spending this budget; never shortens
		// a pause in place. A budget that was not paused gets pacer's
		// audit entry on its scope.
		var name string
		err := tx.QueryRowContext(ctx, `
			SELECT s.name FROM scopes s LEFT JOIN scope_budgets b ON b.scope_id = s.id AND b.resource = ?2
			WHERE s.id = ?1 AND COALESCE(b.paused_until, 0) <= ?3 AND ?4 > ?3`,
			scopeID, e.Resource, at, millis(e.BudgetPauseUntil)).Scan(&name)
		switch {
		case errors.Is(err, sql.ErrNoRows):
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
		_, err = tx.ExecContext(ctx, `
			INSERT INTO scope_budgets (scope_id, resource, paused_until, pause_reason) VALUES (?3, ?4, ?1, ?2)
			ON CONFLICT (scope_id, resource) DO UPDATE SET paused_until = ?1, pause_reason = ?2
			WHERE paused_until < ?1`,
			millis(e.BudgetPauseUntil), e.BudgetPauseReason, scopeID, e.Resource)
		if err != nil {
			return fmt.Errorf("pause budget %q: %w", e.Resource, err)
		}
	}
	return nil
}

// boolInt is b as SQLite stores a boolean.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// hintOf returns the hint to store, nil when the answer carried none.
func hintOf(h providers.Hint) *providers.Hint {
	if h == (providers.Hint{}) {
		return nil
	}
	h.At = h.At.UTC()
	return &h
}

// bound cuts s to at most n bytes on a UTF-8 boundary.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
