package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"pacer/internal/stored"
	"pacer/providers"
	"pacer/scheduler"
)

// operationColumns are the columns scanOperation reads, in order, from
// operations o joined with scopes s, its request r and its answered
// attempt a (operationJoins). The state, next attempt time and blocked-by
// are what the operation reports (opState, opNextAttemptAt, opBlockedBy):
// what its scope does to it is computed here, at read time. The last
// outcome is the answered attempt's; its whole answer is the operation's
// result when that attempt succeeded (otherwise it is the last outcome's
// Response, read with one operation alone: withLastResponse).
const operationColumns = `o.id, o.scope_id, o.operation_id, s.name, s.provider, r.kind, r.method, r.path,
	r.headers, r.body, r.content_type, r.request_identity, ` + opState + `, o.attempt, o.budget_attempts,
	` + opNextAttemptAt + `, o.hold_reason, o.failure_reason, o.created_at, o.updated_at,
	o.deadline, r.max_attempts, r.max_elapsed_ms, o.lease_token, o.lease_expires_at,
	o.first_sent_at, r.content_hash, o.maybe_applied, ` + opBlockedBy + `,
	o.released_from_state, o.released_from_reason, ` + answeredColumns

// answeredColumns are the answered attempt's columns scanOperation reads
// last: what the operation shows as its last outcome, and its result.
const answeredColumns = `a.class, a.status, a.finished_at, a.hint, a.reason, a.detail,
	CASE WHEN a.decided_state = 'succeeded' THEN a.answer END`

// operationJoins joins an operation o with its request r and its answered
// attempt a (none before its first answer).
const operationJoins = ` JOIN operation_requests r ON r.id = o.id
	LEFT JOIN attempts a ON a.operation_id = o.id AND a.number = o.answered_attempt `

// operationFrom is the FROM clause that goes with operationColumns.
const operationFrom = ` FROM operations o JOIN scopes s ON s.id = o.scope_id ` + operationJoins + operationBudgetJoin

// opRow is an operation as stored, with its row IDs.
type opRow struct {
	id      int64
	scopeID int64
	scheduler.Operation
}

// scanOperation reads operationColumns.
func scanOperation(row interface{ Scan(...any) error }) (opRow, error) {
	var (
		r                                  opRow
		headers, result                    sql.NullString
		hold, failure, blockedBy           sql.NullString
		releasedFrom, releasedReason       sql.NullString
		nextAttemptAt, leaseExpires, first sql.NullInt64
		createdAt, updatedAt, deadline     int64
		maxElapsedMS                       int64
		last                               answeredAttempt
	)
	o := &r.Operation
	err := row.Scan(&r.id, &r.scopeID, &o.ID, &o.Scope, &o.Provider, &o.Kind, &o.Request.Method, &o.Request.Path,
		&headers, &o.Request.Body, &o.Request.ContentType, &o.RequestIdentity, &o.State, &o.Attempt, &o.BudgetAttempts,
		&nextAttemptAt, &hold, &failure, &createdAt, &updatedAt,
		&deadline, &o.Retry.MaxAttempts, &maxElapsedMS, &o.LeaseToken, &leaseExpires,
		&first, &o.ContentHash, &o.MaybeApplied, &blockedBy, &releasedFrom, &releasedReason,
		&last.class, &last.status, &last.finishedAt, &last.hint, &last.reason, &last.detail, &result)
	if err != nil {
		return opRow{}, err
	}
	o.BlockedBy = scheduler.BlockedBy(blockedBy.String)
	if releasedFrom.Valid {
		rf := &scheduler.ReleasedFrom{State: scheduler.State(releasedFrom.String)}
		if rf.State == scheduler.StateHeld {
			rf.HoldReason = scheduler.HoldReason(releasedReason.String)
		} else {
			rf.FailureReason = scheduler.FailureReason(releasedReason.String)
		}
		o.ReleasedFrom = rf
	}
	if o.Request.Headers, err = decodeHeaders(headers); err != nil {
		return opRow{}, fmt.Errorf("operation %s: stored headers: %w", o.ID, err)
	}
	if o.LastOutcome, err = last.outcome(); err != nil {
		return opRow{}, fmt.Errorf("operation %s: stored last outcome: %w", o.ID, err)
	}
	if o.Result, err = decodeResult(result); err != nil {
		return opRow{}, fmt.Errorf("operation %s: stored result: %w", o.ID, err)
	}
	o.NextAttemptAt = fromNullMillis(nextAttemptAt)
	o.HoldReason = scheduler.HoldReason(hold.String)
	o.FailureReason = scheduler.FailureReason(failure.String)
	o.CreatedAt = fromMillis(createdAt)
	o.UpdatedAt = fromMillis(updatedAt)
	o.Deadline = fromMillis(deadline)
	o.Retry.MaxElapsed = time.Duration(maxElapsedMS) * time.Millisecond
	o.LeaseExpiresAt = fromNullMillis(leaseExpires)
	o.FirstSentAt = fromNullMillis(first)
	return r, nil
}

// findOperation reads one operation by its operation ID, or ErrNotFound.
func findOperation(ctx context.Context, tx *sql.Tx, id string) (opRow, error) {
	r, err := scanOperation(tx.QueryRowContext(ctx, `SELECT `+operationColumns+operationFrom+`WHERE o.operation_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return opRow{}, scheduler.ErrNotFound
	} else if err != nil {
		return opRow{}, err
	}
	return withLastResponse(ctx, tx, r)
}

// findOperationByRowID reads one operation by row ID.
func findOperationByRowID(ctx context.Context, tx *sql.Tx, rowID int64) (opRow, error) {
	r, err := scanOperation(tx.QueryRowContext(ctx, `SELECT `+operationColumns+operationFrom+`WHERE o.id = ?`, rowID))
	if errors.Is(err, sql.ErrNoRows) {
		return opRow{}, fmt.Errorf("operation row %d: %w", rowID, scheduler.ErrNotFound)
	} else if err != nil {
		return opRow{}, err
	}
	return withLastResponse(ctx, tx, r)
}

// answeredAttempt is the answered attempt's columns of operationColumns.
type answeredAttempt struct {
	class, hint        sql.NullString
	status, finishedAt sql.NullInt64
	reason, detail     sql.NullString
}

// outcome is the last outcome the answered attempt's columns say; nil
// when there is no answered attempt.
func (a answeredAttempt) outcome() (*scheduler.OutcomeSummary, error) {
	if !a.class.Valid {
		return nil, nil
	}
	hint, err := decodeHint(a.hint)
	if err != nil {
		return nil, err
	}
	return &scheduler.OutcomeSummary{
		Class: providers.Class(a.class.String), Status: int(a.status.Int64), At: fromMillis(a.finishedAt.Int64),
		Hint: hint, Reason: a.reason.String, Detail: a.detail.String,
	}, nil
}

// withLastResponse adds to r, read alone, its last outcome's whole
// response (the answered attempt's answer, unless it succeeded: then it
// is r's Result): listings and claims leave it out, as it may be as large
// as the result limit.
func withLastResponse(ctx context.Context, tx *sql.Tx, r opRow) (opRow, error) {
	if r.LastOutcome == nil {
		return r, nil
	}
	var response sql.NullString
	err := tx.QueryRowContext(ctx, `
		SELECT a.answer FROM operations o JOIN attempts a ON a.operation_id = o.id AND a.number = o.answered_attempt
		WHERE o.id = ? AND a.decided_state IS NOT 'succeeded'`, r.id).Scan(&response)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return opRow{}, fmt.Errorf("operation %s: last response: %w", r.ID, err)
	}
	if r.LastOutcome.Response, err = decodeResult(response); err != nil {
		return opRow{}, fmt.Errorf("operation %s: stored last response: %w", r.ID, err)
	}
	return r, nil
}

// GetOperation returns the operation or ErrNotFound.
func (db *DB) GetOperation(ctx context.Context, id string) (scheduler.Operation, error) {
	tx, err := db.beginRead(ctx)
	if err != nil {
		return scheduler.Operation{}, fmt.Errorf("get operation %s: %w", id, err)
	}
	defer tx.Rollback()
	r, err := findOperation(ctx, tx, id)
	if err != nil {
		return scheduler.Operation{}, fmt.Errorf("get operation %s: %w", id, err)
	}
	return r.Operation, nil
}

// ListOperations returns one page, newest first (by creation time, then
// insertion order), filtered by state, scope, hold or failure reason and
// creation and update time ranges. f.Limit outside 1..1000 is
// clamped (0 means stored.DefaultPageSize). A cursor that is not a previous page's
// Next is a *scheduler.ValidationError naming the field "cursor".
func (db *DB) ListOperations(ctx context.Context, f scheduler.OperationFilter) (scheduler.OperationPage, error) {
	tx, err := db.beginRead(ctx)
	if err != nil {
		return scheduler.OperationPage{}, fmt.Errorf("list operations: %w", err)
	}
	defer tx.Rollback()
	page, err := listOperations(ctx, tx, f)
	if err != nil {
		return scheduler.OperationPage{}, fmt.Errorf("list operations: %w", err)
	}
	return page, nil
}

// FindOperations returns the operations whose ID starts with prefix, in ID
// order, at most limit (see scheduler.Store): a range of the operation ID
// index, from prefix to prefix followed by the greatest code point, so only
// matching IDs are read.
func (db *DB) FindOperations(ctx context.Context, prefix string, limit int) ([]scheduler.Operation, error) {
	tx, err := db.beginRead(ctx)
	if err != nil {
		return nil, fmt.Errorf("find operations: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, findOperations, prefix, prefix+"\U0010FFFF", max(limit, 1))
	if err != nil {
		return nil, fmt.Errorf("find operations: %w", err)
	}
	defer rows.Close()
	var ops []scheduler.Operation
	for rows.Next() {
		r, err := scanOperation(rows)
		if err != nil {
			return nil, fmt.Errorf("find operations: %w", err)
		}
		ops = append(ops, r.Operation)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("find operations: %w", err)
	}
	return ops, nil
}

// findOperations selects the operations with IDs in [?1, ?2), in ID
// order, at most ?3.
const findOperations = `SELECT ` + operationColumns + operationFrom + `
	WHERE o.operation_id >= ?1 AND o.operation_id < ?2
	ORDER BY o.operation_id LIMIT CAST(?3 AS INTEGER)`

func listOperations(ctx context.Context, tx *sql.Tx, f scheduler.OperationFilter) (scheduler.OperationPage, error) {
	limit := stored.PageLimit(f.Limit)
	where, args, none, err := operationFilter(ctx, tx, f)
	if err != nil || none {
		return scheduler.OperationPage{}, err
	}
	if f.Cursor != "" {
		createdAt, rowID, err := stored.DecodeCursor(f.Cursor)
		if err != nil {
			return scheduler.OperationPage{}, err
		}
		where = append(where, "(o.created_at, o.id) < (?, ?)")
		args = append(args, createdAt, rowID)
	}
	query := `SELECT ` + operationColumns + operationFrom
	if len(where) > 0 {
		query += "WHERE " + strings.Join(where, " AND ")
	}
	query += ` ORDER BY o.created_at DESC, o.id DESC LIMIT ?`
	args = append(args, limit+1)

	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return scheduler.OperationPage{}, err
	}
	defer rows.Close()
	var (
		page scheduler.OperationPage
		last opRow
	)
	for rows.Next() {
		r, err := scanOperation(rows)
		if err != nil {
			return scheduler.OperationPage{}, err
		}
		if len(page.Operations) == limit {
			page.Next = stored.EncodeCursor(millis(last.CreatedAt), last.id)
			break
		}
		page.Operations = append(page.Operations, r.Operation)
		last = r
	}
	return page, rows.Err()
}

// operationFilter returns the WHERE terms and arguments selecting f's
// operations (without its cursor), for operations o joined with scopes s
// (operationFrom). none is true when nothing can match (an unknown scope).
// States match what operations report (opState), so a listing agrees with
// the resources it lists.
func operationFilter(ctx context.Context, tx *sql.Tx, f scheduler.OperationFilter) (where []string, args []any, none bool, err error) {
	if f.State != "" {
		where = append(where, stored.StatesTerm([]scheduler.State{f.State}, opState))
	}
	if len(f.States) > 0 {
		// The states are checked against the enum and written as literals.
		for _, st := range f.States {
			if !st.Valid() {
				return nil, nil, false, &scheduler.ValidationError{Fields: []scheduler.FieldError{{Field: "state", Message: fmt.Sprintf("%q is not a state", st)}}}
			}
		}
		where = append(where, stored.StatesTerm(f.States, opState))
	}
	if f.Scope != "" {
		var scopeID int64
		err := tx.QueryRowContext(ctx, `SELECT id FROM scopes WHERE name = ?`, f.Scope).Scan(&scopeID)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil, true, nil
		} else if err != nil {
			return nil, nil, false, err
		}
		where = append(where, "o.scope_id = ?")
		args = append(args, scopeID)
	}
	if f.Reason != "" {
		// Held rows have only a hold reason, failed rows only a failure
		// reason (schema CHECKs), so one expression (indexed) covers both.
		where = append(where, "coalesce(o.hold_reason, o.failure_reason) = ?")
		args = append(args, f.Reason)
	}
	for _, b := range []struct {
		cond string
		t    time.Time
	}{
		{"o.created_at >= ?", f.CreatedAfter}, {"o.created_at < ?", f.CreatedBefore},
		{"o.updated_at >= ?", f.UpdatedAfter}, {"o.updated_at < ?", f.UpdatedBefore},
	} {
		if !b.t.IsZero() {
			where = append(where, b.cond)
			args = append(args, millis(b.t))
		}
	}
	return where, args, false, nil
}

// ReleaseOperation moves an operation that CanRelease to scheduled at
// `at` with a fresh retry budget (see scheduler.Store) and records act
// ("release"). A *scheduler.TransitionError for other states, ErrNotFound
// for unknown IDs.
func (db *DB) ReleaseOperation(ctx context.Context, id string, at time.Time, act scheduler.Action) (scheduler.Operation, error) {
	return db.release(ctx, id, at, act, scheduler.ActRelease)
}

// ReleaseUnapplied releases, as ReleaseOperation does, an operation that
// CanResolve, in the same transaction as the check (see scheduler.Store).
func (db *DB) ReleaseUnapplied(ctx context.Context, id string, at time.Time, act scheduler.Action) (scheduler.Operation, error) {
	return db.release(ctx, id, at, act, scheduler.ActResolve)
}

// release runs releaseOperation in its own transaction; its errors are
// named after the action refused or attempted (release, or resolve).
func (db *DB) release(ctx context.Context, id string, at time.Time, act scheduler.Action, allowed scheduler.ManualAction) (scheduler.Operation, error) {
	tx, err := db.beginWrite(ctx)
	if err != nil {
		return scheduler.Operation{}, fmt.Errorf("%s %s: %w", allowed, id, err)
	}
	defer tx.Rollback()
	r, err := releaseOperation(ctx, tx, id, at, act, allowed)
	if err != nil {
		return scheduler.Operation{}, fmt.Errorf("%s %s: %w", allowed, id, err)
	}
	if err := tx.Commit(); err != nil {
		return scheduler.Operation{}, fmt.Errorf("%s %s: %w", allowed, id, err)
	}
	return r.Operation, nil
}

// releaseOperation releases the operation when its state allows the
// manual action allowed (release, or the resolve of one not applied).
func releaseOperation(ctx context.Context, tx *sql.Tx, id string, at time.Time, act scheduler.Action, allowed scheduler.ManualAction) (opRow, error) {
	r, err := findOperation(ctx, tx, id)
	if err != nil {
		return opRow{}, err
	}
	if err := r.Allow(allowed); err != nil {
		return opRow{}, err
	}
	// What it is released from, kept while the release is not sent so
	// that it can be undone; a change of a pending release keeps it.
	from := r.ReleaseOrigin()
	_, err = tx.ExecContext(ctx, `
		UPDATE operations SET state = 'scheduled', next_attempt_at = ?, hold_reason = NULL,
			failure_reason = NULL, budget_attempts = 0, deadline = ?, updated_at = ?,
			released_from_state = ?, released_from_reason = ?
		WHERE id = ?`,
		millis(at), millis(at.Add(r.Retry.MaxElapsed)), millis(act.At), string(from.State), from.Reason(), r.id)
	if err != nil {
		return opRow{}, err
	}
	// Audited as what it is: a release, or the resolve of an operation
	// that was not applied and is sent again (design §14).
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

// UnreleaseOperation undoes a release not sent yet (see scheduler.Store):
// the operation goes back to the state and reason it was released from
// and records act ("unrelease"). A *scheduler.TransitionError when there
// is no such release, ErrNotFound for unknown IDs.
func (db *DB) UnreleaseOperation(ctx context.Context, id string, act scheduler.Action) (scheduler.Operation, error) {
	tx, err := db.beginWrite(ctx)
	if err != nil {
		return scheduler.Operation{}, fmt.Errorf("unrelease %s: %w", id, err)
	}
	defer tx.Rollback()
	r, err := findOperation(ctx, tx, id)
	if err == nil {
		err = r.Allow(scheduler.ActUnrelease)
	}
	if err != nil {
		return scheduler.Operation{}, fmt.Errorf("unrelease %s: %w", id, err)
	}
	rf := r.ReleasedFrom
	var hold, failure sql.NullString
	if rf.State == scheduler.StateHeld {
		hold = nullString(string(rf.HoldReason))
	} else {
		failure = nullString(string(rf.FailureReason))
	}
	_, err = tx.ExecContext(ctx, `
		UPDATE operations SET state = ?, next_attempt_at = NULL, hold_reason = ?, failure_reason = ?, updated_at = ?,
			released_from_state = NULL, released_from_reason = NULL
		WHERE id = ?`,
		string(rf.State), hold, failure, millis(act.At), r.id)
	if err != nil {
		return scheduler.Operation{}, fmt.Errorf("unrelease %s: %w", id, err)
	}
	detail := fmt.Sprintf("%s (released, not sent) → %s", r.DescribeState(), rf.Describe())
	if err := insertAudit(ctx, tx, auditRow{opRowID: r.id, scope: r.Scope, action: string(scheduler.ActUnrelease), act: act, detail: detail}); err != nil {
		return scheduler.Operation{}, fmt.Errorf("unrelease %s: %w", id, err)
	}
	out, err := findOperationByRowID(ctx, tx, r.id)
	if err != nil {
		return scheduler.Operation{}, fmt.Errorf("unrelease %s: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return scheduler.Operation{}, fmt.Errorf("unrelease %s: %w", id, err)
	}
	return out.Operation, nil
}

// ResolveOperation ends an operation that CanResolve as succeeded, or as
// failed with FailureResolvedFailed, and records act ("resolve"). A person
// settled what happened, so MaybeApplied is cleared. A
// *scheduler.TransitionError otherwise.
func (db *DB) ResolveOperation(ctx context.Context, id string, succeeded bool, act scheduler.Action) (scheduler.Operation, error) {
	tx, err := db.beginWrite(ctx)
	if err != nil {
		return scheduler.Operation{}, fmt.Errorf("resolve %s: %w", id, err)
	}
	defer tx.Rollback()
	r, err := resolveOperation(ctx, tx, id, succeeded, act)
	if err != nil {
		return scheduler.Operation{}, fmt.Errorf("resolve %s: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return scheduler.Operation{}, fmt.Errorf("resolve %s: %w", id, err)
	}
	return r.Operation, nil
}

func resolveOperation(ctx context.Context, tx *sql.Tx, id string, succeeded bool, act scheduler.Action) (opRow, error) {
	r, err := findOperation(ctx, tx, id)
	if err != nil {
		return opRow{}, err
	}
	if err := r.Allow(scheduler.ActResolve); err != nil {
		return opRow{}, err
	}
	to, failure := scheduler.StateSucceeded, sql.NullString{}
	if !succeeded {
		to, failure = scheduler.StateFailed, nullString(string(scheduler.FailureResolvedFailed))
	}
	_, err = tx.ExecContext(ctx, `
		UPDATE operations SET state = ?, hold_reason = NULL, failure_reason = ?, next_attempt_at = NULL,
			maybe_applied = 0, updated_at = ?
		WHERE id = ?`,
		string(to), failure, millis(act.At), r.id)
	if err != nil {
		return opRow{}, err
	}
	detail := fmt.Sprintf("%s → %s", r.DescribeState(), to)
	if err := insertAudit(ctx, tx, auditRow{opRowID: r.id, scope: r.Scope, action: string(scheduler.ActResolve), act: act, detail: detail}); err != nil {
		return opRow{}, err
	}
	return findOperationByRowID(ctx, tx, r.id)
}

// CancelOperation cancels an operation that CanCancel and records act
// ("cancel"); a *scheduler.TransitionError otherwise (a running
// operation's request is already on its way).
func (db *DB) CancelOperation(ctx context.Context, id string, act scheduler.Action) (scheduler.Operation, error) {
	tx, err := db.beginWrite(ctx)
	if err != nil {
		return scheduler.Operation{}, fmt.Errorf("cancel %s: %w", id, err)
	}
	defer tx.Rollback()
	r, err := cancelOperation(ctx, tx, id, act)
	if err != nil {
		return scheduler.Operation{}, fmt.Errorf("cancel %s: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return scheduler.Operation{}, fmt.Errorf("cancel %s: %w", id, err)
	}
	return r.Operation, nil
}

// ActOnOperations releases (at `at`) or cancels the operations ids in one
// transaction, each audited as ReleaseOperation and CancelOperation audit
// it, skipping those whose state does not allow it or that do not exist
// (see scheduler.Store).
func (db *DB) ActOnOperations(ctx context.Context, a scheduler.ManualAction, ids []string, at time.Time, act scheduler.Action) (int, error) {
	if a != scheduler.ActRelease && a != scheduler.ActCancel {
		return 0, fmt.Errorf("act on operations: %s is not an action on many", a)
	}
	tx, err := db.beginWrite(ctx)
	if err != nil {
		return 0, fmt.Errorf("%s operations: %w", a, err)
	}
	defer tx.Rollback()
	changed := 0
	for _, id := range ids {
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
			return 0, fmt.Errorf("%s %s: %w", a, id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("%s operations: %w", a, err)
	}
	return changed, nil
}

func cancelOperation(ctx context.Context, tx *sql.Tx, id string, act scheduler.Action) (opRow, error) {
	r, err := findOperation(ctx, tx, id)
	if err != nil {
		return opRow{}, err
	}
	if err := r.Allow(scheduler.ActCancel); err != nil {
		return opRow{}, err
	}
	_, err = tx.ExecContext(ctx, `
		UPDATE operations SET state = 'canceled', hold_reason = NULL, failure_reason = NULL,
			next_attempt_at = NULL, updated_at = ?
		WHERE id = ?`, millis(act.At), r.id)
	if err != nil {
		return opRow{}, err
	}
	detail := fmt.Sprintf("%s → canceled", r.DescribeState())
	if err := insertAudit(ctx, tx, auditRow{opRowID: r.id, scope: r.Scope, action: string(scheduler.ActCancel), act: act, detail: detail}); err != nil {
		return opRow{}, err
	}
	return findOperationByRowID(ctx, tx, r.id)
}
