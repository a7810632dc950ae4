package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"pacer/internal/stored"
	"pacer/scheduler"
)

// Complete applies completions in one transaction (see scheduler.Store).
//
// Each is fenced: it applies only while the operation is running with the
// completion's LeaseToken. An applied completion sets the decided state,
// next attempt time (NULL unless the state waits for one), hold and
// failure reasons, last outcome (its attempt's: Outcome at FinishedAt) and
// result; clears the lease expiry; records MaybeApplied on the operation
// (never unsets it); gives back the attempt's count toward MaxAttempts
// when Uncounted; finishes the attempt row (class, status, hint, reason,
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

// completeAttempts applies cs in order in tx (see Complete). They are
// taken in chunks of distinct operations, and each chunk costs three
// statements whatever its size: one read of the fence, one UPDATE of the
// operation rows, one of the attempt rows, each over a VALUES list (a
// statement's own cost in SQLite was as much as its rows'). Then, in
// order, each applied completion's route and scope effect, and each
// fenced-out one's stale mark.
func completeAttempts(ctx context.Context, tx *sql.Tx, cs []scheduler.Completion) ([]bool, error) {
	rows := make([]completionRow, len(cs))
	for i, c := range cs {
		var err error
		if rows[i], err = prepareCompletion(c); err != nil {
			return nil, fmt.Errorf("complete attempt %d of %s: %w", c.Attempt, c.OperationID, err)
		}
	}
	applied := make([]bool, len(cs))
	for start := 0; start < len(rows); {
		end := start + valuesChunk(distinctRun(cs[start:]))
		if err := completeChunk(ctx, tx, rows[start:end], applied[start:end]); err != nil {
			return nil, err
		}
		start = end
	}
	return applied, nil
}

// distinctRun is how many of cs, from the first, are of distinct
// operations (up to 32): a chunk never holds one operation twice, so
// that a second completion of it sees what the first did.
func distinctRun(cs []scheduler.Completion) int {
	seen := make(map[string]bool, min(len(cs), 32))
	for i, c := range cs {
		if seen[c.OperationID] || i == 32 {
			return i
		}
		seen[c.OperationID] = true
	}
	return len(cs)
}

// completionRow is a completion with the values it stores.
type completionRow struct {
	c                             scheduler.Completion
	next                          sql.NullInt64
	hold, failure                 sql.NullString
	hint, answer, attemptResponse sql.NullString
	detail                        string
	// Set by the fence: the operation's row, scope and resource, and the
	// attempt whose answer it kept so far.
	rowID, scopeID int64
	resource       string
	answered       sql.NullInt64
}

// prepareCompletion checks c's decision and encodes what it stores.
func prepareCompletion(c scheduler.Completion) (completionRow, error) {
	d := c.Decision
	if !d.State.Valid() || d.State == scheduler.StateRunning {
		return completionRow{}, fmt.Errorf("%w: decided state %q", scheduler.ErrInvalidTransition, d.State)
	}
	if d.State.Due() && d.NextAttemptAt.IsZero() {
		return completionRow{}, fmt.Errorf("%w: %s without a next attempt time", scheduler.ErrInvalidTransition, d.State)
	}
	r := completionRow{c: c, detail: stored.AttemptDetail(c.Outcome.Detail)}
	if d.State.Due() {
		r.next = nullMillis(d.NextAttemptAt)
	}
	if d.State == scheduler.StateHeld {
		r.hold = nullString(string(d.HoldReason))
	}
	if d.State == scheduler.StateFailed {
		r.failure = nullString(string(d.FailureReason))
	}
	// The operation's whole answer: a success's result, or the last
	// answer of one that did not succeed.
	answer := c.Response
	if d.State == scheduler.StateSucceeded {
		answer = d.Result
	}
	var err error
	if r.answer, err = encodeResult(answer); err != nil {
		return completionRow{}, err
	}
	if r.attemptResponse, err = encodeResult(c.AttemptResponse); err != nil {
		return completionRow{}, err
	}
	if r.hint, err = encodeHint(stored.AttemptHint(c.Outcome.Hint)); err != nil {
		return completionRow{}, err
	}
	return r, nil
}

// completeChunk applies rows, completions of distinct operations, setting
// applied.
func completeChunk(ctx context.Context, tx *sql.Tx, rows []completionRow, applied []bool) error {
	if err := fence(ctx, tx, rows, applied); err != nil {
		return fmt.Errorf("read the leases of %d completions: %w", len(rows), err)
	}
	var ops, attempts []any
	n := 0
	for i := range rows {
		r := &rows[i]
		if !applied[i] {
			continue
		}
		c, d := r.c, r.c.Decision
		n++
		ops = append(ops, r.rowID, c.LeaseToken, string(d.State), r.next, r.hold, r.failure, c.Attempt,
			millis(c.FinishedAt), boolInt(d.MaybeApplied), boolInt(d.Uncounted))
		attempts = append(attempts, r.rowID, c.Attempt, c.LeaseToken, millis(c.FinishedAt),
			string(c.Outcome.Class), c.Outcome.Status, r.hint, c.Outcome.Reason, r.detail, r.attemptResponse,
			r.answer, string(d.State), r.next, d.Reason)
	}
	if n > 0 {
		// Padded to the chunk's size with rows that match none (row ID
		// 0), so that the statement's text is the chunk's.
		for range len(rows) - n {
			ops = append(ops, 0, 0, "", nil, nil, nil, 0, 0, 0, 0)
			attempts = append(attempts, 0, 0, 0, 0, "", 0, nil, "", "", nil, nil, "", nil, "")
		}
		if err := updateAll(ctx, tx, completedOperationsValues, completedOperations, len(rows), ops, n); err != nil {
			return fmt.Errorf("record %d completions: %w", n, err)
		}
		if err := updateAll(ctx, tx, completedAttemptsValues, completedAttempts, len(rows), attempts, n); err != nil {
			return fmt.Errorf("finish %d attempts: %w", n, err)
		}
	}
	for i := range rows {
		r := &rows[i]
		if !applied[i] {
			if err := markStale(ctx, tx, r.c); err != nil {
				return fmt.Errorf("complete attempt %d of %s: %w", r.c.Attempt, r.c.OperationID, err)
			}
			continue
		}
		if err := afterCompletion(ctx, tx, r); err != nil {
			return fmt.Errorf("complete attempt %d of %s: %w", r.c.Attempt, r.c.OperationID, err)
		}
	}
	return nil
}

// fence reads which of rows still hold their operation's lease (running
// with the completion's lease token), setting applied and each applied
// row's operation columns.
func fence(ctx context.Context, tx *sql.Tx, rows []completionRow, applied []bool) error {
	args := make([]any, 0, 3*len(rows))
	for i, r := range rows {
		args = append(args, i, r.c.OperationID, r.c.LeaseToken)
	}
	res, err := tx.QueryContext(ctx, valuesList(fencedValues, 3, len(rows))+fenced, args...)
	if err != nil {
		return err
	}
	defer res.Close()
	for res.Next() {
		var (
			k        int
			rowID    int64
			scopeID  int64
			resource string
			answered sql.NullInt64
		)
		if err := res.Scan(&k, &rowID, &scopeID, &resource, &answered); err != nil {
			return err
		}
		r := &rows[k]
		r.rowID, r.scopeID, r.resource, r.answered = rowID, scopeID, resource, answered
		applied[k] = true
	}
	return res.Err()
}

// fenced reads the operation rows of completions (the VALUES list j
// first) that still hold their lease.
const fenced = `
	SELECT j.k, o.id, o.scope_id, o.resource, o.answered_attempt
	FROM j JOIN operations o ON o.operation_id = j.op
	WHERE o.state = 'running' AND o.lease_token = j.token`

// fencedValues names fenced's VALUES columns.
const fencedValues = "j(k, op, token)"

// completedOperations records completions on their operation rows (the
// VALUES list j first), only while each is still running with its lease.
const completedOperations = `
	UPDATE operations SET state = j.state, next_attempt_at = j.next, hold_reason = j.hold, failure_reason = j.failure,
		answered_attempt = j.attempt, lease_expires_at = NULL, updated_at = j.at,
		maybe_applied = max(maybe_applied, j.maybe), budget_attempts = max(budget_attempts - j.uncounted, 0)
	FROM j WHERE operations.id = j.id AND operations.state = 'running' AND operations.lease_token = j.token`

// completedOperationsValues names completedOperations' VALUES columns.
const completedOperationsValues = "j(id, token, state, next, hold, failure, attempt, at, maybe, uncounted)"

// completedAttempts finishes the completions' attempt rows (the VALUES
// list j first).
const completedAttempts = `
	UPDATE attempts SET finished_at = j.at, class = j.class, status = j.status, hint = j.hint, reason = j.reason,
		detail = j.detail, response = j.response, answer = j.answer, decided_state = j.decided,
		decided_at = j.decided_at, decision = j.decision
	FROM j WHERE attempts.operation_id = j.op AND attempts.number = j.number AND attempts.lease_token = j.token`

// completedAttemptsValues names completedAttempts' VALUES columns.
const completedAttemptsValues = "j(op, number, token, at, class, status, hint, reason, detail, response, answer, decided, decided_at, decision)"

// updateAll runs update after a VALUES list named values of rows rows
// (args, in order), checking that it changed want rows.
func updateAll(ctx context.Context, tx *sql.Tx, values, update string, rows int, args []any, want int) error {
	res, err := tx.ExecContext(ctx, valuesList(values, len(args)/rows, rows)+update, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != int64(want) {
		return fmt.Errorf("changed %d rows, want %d", n, want) // cannot happen: fenced in this transaction
	}
	return nil
}

// afterCompletion does, for an applied completion, what is not the same
// for every one: the previous answer cleared, the route learned, the
// scope effect applied.
func afterCompletion(ctx context.Context, tx *sql.Tx, r *completionRow) error {
	c, d := r.c, r.c.Decision
	if r.answered.Valid && r.answered.Int64 != int64(c.Attempt) {
		// One whole answer per operation: the one before is no longer its
		// last (the attempt keeps its bounded response).
		if _, err := tx.ExecContext(ctx, `UPDATE attempts SET answer = NULL WHERE operation_id = ? AND number = ?`,
			r.rowID, r.answered.Int64); err != nil {
			return fmt.Errorf("clear the previous answer: %w", err)
		}
	}
	if e := d.Scope; e.ResourceKnown && e.Resource != r.resource {
		// The answer names the budget this request spends: learn its
		// route, and move this operation there too (it was running while
		// its route moved, or this answer is the first to say).
		var method, path string
		if err := tx.QueryRowContext(ctx, `SELECT method, path FROM operation_requests WHERE id = ?`, r.rowID).Scan(&method, &path); err != nil {
			return fmt.Errorf("read the request's route: %w", err)
		}
		if err := learnRoute(ctx, tx, r.scopeID, method, path, e.Resource, millis(c.FinishedAt)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE operations SET resource = ? WHERE id = ?`, e.Resource, r.rowID); err != nil {
			return fmt.Errorf("move operation to budget %q: %w", e.Resource, err)
		}
	}
	return applyScopeEffect(ctx, tx, r.scopeID, d.Scope, c)
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
