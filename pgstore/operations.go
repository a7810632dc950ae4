package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"pacer/internal/stored"
	"pacer/scheduler"
)

// operationColumns are the columns scanOperation reads, in order, from
// operations o joined with scopes s and budgets b (operationFrom): the
// state, next attempt time and blocked-by are what the operation reports.
const operationColumns = `o.id, o.scope_id, o.operation_id, s.name, s.provider, o.kind, o.method, o.path,
	o.headers, o.body, o.content_type, o.request_identity, ` + opState + `, o.attempt, o.budget_attempts,
	` + opNextAttemptAt + `, o.hold_reason, o.failure_reason, o.last_outcome, o.created_at, o.updated_at,
	o.deadline, o.max_attempts, o.max_elapsed_ms, o.result, o.lease_token, o.lease_expires_at,
	o.first_sent_at, o.content_hash, o.maybe_applied, ` + opBlockedBy + `,
	o.released_from_state, o.released_from_reason`

// operationFrom is the FROM clause that goes with operationColumns.
const operationFrom = ` FROM operations o JOIN scopes s ON s.id = o.scope_id ` + operationBudgetJoin

// opRow is an operation as stored, with its row IDs.
type opRow struct {
	id      int64
	scopeID int64
	scheduler.Operation
}

// scanOperation reads operationColumns.
func scanOperation(row pgx.Row) (opRow, error) {
	var (
		r                                  opRow
		headers, lastOutcome, result       *string
		hold, failure, blockedBy           *string
		releasedFrom, releasedReason       *string
		nextAttemptAt, leaseExpires, first *int64
		createdAt, updatedAt, deadline     int64
		maxElapsedMS                       int64
		kind, state                        string
	)
	o := &r.Operation
	err := row.Scan(&r.id, &r.scopeID, &o.ID, &o.Scope, &o.Provider, &kind, &o.Request.Method, &o.Request.Path,
		&headers, &o.Request.Body, &o.Request.ContentType, &o.RequestIdentity, &state, &o.Attempt, &o.BudgetAttempts,
		&nextAttemptAt, &hold, &failure, &lastOutcome, &createdAt, &updatedAt,
		&deadline, &o.Retry.MaxAttempts, &maxElapsedMS, &result, &o.LeaseToken, &leaseExpires,
		&first, &o.ContentHash, &o.MaybeApplied, &blockedBy, &releasedFrom, &releasedReason)
	if err != nil {
		return opRow{}, err
	}
	o.Kind, o.State = scheduler.Kind(kind), scheduler.State(state)
	o.BlockedBy = scheduler.BlockedBy(deref(blockedBy))
	if releasedFrom != nil {
		rf := &scheduler.ReleasedFrom{State: scheduler.State(*releasedFrom)}
		if rf.State == scheduler.StateHeld {
			rf.HoldReason = scheduler.HoldReason(deref(releasedReason))
		} else {
			rf.FailureReason = scheduler.FailureReason(deref(releasedReason))
		}
		o.ReleasedFrom = rf
	}
	if o.Request.Headers, err = stored.DecodeHeaders(sqlString(headers)); err != nil {
		return opRow{}, fmt.Errorf("operation %s: stored headers: %w", o.ID, err)
	}
	if o.LastOutcome, err = stored.DecodeOutcome(sqlString(lastOutcome)); err != nil {
		return opRow{}, fmt.Errorf("operation %s: stored last outcome: %w", o.ID, err)
	}
	if o.Result, err = stored.DecodeResult(sqlString(result)); err != nil {
		return opRow{}, fmt.Errorf("operation %s: stored result: %w", o.ID, err)
	}
	o.NextAttemptAt = fromNullMillis(nextAttemptAt)
	o.HoldReason = scheduler.HoldReason(deref(hold))
	o.FailureReason = scheduler.FailureReason(deref(failure))
	o.CreatedAt = fromMillis(createdAt)
	o.UpdatedAt = fromMillis(updatedAt)
	o.Deadline = fromMillis(deadline)
	o.Retry.MaxElapsed = time.Duration(maxElapsedMS) * time.Millisecond
	o.LeaseExpiresAt = fromNullMillis(leaseExpires)
	o.FirstSentAt = fromNullMillis(first)
	return r, nil
}

// findOperation reads one operation by its operation ID, or ErrNotFound.
// forUpdate locks its row until the transaction ends: a manual action
// reads what it changes so, and no claim or completion changes it between
// the check and the write.
func findOperation(ctx context.Context, tx pgx.Tx, id string, forUpdate bool) (opRow, error) {
	query := `SELECT ` + operationColumns + operationFrom + `WHERE o.operation_id = $1`
	if forUpdate {
		query += ` FOR UPDATE OF o`
	}
	r, err := scanOperation(tx.QueryRow(ctx, query, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return opRow{}, scheduler.ErrNotFound
	} else if err != nil {
		return opRow{}, err
	}
	return withLastResponse(ctx, tx, r)
}

// findOperationByRowID reads one operation by row ID.
func findOperationByRowID(ctx context.Context, tx pgx.Tx, rowID int64) (opRow, error) {
	r, err := scanOperation(tx.QueryRow(ctx, `SELECT `+operationColumns+operationFrom+`WHERE o.id = $1`, rowID))
	if errors.Is(err, pgx.ErrNoRows) {
		return opRow{}, fmt.Errorf("operation row %d: %w", rowID, scheduler.ErrNotFound)
	} else if err != nil {
		return opRow{}, err
	}
	return withLastResponse(ctx, tx, r)
}

// withLastResponse adds to r its last outcome's whole response, which
// listings and claims leave out.
func withLastResponse(ctx context.Context, tx pgx.Tx, r opRow) (opRow, error) {
	if r.LastOutcome == nil {
		return r, nil
	}
	var response *string
	if err := tx.QueryRow(ctx, `SELECT last_response FROM operations WHERE id = $1`, r.id).Scan(&response); err != nil {
		return opRow{}, fmt.Errorf("operation %s: last response: %w", r.ID, err)
	}
	var err error
	if r.LastOutcome.Response, err = stored.DecodeResult(sqlString(response)); err != nil {
		return opRow{}, fmt.Errorf("operation %s: stored last response: %w", r.ID, err)
	}
	return r, nil
}

// GetOperation returns the operation or ErrNotFound.
func (s *Store) GetOperation(ctx context.Context, id string) (scheduler.Operation, error) {
	var r opRow
	err := s.read(ctx, func(tx pgx.Tx) error {
		var err error
		r, err = findOperation(ctx, tx, id, false)
		return err
	})
	if err != nil {
		return scheduler.Operation{}, fmt.Errorf("get operation %s: %w", id, err)
	}
	return r.Operation, nil
}

// ListOperations returns one page, newest first (by creation time, then
// insertion order), filtered as f says (see scheduler.Store).
func (s *Store) ListOperations(ctx context.Context, f scheduler.OperationFilter) (scheduler.OperationPage, error) {
	var page scheduler.OperationPage
	err := s.read(ctx, func(tx pgx.Tx) error {
		var err error
		page, err = listOperations(ctx, tx, f)
		return err
	})
	if err != nil {
		return scheduler.OperationPage{}, fmt.Errorf("list operations: %w", err)
	}
	return page, nil
}

func listOperations(ctx context.Context, tx pgx.Tx, f scheduler.OperationFilter) (scheduler.OperationPage, error) {
	limit := stored.PageLimit(f.Limit)
	var q query
	none, err := operationFilter(ctx, tx, f, &q)
	if err != nil || none {
		return scheduler.OperationPage{}, err
	}
	if f.Cursor != "" {
		createdAt, rowID, err := stored.DecodeCursor(f.Cursor)
		if err != nil {
			return scheduler.OperationPage{}, err
		}
		q.where("(o.created_at, o.id) < (" + q.arg(createdAt) + ", " + q.arg(rowID) + ")")
	}
	sql := `SELECT ` + operationColumns + operationFrom + q.whereClause() +
		` ORDER BY o.created_at DESC, o.id DESC LIMIT ` + q.arg(limit+1)
	rows, err := tx.Query(ctx, sql, q.args...)
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

// CountOperations counts the operations ListOperations would list for f
// over every page.
func (s *Store) CountOperations(ctx context.Context, f scheduler.OperationFilter) (int, error) {
	var n int
	err := s.read(ctx, func(tx pgx.Tx) error {
		var q query
		none, err := operationFilter(ctx, tx, f, &q)
		if err != nil || none {
			return err
		}
		sql := `SELECT COUNT(*) FROM operations o`
		if slices.ContainsFunc(q.terms, func(w string) bool { return strings.Contains(w, opState) }) {
			sql = `SELECT COUNT(*)` + operationFrom // the state reported depends on the scope
		}
		return tx.QueryRow(ctx, sql+q.whereClause(), q.args...).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("count operations: %w", err)
	}
	return n, nil
}

// query collects the WHERE terms of a listing and their arguments.
type query struct {
	terms []string
	args  []any
}

// arg adds an argument and returns its placeholder.
func (q *query) arg(v any) string {
	q.args = append(q.args, v)
	return fmt.Sprintf("$%d", len(q.args))
}

// where adds a term.
func (q *query) where(term string) { q.terms = append(q.terms, term) }

// whereClause is the WHERE clause of the terms, "" for none.
func (q *query) whereClause() string {
	if len(q.terms) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(q.terms, " AND ")
}

// operationFilter adds to q the terms selecting f's operations (without
// its cursor). none is true when nothing can match (an unknown scope).
func operationFilter(ctx context.Context, tx pgx.Tx, f scheduler.OperationFilter, q *query) (none bool, err error) {
	if f.State != "" {
		if !f.State.Valid() {
			return false, &scheduler.ValidationError{Fields: []scheduler.FieldError{{Field: "state", Message: fmt.Sprintf("%q is not a state", f.State)}}}
		}
		q.where(stored.StatesTerm([]scheduler.State{f.State}, opState))
	}
	if len(f.States) > 0 {
		for _, st := range f.States {
			if !st.Valid() {
				return false, &scheduler.ValidationError{Fields: []scheduler.FieldError{{Field: "state", Message: fmt.Sprintf("%q is not a state", st)}}}
			}
		}
		q.where(stored.StatesTerm(f.States, opState))
	}
	if f.Scope != "" {
		var scopeID int64
		err := tx.QueryRow(ctx, `SELECT id FROM scopes WHERE name = $1`, f.Scope).Scan(&scopeID)
		if errors.Is(err, pgx.ErrNoRows) {
			return true, nil
		} else if err != nil {
			return false, err
		}
		q.where("o.scope_id = " + q.arg(scopeID))
	}
	if f.Reason != "" {
		q.where("coalesce(o.hold_reason, o.failure_reason) = " + q.arg(f.Reason))
	}
	for _, b := range []struct {
		cond string
		t    time.Time
	}{
		{"o.created_at >= ", f.CreatedAfter}, {"o.created_at < ", f.CreatedBefore},
		{"o.updated_at >= ", f.UpdatedAfter}, {"o.updated_at < ", f.UpdatedBefore},
	} {
		if !b.t.IsZero() {
			q.where(b.cond + q.arg(millis(b.t)))
		}
	}
	return false, nil
}

// FindOperations returns the operations whose ID starts with prefix, in ID
// order (bytewise), at most limit: a range of the operation ID prefix
// index, so only matching IDs are read.
func (s *Store) FindOperations(ctx context.Context, prefix string, limit int) ([]scheduler.Operation, error) {
	var ops []scheduler.Operation
	err := s.read(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+operationColumns+operationFrom+`
			WHERE o.operation_id COLLATE "C" >= $1 AND o.operation_id COLLATE "C" < $2
			ORDER BY o.operation_id COLLATE "C" LIMIT $3`, prefix, prefix+"\U0010FFFF", max(limit, 1))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanOperation(rows)
			if err != nil {
				return err
			}
			ops = append(ops, r.Operation)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("find operations: %w", err)
	}
	return ops, nil
}
