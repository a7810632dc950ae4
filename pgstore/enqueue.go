package pgstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"

	"pacer/internal/stored"
	"pacer/providers"
	"pacer/scheduler"
)

// Enqueue stores ops in one transaction, each with its own result (see
// scheduler.Store), as the SQLite store does. Every rejection is found
// before anything of its item is written (the scope looked up, the
// operation ID inserted ON CONFLICT DO NOTHING, the request identity
// searched), so no statement fails and the transaction, which any error
// would abort, goes on with the other items. A request identity a
// provider deduplicates is searched under a transaction-scoped advisory
// lock on (scope, identity): two processes enqueueing the same identity
// at once take turns, and the second sees the first's operation.
func (s *Store) Enqueue(ctx context.Context, ops []scheduler.NewOperation, now time.Time) ([]scheduler.EnqueueResult, error) {
	var results []scheduler.EnqueueResult
	err := s.write(ctx, func(tx pgx.Tx) error {
		scopes := map[string]scopeRef{}
		results = make([]scheduler.EnqueueResult, len(ops))
		created := map[int64]int{} // row ID → index of a new operation's result
		for i, op := range ops {
			var (
				rowID int64
				err   error
			)
			if results[i], rowID, err = enqueueOne(ctx, tx, op, now, scopes); err != nil {
				return fmt.Errorf("enqueue %s: %w", op.ID, err)
			}
			if results[i].Created {
				created[rowID] = i
			}
		}
		return readReported(ctx, tx, created, results)
	})
	if err != nil {
		return nil, fmt.Errorf("enqueue: %w", err)
	}
	for _, r := range results {
		if r.Created {
			s.announce() // other nodes may claim it
			break
		}
	}
	return results, nil
}

// scopeRef is what an enqueue needs of a scope: its row ID (0 when no
// scope has the name), provider, idempotency and learned routes.
type scopeRef struct {
	id       int64
	provider string
	idem     providers.Idempotency
	routes   scheduler.Routes
}

// findScopeRef reads what an enqueue needs of the scope name.
func findScopeRef(ctx context.Context, tx pgx.Tx, name string) (scopeRef, error) {
	var (
		ref        scopeRef
		idemHeader string
		spec       *string
		learned    bool
	)
	err := tx.QueryRow(ctx, `SELECT id, provider, idempotency_header, profile_spec,
		EXISTS (SELECT 1 FROM scope_routes r WHERE r.scope_id = scopes.id)
		FROM scopes WHERE name = $1`, name).Scan(&ref.id, &ref.provider, &idemHeader, &spec, &learned)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return scopeRef{}, nil
	case err != nil:
		return scopeRef{}, err
	}
	profile, err := stored.DecodeProfileSpec(sqlString(spec))
	if err != nil {
		return scopeRef{}, err
	}
	ref.idem = scheduler.ScopeIdempotency(ref.provider, idemHeader, profile)
	if learned {
		if ref.routes, err = scopeRoutes(ctx, tx, ref.id); err != nil {
			return scopeRef{}, err
		}
	}
	return ref, nil
}

// enqueueOne stores one operation; a rejection is its result's Err, not
// the returned error.
func enqueueOne(ctx context.Context, tx pgx.Tx, op scheduler.NewOperation, now time.Time, scopes map[string]scopeRef) (scheduler.EnqueueResult, int64, error) {
	scope, ok := scopes[op.Scope]
	if !ok {
		var err error
		if scope, err = findScopeRef(ctx, tx, op.Scope); err != nil {
			return scheduler.EnqueueResult{}, 0, err
		}
		scopes[op.Scope] = scope
	}
	if scope.id == 0 {
		return scheduler.EnqueueResult{Err: fmt.Errorf("%w: %s", scheduler.ErrUnknownScope, op.Scope)}, 0, nil
	}
	headers, err := stored.EncodeHeaders(op.Request.Headers)
	if err != nil {
		return scheduler.EnqueueResult{}, 0, err
	}
	var body []byte
	if len(op.Request.Body) > 0 {
		body = op.Request.Body
	}
	notBefore := op.NotBefore
	if notBefore.IsZero() {
		notBefore = now
	}
	deadline := notBefore.Add(op.Retry.MaxElapsed)
	if scope.idem.Applies(op.Request.Method) {
		other, err := identityHolder(ctx, tx, scope.id, op, scope.idem.Retention, now)
		if err != nil {
			return scheduler.EnqueueResult{}, 0, err
		}
		if other != "" {
			return scheduler.EnqueueResult{Err: fmt.Errorf("%w: operation %s of scope %s sends request identity %q as its idempotency key", scheduler.ErrIdentityInUse, other, op.Scope, op.RequestIdentity)}, 0, nil
		}
	}
	var rowID int64
	err = tx.QueryRow(ctx, `
		INSERT INTO operations (operation_id, scope_id, kind, method, path, headers, body, content_type,
			request_identity, state, next_attempt_at, created_at, updated_at, deadline,
			max_attempts, max_elapsed_ms, content_hash, resource)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'scheduled', $10, $11, $11, $12, $13, $14, $15, $16)
		ON CONFLICT (operation_id) DO NOTHING RETURNING id`,
		op.ID, scope.id, string(op.Kind), op.Request.Method, op.Request.Path, pgString(headers), body, op.Request.ContentType,
		op.RequestIdentity, millis(notBefore), millis(now), millis(deadline),
		op.Retry.MaxAttempts, op.Retry.MaxElapsed.Milliseconds(), op.ContentHash,
		scope.routes.Resource(op.Request.Method, op.Request.Path)).Scan(&rowID)
	switch {
	case errors.Is(err, pgx.ErrNoRows): // the operation ID exists
		existing, err := findOperation(ctx, tx, op.ID, false)
		if err != nil {
			return scheduler.EnqueueResult{}, 0, err
		}
		if existing.ContentHash != op.ContentHash {
			return scheduler.EnqueueResult{Err: fmt.Errorf("%w: operation %s exists with other content", scheduler.ErrConflict, op.ID)}, 0, nil
		}
		return scheduler.EnqueueResult{Operation: existing.Operation}, 0, nil
	case err != nil:
		return scheduler.EnqueueResult{}, 0, err
	}
	stamp := func(t time.Time) time.Time { return fromMillis(millis(t)) }
	created := scheduler.Operation{
		ID: op.ID, Scope: op.Scope, Provider: scope.provider, Kind: op.Kind,
		Request:         scheduler.Request{Method: op.Request.Method, Path: op.Request.Path, Body: body, ContentType: op.Request.ContentType},
		RequestIdentity: op.RequestIdentity, State: scheduler.StateScheduled,
		NextAttemptAt: stamp(notBefore), CreatedAt: stamp(now), UpdatedAt: stamp(now), Deadline: stamp(deadline),
		Retry:       scheduler.Retry{MaxAttempts: op.Retry.MaxAttempts, MaxElapsed: op.Retry.MaxElapsed.Truncate(time.Millisecond)},
		ContentHash: op.ContentHash,
	}
	if headers.Valid {
		created.Request.Headers = maps.Clone(op.Request.Headers)
	}
	return scheduler.EnqueueResult{Operation: created, Created: true}, rowID, nil
}

// identityHolder returns the ID of another operation of the scope that
// holds op's request identity within retention (unfinished, or updated
// less than retention before now), or "" when there is none or op's own
// ID exists already (a repeated enqueue is judged by content). It first
// takes the advisory lock of (scope, identity) until the transaction ends.
func identityHolder(ctx context.Context, tx pgx.Tx, scopeID int64, op scheduler.NewOperation, retention time.Duration, now time.Time) (string, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1::bigint::text || ':' || $2, 0))`,
		scopeID, op.RequestIdentity); err != nil {
		return "", fmt.Errorf("lock request identity: %w", err)
	}
	var other string
	err := tx.QueryRow(ctx, `
		SELECT operation_id FROM operations
		WHERE scope_id = $1 AND request_identity = $2 AND operation_id <> $3
		  AND (updated_at > $4 OR state NOT IN ('succeeded', 'failed', 'canceled'))
		LIMIT 1`,
		scopeID, op.RequestIdentity, op.ID, millis(now.Add(-retention))).Scan(&other)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("find request identity: %w", err)
	}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM operations WHERE operation_id = $1)`, op.ID).Scan(&exists); err != nil {
		return "", fmt.Errorf("find operation: %w", err)
	}
	if exists {
		return "", nil
	}
	return other, nil
}

// readReported sets, on the results of the new operations (row ID → index
// in results), the state, next attempt time and blocked-by they report.
func readReported(ctx context.Context, tx pgx.Tx, created map[int64]int, results []scheduler.EnqueueResult) error {
	if len(created) == 0 {
		return nil
	}
	ids := make([]int64, 0, len(created))
	for id := range created {
		ids = append(ids, id)
	}
	rows, err := tx.Query(ctx, `SELECT o.id, `+opState+`, `+opNextAttemptAt+`, `+opBlockedBy+operationFrom+
		`WHERE o.id = ANY($1)`, ids)
	if err != nil {
		return fmt.Errorf("read the new operations' states: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, next  int64
			state     string
			blockedBy *string
		)
		if err := rows.Scan(&id, &state, &next, &blockedBy); err != nil {
			return fmt.Errorf("read the new operations' states: %w", err)
		}
		op := &results[created[id]].Operation
		op.State, op.NextAttemptAt = scheduler.State(state), fromMillis(next)
		op.BlockedBy = scheduler.BlockedBy(deref(blockedBy))
	}
	return rows.Err()
}
