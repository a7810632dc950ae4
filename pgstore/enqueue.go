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
// scheduler.Store), as the SQLite store does, in order: runs of operations
// of distinct IDs whose request identity needs no search are inserted in
// one statement each (enqueueRun), the others one by one. Every rejection is found
// before anything of its item is written (the scope looked up, the
// operation ID inserted ON CONFLICT DO NOTHING, the request identity
// searched), so no statement fails and the transaction, which any error
// would abort, goes on with the other items. A request identity a
// provider deduplicates is searched under a transaction-scoped advisory
// lock on (scope, identity): two processes enqueueing the same identity
// at once take turns, and the second sees the first's operation.
func (s *Store) Enqueue(ctx context.Context, ops []scheduler.NewOperation, now time.Time) ([]scheduler.EnqueueResult, error) {
	var results []scheduler.EnqueueResult
	err := s.writeHot(ctx, func(tx pgx.Tx) error {
		scopes := map[string]scopeRef{}
		results = make([]scheduler.EnqueueResult, len(ops))
		created := map[int64]int{} // row ID → index of a new operation's result
		for start := 0; start < len(ops); {
			end, err := enqueueRun(ctx, tx, ops, start, now, scopes, results, created)
			if err != nil {
				return err
			}
			if end > start {
				start = end
				continue
			}
			// ops[start] has its request identity searched: alone.
			op := ops[start]
			var rowID int64
			if results[start], rowID, err = enqueueOne(ctx, tx, op, now, scopes); err != nil {
				return fmt.Errorf("enqueue %s: %w", op.ID, err)
			}
			if results[start].Created {
				created[rowID] = start
			}
			start++
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
	row, err := prepareNewOperation(op, scope, now)
	if err != nil {
		return scheduler.EnqueueResult{}, 0, err
	}
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
		op.ID, scope.id, string(op.Kind), op.Request.Method, op.Request.Path, row.headers, row.body, op.Request.ContentType,
		op.RequestIdentity, millis(row.notBefore), millis(now), millis(row.deadline),
		op.Retry.MaxAttempts, op.Retry.MaxElapsed.Milliseconds(), op.ContentHash, row.resource).Scan(&rowID)
	switch {
	case errors.Is(err, pgx.ErrNoRows): // the operation ID exists
		res, err := existingResult(ctx, tx, op)
		return res, 0, err
	case err != nil:
		return scheduler.EnqueueResult{}, 0, err
	}
	return scheduler.EnqueueResult{Operation: row.created(op, scope, now), Created: true}, rowID, nil
}

// newOperationRow is what an enqueue stores of a new operation beyond op's
// own fields.
type newOperationRow struct {
	headers             *string
	body                []byte
	notBefore, deadline time.Time
	resource            string
}

// prepareNewOperation encodes what the enqueue of op in scope at now
// stores.
func prepareNewOperation(op scheduler.NewOperation, scope scopeRef, now time.Time) (newOperationRow, error) {
	headers, err := stored.EncodeHeaders(op.Request.Headers)
	if err != nil {
		return newOperationRow{}, err
	}
	r := newOperationRow{headers: pgString(headers), notBefore: op.NotBefore,
		resource: scope.routes.Resource(op.Request.Method, op.Request.Path)}
	if len(op.Request.Body) > 0 {
		r.body = op.Request.Body
	}
	if r.notBefore.IsZero() {
		r.notBefore = now
	}
	r.deadline = r.notBefore.Add(op.Retry.MaxElapsed)
	return r, nil
}

// created is the new operation as its enqueue reports it (its state and
// next attempt time are set by readReported).
func (r newOperationRow) created(op scheduler.NewOperation, scope scopeRef, now time.Time) scheduler.Operation {
	stamp := func(t time.Time) time.Time { return fromMillis(millis(t)) }
	o := scheduler.Operation{
		ID: op.ID, Scope: op.Scope, Provider: scope.provider, Kind: op.Kind,
		Request:         scheduler.Request{Method: op.Request.Method, Path: op.Request.Path, Body: r.body, ContentType: op.Request.ContentType},
		RequestIdentity: op.RequestIdentity, State: scheduler.StateScheduled,
		NextAttemptAt: stamp(r.notBefore), CreatedAt: stamp(now), UpdatedAt: stamp(now), Deadline: stamp(r.deadline),
		Retry:       scheduler.Retry{MaxAttempts: op.Retry.MaxAttempts, MaxElapsed: op.Retry.MaxElapsed.Truncate(time.Millisecond)},
		ContentHash: op.ContentHash,
	}
	if r.headers != nil {
		o.Request.Headers = maps.Clone(op.Request.Headers)
	}
	return o
}

// existingResult is the result of enqueueing op whose ID exists: the
// stored operation when its content is op's, else a conflict.
func existingResult(ctx context.Context, tx pgx.Tx, op scheduler.NewOperation) (scheduler.EnqueueResult, error) {
	existing, err := findOperation(ctx, tx, op.ID, false)
	if err != nil {
		return scheduler.EnqueueResult{}, err
	}
	if existing.ContentHash != op.ContentHash {
		return scheduler.EnqueueResult{Err: fmt.Errorf("%w: operation %s exists with other content", scheduler.ErrConflict, op.ID)}, nil
	}
	return scheduler.EnqueueResult{Operation: existing.Operation}, nil
}

// enqueueRun stores, from ops[start], the longest run of operations of
// distinct IDs whose request identity needs no search (identityHolder),
// setting their results (and created, row ID → index), and returns where
// the run ended: start when ops[start] needs the search. Those of an
// unknown scope are rejected; the others are inserted in one statement
// (ON CONFLICT DO NOTHING, in order), and those whose ID existed are
// judged by content as enqueueOne does.
func enqueueRun(ctx context.Context, tx pgx.Tx, ops []scheduler.NewOperation, start int, now time.Time,
	scopes map[string]scopeRef, results []scheduler.EnqueueResult, created map[int64]int) (int, error) {
	var (
		idx                                          []int
		rows                                         []newOperationRow
		refs                                         []scopeRef
		opIDs, kinds, methods, paths, ctypes, idents []string
		hashes, resources                            []string
		headers                                      []*string
		bodies                                       [][]byte
		scopeIDs, next, deadlines, maxElapsed        []int64
		maxAttempts                                  []int32
	)
	seen := map[string]bool{}
	end := start
	for ; end < len(ops); end++ {
		op := ops[end]
		if seen[op.ID] {
			break
		}
		scope, ok := scopes[op.Scope]
		if !ok {
			var err error
			if scope, err = findScopeRef(ctx, tx, op.Scope); err != nil {
				return 0, fmt.Errorf("enqueue %s: %w", op.ID, err)
			}
			scopes[op.Scope] = scope
		}
		if scope.id == 0 {
			results[end] = scheduler.EnqueueResult{Err: fmt.Errorf("%w: %s", scheduler.ErrUnknownScope, op.Scope)}
			continue
		}
		if scope.idem.Applies(op.Request.Method) {
			break
		}
		seen[op.ID] = true
		row, err := prepareNewOperation(op, scope, now)
		if err != nil {
			return 0, fmt.Errorf("enqueue %s: %w", op.ID, err)
		}
		idx, rows, refs = append(idx, end), append(rows, row), append(refs, scope)
		opIDs, scopeIDs, kinds, methods = append(opIDs, op.ID), append(scopeIDs, scope.id), append(kinds, string(op.Kind)), append(methods, op.Request.Method)
		paths, headers, bodies, ctypes = append(paths, op.Request.Path), append(headers, row.headers), append(bodies, row.body), append(ctypes, op.Request.ContentType)
		idents, next, deadlines = append(idents, op.RequestIdentity), append(next, millis(row.notBefore)), append(deadlines, millis(row.deadline))
		maxAttempts, maxElapsed = append(maxAttempts, int32(op.Retry.MaxAttempts)), append(maxElapsed, op.Retry.MaxElapsed.Milliseconds())
		hashes, resources = append(hashes, op.ContentHash), append(resources, row.resource)
	}
	if len(idx) == 0 {
		return end, nil
	}
	res, err := tx.Query(ctx, `
		INSERT INTO operations (operation_id, scope_id, kind, method, path, headers, body, content_type,
			request_identity, state, next_attempt_at, created_at, updated_at, deadline,
			max_attempts, max_elapsed_ms, content_hash, resource)
		SELECT n.operation_id, n.scope_id, n.kind, n.method, n.path, n.headers, n.body, n.content_type,
			n.request_identity, 'scheduled', n.next_attempt_at, $14, $14, n.deadline,
			n.max_attempts, n.max_elapsed_ms, n.content_hash, n.resource
		FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[], $8::text[],
			$9::text[], $10::bigint[], $11::bigint[], $12::int[], $13::bigint[], $15::text[], $16::text[]) WITH ORDINALITY
			AS n (operation_id, scope_id, kind, method, path, headers, body, content_type,
				request_identity, next_attempt_at, deadline, max_attempts, max_elapsed_ms, content_hash, resource, k)
		ORDER BY n.k
		ON CONFLICT (operation_id) DO NOTHING RETURNING id, operation_id`,
		opIDs, scopeIDs, kinds, methods, paths, headers, bodies, ctypes,
		idents, next, deadlines, maxAttempts, maxElapsed, millis(now), hashes, resources)
	if err != nil {
		return 0, fmt.Errorf("enqueue %d operations: %w", len(idx), err)
	}
	inserted := make(map[string]int64, len(idx))
	for res.Next() {
		var (
			id   int64
			opID string
		)
		if err := res.Scan(&id, &opID); err != nil {
			res.Close()
			return 0, fmt.Errorf("enqueue %d operations: %w", len(idx), err)
		}
		inserted[opID] = id
	}
	if err := res.Err(); err != nil {
		return 0, fmt.Errorf("enqueue %d operations: %w", len(idx), err)
	}
	for j, i := range idx {
		op := ops[i]
		id, ok := inserted[op.ID]
		if !ok { // the operation ID exists
			if results[i], err = existingResult(ctx, tx, op); err != nil {
				return 0, fmt.Errorf("enqueue %s: %w", op.ID, err)
			}
			continue
		}
		results[i] = scheduler.EnqueueResult{Operation: rows[j].created(op, refs[j], now), Created: true}
		created[id] = i
	}
	return end, nil
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
