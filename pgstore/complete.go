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

// completeAll applies cs in order in tx, their rows locked first in row
// ID order. They are taken in runs of distinct operations (a run never
// holds one operation twice, so that a second completion of it sees what
// the first did), and each run costs one statement whatever its size
// (completedRun): the fenced UPDATE of the operation rows, the UPDATE of
// their attempt rows and the stale marks of the fenced-out ones, over
// arrays of the run's values. Then, in order, each applied completion's
// route and scope effect.
func completeAll(ctx context.Context, tx pgx.Tx, cs []scheduler.Completion) ([]bool, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	rows := make([]completionRow, len(cs))
	ids := make([]string, len(cs))
	for i, c := range cs {
		var err error
		if rows[i], err = prepareCompletion(c); err != nil {
			return nil, fmt.Errorf("complete attempt %d of %s: %w", c.Attempt, c.OperationID, err)
		}
		ids[i] = c.OperationID
	}
	locked, err := tx.Query(ctx, `SELECT operation_id, id FROM operations WHERE operation_id = ANY($1) ORDER BY id FOR NO KEY UPDATE`, ids)
	if err != nil {
		return nil, fmt.Errorf("lock the completed operations: %w", err)
	}
	rowIDs := make(map[string]int64, len(cs))
	for locked.Next() {
		var (
			opID string
			id   int64
		)
		if err := locked.Scan(&opID, &id); err != nil {
			locked.Close()
			return nil, fmt.Errorf("lock the completed operations: %w", err)
		}
		rowIDs[opID] = id
	}
	if err := locked.Err(); err != nil {
		return nil, fmt.Errorf("lock the completed operations: %w", err)
	}
	for i := range rows {
		rows[i].rowID = rowIDs[rows[i].c.OperationID] // 0, which no row has, for an unknown operation
	}
	applied := make([]bool, len(cs))
	for start := 0; start < len(rows); {
		end := start + distinctRun(cs[start:])
		if err := completeRun(ctx, tx, rows[start:end], applied[start:end]); err != nil {
			return nil, err
		}
		start = end
	}
	return applied, nil
}

// distinctRun is how many of cs, from the first, are of distinct
// operations.
func distinctRun(cs []scheduler.Completion) int {
	seen := make(map[string]bool, len(cs))
	for i, c := range cs {
		if seen[c.OperationID] {
			return i
		}
		seen[c.OperationID] = true
	}
	return len(cs)
}

// completionRow is a completion with the values it stores, and what the
// fence returned of its operation when it applied.
type completionRow struct {
	c                                       scheduler.Completion
	next                                    *int64
	hold, failure                           *string
	lastOutcome                             string
	lastResponse, result, hint, attemptResp *string
	detail                                  string

	rowID, scopeID         int64
	method, path, resource string
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
	hint := stored.AttemptHint(c.Outcome.Hint)
	var err error
	r.lastOutcome, err = stored.EncodeOutcome(scheduler.OutcomeSummary{
		Class: c.Outcome.Class, Status: c.Outcome.Status, At: c.FinishedAt.UTC(),
		Hint: hint, Reason: c.Outcome.Reason, Detail: r.detail,
	})
	if err != nil {
		return completionRow{}, err
	}
	result, err := stored.EncodeResult(d.Result)
	if err != nil {
		return completionRow{}, err
	}
	lastResponse, err := stored.EncodeResult(c.Response)
	if err != nil {
		return completionRow{}, err
	}
	attemptResponse, err := stored.EncodeResult(c.AttemptResponse)
	if err != nil {
		return completionRow{}, err
	}
	hintJSON, err := stored.EncodeHint(hint)
	if err != nil {
		return completionRow{}, err
	}
	r.result, r.lastResponse, r.attemptResp, r.hint = pgString(result), pgString(lastResponse), pgString(attemptResponse), pgString(hintJSON)
	if d.State == scheduler.StateHeld {
		r.hold = nullString(string(d.HoldReason))
	}
	if d.State == scheduler.StateFailed {
		r.failure = nullString(string(d.FailureReason))
	}
	return r, nil
}

// completedRun is completeRun's statement, over the operations' row IDs
// (which the lock read) so that each row is found by its key. The fence: an operation row is
// updated only while it is still running with the completion's lease
// (u); its attempt row is finished (a); a fenced-out completion only
// marks its attempt stale, if nothing (lease recovery) finished it before
// (stale). It returns the applied completions' indexes in the run, their
// operations' scope, method, path and resource as they were, and
// whether their attempt row was found.
const completedRun = `
	WITH c AS (
		SELECT * FROM unnest($1::int[], $2::bigint[], $3::bigint[], $4::int[], $5::text[], $6::bigint[],
			$7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::bigint[], $13::bool[], $14::int[],
			$15::text[], $16::int[], $17::text[], $18::text[], $19::text[], $20::text[], $21::text[])
		AS c (k, row_id, lease_token, attempt, state, next_at,
			hold, failure, last_outcome, last_response, result, finished_at, maybe_applied, uncounted,
			class, status, hint, reason, detail, response, decision)
	),
	u AS (
		UPDATE operations o SET state = c.state, next_attempt_at = c.next_at, hold_reason = c.hold, failure_reason = c.failure,
			last_outcome = c.last_outcome, last_response = c.last_response, result = c.result, lease_expires_at = NULL,
			updated_at = c.finished_at, maybe_applied = o.maybe_applied OR c.maybe_applied,
			budget_attempts = GREATEST(o.budget_attempts - c.uncounted, 0)
		FROM c WHERE o.id = c.row_id AND o.state = 'running' AND o.lease_token = c.lease_token
		RETURNING c.k, o.scope_id, o.method, o.path, o.resource
	),
	a AS (
		UPDATE attempts a SET finished_at = c.finished_at, class = c.class, status = c.status, hint = c.hint,
			reason = c.reason, detail = c.detail, response = c.response,
			decided_state = c.state, decided_at = c.next_at, decision = c.decision
		FROM c
		WHERE c.k IN (SELECT k FROM u)
			AND a.operation_id = c.row_id AND a.number = c.attempt AND a.lease_token = c.lease_token
		RETURNING c.k
	),
	stale AS (
		UPDATE attempts a SET stale = true
		FROM c
		WHERE c.k NOT IN (SELECT k FROM u)
			AND a.operation_id = c.row_id AND a.number = c.attempt AND a.lease_token = c.lease_token AND a.finished_at IS NULL
	)
	SELECT u.k, u.scope_id, u.method, u.path, u.resource, a.k IS NOT NULL FROM u LEFT JOIN a ON a.k = u.k`

// completeRun applies rows, completions of distinct operations, setting
// applied: one statement (completedRun), then each applied one's route
// and scope effect in order.
func completeRun(ctx context.Context, tx pgx.Tx, rows []completionRow, applied []bool) error {
	n := len(rows)
	var (
		k, attempt, uncounted, status      = make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
		states, outcomes, classes          = make([]string, n), make([]string, n), make([]string, n)
		reasons, details, decisions        = make([]string, n), make([]string, n), make([]string, n)
		rowIDs, tokens, finished           = make([]int64, n), make([]int64, n), make([]int64, n)
		next                               = make([]*int64, n)
		holds, failures, lastResp, results = make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
		hints, responses                   = make([]*string, n), make([]*string, n)
		maybe                              = make([]bool, n)
	)
	for i, r := range rows {
		c, d := r.c, r.c.Decision
		k[i], rowIDs[i], tokens[i], attempt[i], states[i], next[i] = int32(i), r.rowID, c.LeaseToken, int32(c.Attempt), string(d.State), r.next
		holds[i], failures[i], outcomes[i], lastResp[i], results[i] = r.hold, r.failure, r.lastOutcome, r.lastResponse, r.result
		finished[i], maybe[i], uncounted[i] = millis(c.FinishedAt), d.MaybeApplied, int32(boolInt(d.Uncounted))
		classes[i], status[i], hints[i], reasons[i] = string(c.Outcome.Class), int32(c.Outcome.Status), r.hint, c.Outcome.Reason
		details[i], responses[i], decisions[i] = r.detail, r.attemptResp, d.Reason
	}
	res, err := tx.Query(ctx, completedRun, k, rowIDs, tokens, attempt, states, next,
		holds, failures, outcomes, lastResp, results, finished, maybe, uncounted,
		classes, status, hints, reasons, details, responses, decisions)
	if err != nil {
		return fmt.Errorf("record %d completions: %w", n, err)
	}
	defer res.Close()
	for res.Next() {
		var (
			i     int32
			r     completionRow
			found bool
		)
		if err := res.Scan(&i, &r.scopeID, &r.method, &r.path, &r.resource, &found); err != nil {
			return fmt.Errorf("record %d completions: %w", n, err)
		}
		applied[i] = true
		rows[i].scopeID, rows[i].method, rows[i].path, rows[i].resource = r.scopeID, r.method, r.path, r.resource
		if !found {
			c := rows[i].c
			return fmt.Errorf("complete attempt %d of %s: no attempt %d with lease token %d", c.Attempt, c.OperationID, c.Attempt, c.LeaseToken)
		}
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("record %d completions: %w", n, err)
	}
	for i := range rows {
		if !applied[i] {
			continue
		}
		if err := afterCompletion(ctx, tx, &rows[i]); err != nil {
			return fmt.Errorf("complete attempt %d of %s: %w", rows[i].c.Attempt, rows[i].c.OperationID, err)
		}
	}
	return nil
}

// afterCompletion applies what an applied completion's answer taught: the
// budget its request spends (its route, and this operation moved there)
// and its scope effect.
func afterCompletion(ctx context.Context, tx pgx.Tx, r *completionRow) error {
	c := r.c
	if e := c.Decision.Scope; e.ResourceKnown && e.Resource != r.resource {
		// The answer names the budget this request spends: learn its
		// route, and move this operation there too.
		if err := learnRoute(ctx, tx, r.scopeID, r.method, r.path, e.Resource, millis(c.FinishedAt)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE operations SET resource = $1 WHERE id = $2`, e.Resource, r.rowID); err != nil {
			return fmt.Errorf("move operation to budget %q: %w", e.Resource, err)
		}
	}
	return applyScopeEffect(ctx, tx, r.scopeID, c.Decision.Scope, c)
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
